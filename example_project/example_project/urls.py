from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("solid-objects/", include("solid_objects.urls")),  # observed_values (live pages)
    path("", include("shop.urls")),
]
