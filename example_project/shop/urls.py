from django.urls import path

from . import views

app_name = "shop"
urlpatterns = [
    path("", views.home, name="home"),
    path("cart/add/<str:product_id>/", views.add, name="add"),
    path("cart/remove/<str:product_id>/", views.remove, name="remove"),
    path("cart/checkout/", views.checkout, name="checkout"),
    path("feed/", views.feed, name="feed"),
]
