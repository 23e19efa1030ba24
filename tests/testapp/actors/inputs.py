"""Actors of the bad-input tests (``tests/adversarial/test_actor_inputs.py`` and
``tests/runtime/test_bad_input_*.py``): handlers that return, store and reject what they are
given, and handlers that build, from a JSON *recipe*, values no argument could carry (a lone
surrogate, a NUL, NaN, a huge integer) to put them in a turn's output.

A recipe is any JSON value in which ``{"__bad__": kind}`` stands for ``BAD_VALUES[kind]()``.
"""

from __future__ import annotations

from typing import Any

from solid_objects import Actor, Rejected, attribute, migrate_state, observable, query


def _nested(levels: int) -> Any:
    value: Any = "bottom"
    for _ in range(levels):
        value = [value]
    return value


#: What a recipe's ``{"__bad__": kind}`` becomes inside the handler.
BAD_VALUES: dict[str, Any] = {
    "nul": lambda: "before\x00after",
    "surrogate": lambda: "lone \ud800 surrogate",
    "nul_and_surrogate": lambda: "nul \x00 and lone \udc00 surrogate",
    "nul_key": lambda: {"key\x00": 1},
    "surrogate_key": lambda: {"\udfff": 1},
    "int_key": lambda: {1: "one"},
    "huge_int": lambda: 10**4300,
    "nan": lambda: float("nan"),
    "inf": lambda: float("-inf"),
    "set": lambda: {1, 2},
    "bytes": lambda: b"bytes",
    "object": lambda: object(),
    "too_deep": lambda: _nested(150),
}


def build(recipe: Any) -> Any:
    """The value a recipe describes (see the module docstring)."""
    if isinstance(recipe, dict):
        if set(recipe) == {"__bad__"}:
            return BAD_VALUES[recipe["__bad__"]]()
        return {key: build(value) for key, value in recipe.items()}
    if isinstance(recipe, list):
        return [build(value) for value in recipe]
    return recipe


class NotRetryable(Exception):
    """A handler's own error that dead-letters at once."""

    retryable = False


class Echo(Actor):
    """Returns, keeps or rejects its argument; ``*_built`` operations use a recipe."""

    actor_type = "tests.inputs.echo"

    data = attribute(default=None)

    def echo(self, value: Any = None) -> Any:
        return value

    def keep(self, value: Any = None) -> bool:
        self.data = value
        return True

    @query
    def current(self) -> Any:
        return self.data

    def refuse(self, details: Any = None) -> None:
        self.reject("refused", "refused on purpose", details=details)

    def refuse_with(self, code: str, details: Any) -> None:
        self.reject(code, "generated", details=details)

    def return_built(self, recipe: Any) -> Any:
        return build(recipe)

    def keep_built(self, recipe: Any) -> bool:
        self.data = build(recipe)
        return True

    def refuse_built(self, recipe: Any) -> None:
        self.reject("refused", "refused on purpose", details=build(recipe))

    def raise_rejected(self, code: Any) -> None:
        """``Rejected`` raised directly, bypassing ``reject()``'s check of the code."""
        raise Rejected(build(code), "raised directly")

    def emit_built(self, recipe: Any) -> bool:
        self.emit("tests.inputs.sink", value=build(recipe))
        return True

    def send_built(self, recipe: Any) -> bool:
        self.send_to(Echo.ref("sent-to")).echo(build(recipe))
        return True

    def schedule_built(self, delay: Any) -> bool:
        self.schedule(delay=build(delay)).echo()
        return True

    def fail_built(self, recipe: Any) -> None:
        raise NotRetryable(build(recipe))


class Shown(Actor):
    """An observable built from a recipe kept in the state (its broadcast value is written
    inside the fenced commit)."""

    actor_type = "tests.inputs.shown"

    recipe = attribute(default=None)

    def show(self, recipe: Any) -> bool:
        self.recipe = recipe
        return True

    @observable(broadcast="value")
    def shown(self) -> Any:
        return build(self.recipe)


class BadMigration(Actor):
    """A state migration whose output cannot be stored when the old state asks for it."""

    actor_type = "tests.inputs.bad_migration"
    state_version = 2

    hits = attribute(default=0)

    def bump(self) -> int:
        self.hits = self.hits + 1
        return self.hits

    @migrate_state(1, 2)
    def upgrade(state: dict[str, Any]) -> dict[str, Any]:
        return {**state, "upgraded": build(state.get("recipe"))}
