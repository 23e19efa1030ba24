from django.contrib import admin
from django.urls import include, path

from tests.testapp import views

urlpatterns = [
    path("admin/", admin.site.urls),
    path("solid-objects/", include("solid_objects.urls")),
    path("ops/", include("solid_objects.monitoring_urls")),
    # Async views of the async-API tests (tests/asynchronous/test_asgi_server.py).
    path("counter/<str:actor_id>/add", views.counter_add),
    path("counter/<str:actor_id>/enqueue", views.counter_enqueue),
    path("counter/<str:actor_id>/refuse", views.counter_refuse),
    path("counter/<str:actor_id>/snapshot", views.counter_snapshot),
    path("counter/<str:actor_id>/find", views.counter_find),
    path("counter/<str:actor_id>/destroy", views.counter_destroy),
    path("activity/record", views.activity_record),
    path("activity/record-many", views.activity_record_many),
    path("activity/cancel", views.activity_cancel),
    path("activity/entries", views.activity_entries),
]
