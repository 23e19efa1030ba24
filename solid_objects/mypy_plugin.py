"""A mypy plugin: calls through actor references are checked against the actor class.

Enable it next to django-stubs' plugin in your mypy configuration::

    [tool.mypy]
    plugins = ["mypy_django_plugin.main", "solid_objects.mypy_plugin"]

``Cart.ref("a")`` is an ``ActorReference[Cart]``. Its operations are looked up dynamically at
run time (``__getattr__``), so on its own mypy would see ``Any``. The plugin resolves
``ref.<name>`` to the ``Cart`` method of that name, ``self`` bound, and gives it the type
the call really has:

=====================================================  ==========================================
``ref.op(...)``, ``ref.sync(...).op(...)``              the method's own signature and result ``R``
``ref.enqueue(...).op(...)``                            same arguments, ``MessageReference[R]``
``ref.aio.op(...)``, ``ref.aio.sync(...).op(...)``      same arguments, ``Coroutine[Any, Any, R]``
``ref.aio.enqueue(...).op(...)``                        ``Coroutine[Any, Any, MessageReference[R]]``
``snap.<attribute>`` (``ref.snapshot()``)               the attribute's type (``attribute[T]``)
=====================================================  ==========================================

A name that is not an operation of the actor (a typo, an attribute, a private or a
base-class method) is reported as ``attr-defined``; a reference whose actor class is not
known (``solid_objects.ref("shop.cart", "a")``) stays ``Any``.
"""

from __future__ import annotations

from collections.abc import Callable

from mypy.checker import TypeChecker
from mypy.errorcodes import ATTR_DEFINED
from mypy.nodes import Decorator, FuncDef, OverloadedFuncDef, TypeInfo, Var
from mypy.plugin import AttributeContext, Plugin
from mypy.typeops import bind_self
from mypy.types import (
    AnyType,
    CallableType,
    FunctionLike,
    Instance,
    Overloaded,
    Type,
    TypeOfAny,
    get_proper_type,
)

REFERENCES = "solid_objects.references"
ACTOR = "solid_objects.actor.Actor"
ATTRIBUTE = "solid_objects.spec.attribute"
MESSAGE_REFERENCE = f"{REFERENCES}.MessageReference"
COROUTINE = "typing.Coroutine"

#: The classes whose ``__getattr__`` answers operations, and how each wraps the result.
SYNC, ENQUEUE, AWAIT, AWAIT_ENQUEUE = "sync", "enqueue", "await", "await-enqueue"
OPERATION_FACES = {
    f"{REFERENCES}.ActorReference": SYNC,
    f"{REFERENCES}._SyncCalls": SYNC,
    f"{REFERENCES}._EnqueueCalls": ENQUEUE,
    f"{REFERENCES}.AsyncReference": AWAIT,
    f"{REFERENCES}._AsyncSyncCalls": AWAIT,
    f"{REFERENCES}._AsyncEnqueueCalls": AWAIT_ENQUEUE,
}
SNAPSHOT = f"{REFERENCES}.Snapshot"


class SolidObjectsPlugin(Plugin):
    def get_attribute_hook(self, fullname: str) -> Callable[[AttributeContext], Type] | None:
        owner, _, _ = fullname.rpartition(".")
        face = OPERATION_FACES.get(owner)
        if face is not None:
            return lambda ctx: _operation(ctx, fullname.rpartition(".")[2], face)
        if owner == SNAPSHOT:
            return lambda ctx: _state_attribute(ctx, fullname.rpartition(".")[2])
        return None


def plugin(version: str) -> type[Plugin]:
    return SolidObjectsPlugin


def _own(ctx: AttributeContext, name: str) -> bool:
    """Whether the reference (or snapshot) class has ``name`` itself (``ref.aio``,
    ``snap.revision``): mypy calls the hook for those too, with their real type."""
    face = get_proper_type(ctx.type)
    return isinstance(face, Instance) and face.type.get(name) is not None


