"""Async views of the test project: what a user's ``async def`` view does with ``ref.aio``."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse

from solid_objects import Rejected
from tests.testapp.actors.core import Counter


async def counter_add(request: HttpRequest, actor_id: str) -> JsonResponse:
    amount = int(request.GET.get("amount", "1"))
    value = await Counter.ref(actor_id).aio.add(amount)
    return JsonResponse({"value": value})


async def counter_enqueue(request: HttpRequest, actor_id: str) -> JsonResponse:
    message = await Counter.ref(actor_id).aio.enqueue().append(int(request.GET["n"]))
    status = await message.astatus()
    return JsonResponse({"status": status, "result": await message.aresult(timeout=30)})


async def counter_refuse(request: HttpRequest, actor_id: str) -> JsonResponse:
    try:
        await Counter.ref(actor_id).aio.refuse("closed")
    except Rejected as rejection:
        return JsonResponse({"code": rejection.code}, status=409)
    return JsonResponse({}, status=500)
