"""A URLconf without ``solid_objects.urls``."""

urlpatterns: list[object] = []
