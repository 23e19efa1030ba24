from django.contrib import admin
from django.urls import path

from tests.testapp import views

urlpatterns = [
    path("admin/", admin.site.urls),
    path("counter/<str:actor_id>/add", views.counter_add),
    path("counter/<str:actor_id>/enqueue", views.counter_enqueue),
    path("counter/<str:actor_id>/refuse", views.counter_refuse),
]
