"""HTTP routes of live pages: ``path("solid-objects/", include("solid_objects.urls"))``."""

from __future__ import annotations

from django.urls import path

from . import views

app_name = "solid_objects"
urlpatterns = [
    path("observed/", views.observed_values, name="observed_values"),
]
