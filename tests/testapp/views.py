"""Async views of the test project: what a user's ``async def`` view does with ``ref.aio``
and the journal's awaitable functions."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, JsonResponse

from solid_objects import InvalidPayload, Rejected
from tests.testapp.actors.core import Counter
from tilttek_activity import (
    ActivityEntry,
    ActivityNotFound,
    IdempotencyConflict,
    Recorded,
    acancel_activity,
    aentries,
    arecord_activities,
    arecord_activity,
)


async def counter_add(request: HttpRequest, actor_id: str) -> JsonResponse:
    amount = int(request.GET.get("amount", "1"))
    value = await Counter.ref(actor_id).aio.add(amount)
    return JsonResponse({"value": value})


async def counter_enqueue(request: HttpRequest, actor_id: str) -> JsonResponse:
    enqueue = Counter.ref(actor_id).aio.enqueue(idempotency_key=request.GET.get("key"))
    message = await enqueue.append(int(request.GET["n"]))
    status = await message.astatus()
    return JsonResponse(
        {"id": message.id, "status": status, "result": await message.aresult(timeout=30)}
    )


async def counter_refuse(request: HttpRequest, actor_id: str) -> JsonResponse:
    try:
        await Counter.ref(actor_id).aio.refuse("closed")
    except Rejected as rejection:
        return JsonResponse({"code": rejection.code}, status=409)
    return JsonResponse({}, status=500)


async def counter_snapshot(request: HttpRequest, actor_id: str) -> JsonResponse:
    snap = await Counter.ref(actor_id).aio.snapshot()
    return JsonResponse(
        {"exists": snap.exists, "revision": snap.revision, "value": snap.value, "seen": snap.seen}
    )


async def counter_find(request: HttpRequest, actor_id: str) -> JsonResponse:
    try:
        message = await Counter.ref(actor_id).aio.find_message(idempotency_key=request.GET["key"])
    except InvalidPayload as invalid:
        return JsonResponse({"error": type(invalid).__name__}, status=400)
    if message is None:
        return JsonResponse({}, status=404)
    outcome = await message.aoutcome()
    return JsonResponse({"id": message.id, "status": outcome.status, "result": outcome.result})


async def counter_destroy(request: HttpRequest, actor_id: str) -> JsonResponse:
    return JsonResponse({"destroyed": await Counter.ref(actor_id).aio.destroy()})


def _recorded(recorded: Recorded) -> dict[str, Any]:
    return {"created": recorded.created, **_entry(recorded.entry)}


def _entry(entry: ActivityEntry) -> dict[str, Any]:
    return {
        "position": entry.position,
        "kind": entry.kind,
        "key": entry.idempotency_key,
        "member": entry.member,
        "verb": entry.verb,
        "quantity": entry.quantity,
    }


async def activity_record(request: HttpRequest) -> JsonResponse:
    try:
        recorded = await arecord_activity(
            request.GET["member"],
            request.GET["verb"],
            quantity=int(request.GET.get("quantity", "1")),
            idempotency_key=request.GET["key"],
        )
    except IdempotencyConflict as conflict:
        return JsonResponse({"conflict": list(conflict.fields)}, status=409)
    return JsonResponse(_recorded(recorded))


async def activity_record_many(request: HttpRequest) -> JsonResponse:
    member = request.GET["member"]
    items = [
        {"member": member, "verb": verb, "idempotency_key": f"{member}:{verb}"}
        for verb in request.GET["verbs"].split(",")
    ]
    return JsonResponse({"recorded": [_recorded(r) for r in await arecord_activities(items)]})


async def activity_cancel(request: HttpRequest) -> JsonResponse:
    try:
        recorded = await acancel_activity(request.GET["key"])
    except ActivityNotFound as missing:
        return JsonResponse({"missing": missing.idempotency_key}, status=404)
    return JsonResponse(_recorded(recorded))


async def activity_entries(request: HttpRequest) -> JsonResponse:
    feed = await aentries(member=request.GET["member"], kind=None, newest_first=True)
    return JsonResponse({"entries": [_entry(entry) for entry in feed]})
