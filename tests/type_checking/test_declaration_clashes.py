"""Names a reference or a snapshot answers itself cannot be an actor's operations or state
attributes: refused when the class is defined, with ActorDefinitionError (a TypeError)."""

from __future__ import annotations

import pytest

from solid_objects import Actor, ActorDefinitionError, attribute, observable, query
from solid_objects.spec import RESERVED_ATTRIBUTE_NAMES, RESERVED_OPERATION_NAMES


# actor_id, actor_type and ref are the Actor base class's own (never operations).
@pytest.mark.parametrize("name", sorted(RESERVED_OPERATION_NAMES - set(dir(Actor))))
def test_an_operation_cannot_take_a_reference_name(name: str):
    with pytest.raises(ActorDefinitionError, match=f"cannot be named '{name}'"):
        type(name.title(), (Actor,), {"actor_type": f"clash.op.{name}", name: lambda self: 1})


def test_queries_and_observables_are_operations_too():
    with pytest.raises(ActorDefinitionError, match="'spec'"):

        class QuerySpec(Actor):
            actor_type = "clash.query"

            @query
            def spec(self) -> int:
                return 1

    with pytest.raises(ActorDefinitionError, match="'aio'"):

        class ObservedAio(Actor):
            actor_type = "clash.observable"

            @observable
            def aio(self) -> int:
                return 1


@pytest.mark.parametrize("name", sorted(RESERVED_ATTRIBUTE_NAMES))
def test_a_state_attribute_cannot_take_a_snapshot_name(name: str):
    with pytest.raises(ActorDefinitionError, match=f"cannot be named '{name}'"):
        type(name.title(), (Actor,), {"actor_type": f"clash.attr.{name}", name: attribute(0)})


def test_the_reference_and_snapshot_names_include_the_issue_cases():
    assert {"spec", "aio", "sync", "enqueue", "snapshot", "destroy"} <= RESERVED_OPERATION_NAMES
    assert {"revision", "exists"} <= RESERVED_ATTRIBUTE_NAMES


def test_an_attribute_clashing_with_a_method_is_an_actor_definition_error():
    with pytest.raises(ActorDefinitionError, match="clash with methods"):

        class Clash(Actor):
            actor_type = "clash.method"
            total = attribute(default=0)

        class Child(Clash):
            actor_type = "clash.child"

            def total(self) -> int:  # type: ignore[override]
                return 0


def test_every_reference_name_is_reserved():
    """Whatever ActorReference / AsyncReference answer themselves is reserved (so a new
    method on them cannot silently hide an operation)."""
    from solid_objects.references import ActorReference, AsyncReference, Snapshot

    public = {
        name
        for cls in (ActorReference, AsyncReference)
        for name in dir(cls)
        if not name.startswith("_")
    }
    assert public <= RESERVED_OPERATION_NAMES
    snapshot_fields = {"actor_id", "exists", "revision", "state", "instance_id", "state_version"}
    assert snapshot_fields <= RESERVED_ATTRIBUTE_NAMES
    assert not {n for n in dir(Snapshot) if not n.startswith("_")} - RESERVED_ATTRIBUTE_NAMES


def test_an_async_operation_is_refused():
    with pytest.raises(ActorDefinitionError, match="cannot be async"):

        class AsyncCart(Actor):
            actor_type = "clash.async"

            async def add_item(self, product_id: str) -> int:
                return 1

    with pytest.raises(ActorDefinitionError, match="cannot be async"):

        class AsyncQuery(Actor):
            actor_type = "clash.async.query"

            @query
            async def total(self) -> int:
                return 1


def test_an_async_commit_action_is_refused():
    import solid_objects

    async def create_group(arguments: dict[str, object], context: object) -> None:
        return None

    with pytest.raises(ActorDefinitionError, match="cannot be async"):
        solid_objects.commit_action("clash.async.action")(create_group)
