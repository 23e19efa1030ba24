from django.contrib import admin

from .models import MemberCounter


@admin.register(MemberCounter)
class MemberCounterAdmin(admin.ModelAdmin):
    list_display = ("member", "verb", "count", "quantity")
    search_fields = ("=member",)
    list_filter = ("verb",)