def _actor_of(ctx: AttributeContext) -> Instance | None:
    """The actor class a reference type is parameterised with (``None``: unknown, Any)."""
    reference = get_proper_type(ctx.type)
    if not isinstance(reference, Instance) or not reference.args:
        return None
    actor = get_proper_type(reference.args[0])
    if not isinstance(actor, Instance):
        return None
    return actor


def _defining_class(info: TypeInfo, name: str) -> TypeInfo | None:
    for klass in info.mro:
        if name in klass.names:
            return klass
    return None


def _operation(ctx: AttributeContext, name: str, face: str) -> Type:
    actor = _actor_of(ctx)
    if actor is None or _own(ctx, name):
        return ctx.default_attr_type
    owner = _defining_class(actor.type, name)
    signature: Type | None = None
    if owner is not None and not name.startswith("_") and _is_actor_class(owner):
        node = owner.names[name].node
        if isinstance(node, Decorator):  # @query, @observable...: the function as written
            signature = node.func.type
        elif isinstance(node, FuncDef | OverloadedFuncDef):
            signature = node.type
        else:  # a state attribute or another class-level value: not an operation
            owner = None
    if owner is None or not _is_actor_class(owner) or name.startswith("_"):
        ctx.api.fail(
            f'"{actor.type.name}" has no operation "{name}"', ctx.context, code=ATTR_DEFINED
        )
        return AnyType(TypeOfAny.from_error)
    function = get_proper_type(signature)
    if not isinstance(function, FunctionLike):  # an unannotated method: arguments unchecked
        return ctx.default_attr_type
    bound = bind_self(function, actor)
    return _wrap(ctx, bound, face)


def _is_actor_class(info: TypeInfo) -> bool:
    """A class below ``Actor`` (the base class's own methods are not operations)."""
    return info.fullname != ACTOR and any(base.fullname == ACTOR for base in info.mro)


def _wrap(ctx: AttributeContext, function: FunctionLike, face: str) -> Type:
    if isinstance(function, Overloaded):
        items = [_wrap_one(ctx, item, face) for item in function.items]
        return Overloaded(items)
    assert isinstance(function, CallableType)
    return _wrap_one(ctx, function, face)


def _wrap_one(ctx: AttributeContext, function: CallableType, face: str) -> CallableType:
    result = function.ret_type
    if face in (ENQUEUE, AWAIT_ENQUEUE):
        result = Instance(_message_reference(ctx), [result])
    if face in (AWAIT, AWAIT_ENQUEUE):
        anything = AnyType(TypeOfAny.special_form)
        result = ctx.api.named_generic_type(COROUTINE, [anything, anything, result])
    return function.copy_modified(ret_type=result)


def _message_reference(ctx: AttributeContext) -> TypeInfo:
    """The ``MessageReference`` class (looked up in its module: the package's own namespace
    need not list the submodule)."""
    checker = ctx.api
    assert isinstance(checker, TypeChecker)
    node = checker.modules[REFERENCES].names[MESSAGE_REFERENCE.rpartition(".")[2]].node
    assert isinstance(node, TypeInfo)
    return node


def _state_attribute(ctx: AttributeContext, name: str) -> Type:
    actor = _actor_of(ctx)
    if actor is None or _own(ctx, name):
        return ctx.default_attr_type
    owner = _defining_class(actor.type, name)
    node = owner.names[name].node if owner is not None else None
    if owner is None or not _is_actor_class(owner) or not isinstance(node, Var):
        ctx.api.fail(
            f'"{actor.type.name}" has no state attribute "{name}"', ctx.context, code=ATTR_DEFINED
        )
        return AnyType(TypeOfAny.from_error)
    declared = get_proper_type(node.type)
    if isinstance(declared, Instance) and declared.type.fullname == ATTRIBUTE and declared.args:
        return declared.args[0]
    if declared is None:  # not inferred yet, or not an attribute(): nothing to check
        return ctx.default_attr_type
    ctx.api.fail(
        f'"{actor.type.name}.{name}" is not a state attribute', ctx.context, code=ATTR_DEFINED
    )
    return AnyType(TypeOfAny.from_error)
