"""Where SQL lives (docs/architecture.md, "Where SQL lives"), checked on the source.

- No module of either app outside its ``db/`` package sends SQL (``execute``,
  ``executemany``, ``callproc``, ``Manager.raw``, ``QuerySet.extra``, ``RawSQL``) or reads a
  cursor's rows, except the maintenance modules (retention, status, diagnostics), which
  keep their own statements. A cursor opened outside ``db/`` is the transaction handle the
  statements of ``db/`` take: it is only handed on (passed as an argument), never used.
- No module outside ``db/`` branches on the database vendor.
- No module of ``db/`` edits SQL by string replacement (``str.replace`` with positional
  arguments; the one exception escapes a ``LIKE`` parameter's value, not SQL).
- Every module-level string of a ``db/`` module (its statements and their fragments) has a
  ``#:`` description line.

The walks count every call in every module; each test also runs its walk on a small
package with one violation of each kind, so a walk that stopped seeing them would fail.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Collection, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("solid_objects", "tilttek_activity")

#: The maintenance modules, which keep their own SQL (docs/architecture.md).
MAINTENANCE = {
    "solid_objects/retention.py",
    "solid_objects/status.py",
    "solid_objects/diagnostics.py",
    "tilttek_activity/status.py",
}

#: Calls that send SQL or read what it returned.
SQL_CALLS = {"execute", "executemany", "callproc", "fetchone", "fetchall", "fetchmany"}
#: ORM escapes to raw SQL.
RAW_CALLS = {"raw", "extra"}

#: ``.replace(...)`` with positional arguments allowed in ``db/``, by module and function:
#: escaping the value of a ``LIKE`` parameter (its ``%``, ``_`` and escape character).
REPLACE_ALLOWED = {"solid_objects/db/work_filter.py": {"like_prefix"}}


def _sources() -> Iterator[tuple[str, Path]]:
    """``(path relative to the repository, path)`` of every module of both apps except
    migrations."""
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if "/migrations/" not in relative:
                yield relative, path


def _in_db(relative: str) -> bool:
    return "/db/" in relative


def _module_name(relative: str) -> str:
    name = relative.removesuffix(".py").replace("/", ".")
    return name.removesuffix(".__init__")


def _is_cursor_call(node: ast.AST) -> bool:
    """``<something>.cursor()``: a Django connection's cursor."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "cursor"
    )


def sql_outside_db(source: str) -> list[str]:
    """Where the module ``source`` sends SQL, reads rows, or uses a cursor it opened."""
    tree = ast.parse(source)
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                imported.add(alias.asname or alias.name.split(".")[0])
    found = []
    cursors = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in SQL_CALLS | RAW_CALLS:
                if isinstance(func.value, ast.Name) and func.value.id in imported:
                    continue  # a function of an imported module (``resharding.execute``)
                found.append(f"line {node.lineno}: .{func.attr}()")
            elif isinstance(func, ast.Name) and func.id == "RawSQL":
                found.append(f"line {node.lineno}: RawSQL()")
        elif isinstance(node, ast.withitem) and _is_cursor_call(node.context_expr):
            if isinstance(node.optional_vars, ast.Name):
                cursors.add(node.optional_vars.id)
        elif isinstance(node, ast.Assign) and _is_cursor_call(node.value):
            cursors.update(t.id for t in node.targets if isinstance(t, ast.Name))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in cursors
        ):
            found.append(f"line {node.lineno}: {node.value.id}.{node.attr} (a cursor used)")
    return found


def vendor_branches(source: str) -> list[str]:
    """Comparisons of a ``vendor`` attribute (``connection.vendor == ...``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            for side in [node.left, *node.comparators]:
                if isinstance(side, ast.Attribute) and side.attr == "vendor":
                    found.append(f"line {node.lineno}: .vendor compared")
    return found


def replacements(source: str, allowed: Collection[str] = ()) -> list[str]:
    """``.replace(...)`` calls with positional arguments, outside the functions ``allowed``."""
    found = []

    def visit(node: ast.AST, function: str) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            function = node.name
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "replace"
            and node.args
            and function not in allowed
        ):
            found.append(f"line {node.lineno}: .replace() in {function or 'the module'}")
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(ast.parse(source), "")
    return found


def undescribed(source: str, values: dict[str, object]) -> list[str]:
    """Module-level names bound to a string (``values``: the module's namespace) whose
    assignment has no ``#:`` line right above it."""
    lines = source.splitlines()
    found = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names = [node.target.id]
        else:
            continue
        for name in names:
            if not name.lstrip("_").isupper() or not isinstance(values.get(name), str):
                continue
            above = lines[node.lineno - 2].strip() if node.lineno > 1 else ""
            if not above.startswith("#:"):
                found.append(f"line {node.lineno}: {name}")
    return found


# -- the rules, on both apps ---------------------------------------------------------------------
def test_no_module_outside_db_runs_sql() -> None:
    found = {
        relative: where
        for relative, path in _sources()
        if not _in_db(relative) and relative not in MAINTENANCE
        if (where := sql_outside_db(path.read_text()))
    }
    assert found == {}, "SQL outside db/ (move it into the app's db/ package):\n" + "\n".join(
        f"{relative}: {', '.join(where)}" for relative, where in found.items()
    )


def test_no_vendor_branch_outside_db() -> None:
    found = {
        relative: where
        for relative, path in _sources()
        if not _in_db(relative)
        if (where := vendor_branches(path.read_text()))
    }
    assert found == {}, "vendor branches outside db/ (declare a dialect capability):\n" + (
        "\n".join(f"{relative}: {', '.join(where)}" for relative, where in found.items())
    )


def test_no_statement_of_db_is_edited_by_string_replacement() -> None:
    found = {
        relative: where
        for relative, path in _sources()
        if _in_db(relative)
        if (where := replacements(path.read_text(), REPLACE_ALLOWED.get(relative, ())))
    }
    assert found == {}, "SQL edited by str.replace in db/ (compose named fragments):\n" + (
        "\n".join(f"{relative}: {', '.join(where)}" for relative, where in found.items())
    )


def test_every_statement_of_db_has_a_description() -> None:
    found = {}
    for relative, path in _sources():
        if not _in_db(relative):
            continue
        module = importlib.import_module(_module_name(relative))
        if where := undescribed(path.read_text(), vars(module)):
            found[relative] = where
    assert found == {}, "module-level strings of db/ without a '#:' line:\n" + "\n".join(
        f"{relative}: {', '.join(where)}" for relative, where in found.items()
    )


# -- the walks see what they look for -----------------------------------------------------------
VIOLATIONS = """
from django.db import connection
from django.db.models.expressions import RawSQL
from . import resharding

def run(alias):
    resharding.execute([alias])  # an imported module's function: not SQL
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    other = connection.cursor()
    other.close()
    connection.cursor().executemany("SELECT %s", [[1]])
    Model.objects.raw("SELECT 1")
    Model.objects.extra(where=["1 = 1"])
    RawSQL("SELECT 1", [])
    if connection.vendor == "sqlite":
        pass
    return "SELECT x".replace("x", "y"), value.replace(tzinfo=None)

def like(value):
    return value.replace("%", "!%")

STATEMENT = "SELECT 1"
#: Described.
DESCRIBED = "SELECT 2"
"""


def test_the_walks_find_every_kind_of_violation() -> None:
    assert sorted(sql_outside_db(VIOLATIONS)) == [
        "line 11: other.close (a cursor used)",
        "line 12: .executemany()",
        "line 13: .raw()",
        "line 14: .extra()",
        "line 15: RawSQL()",
        "line 9: .execute()",
        "line 9: cursor.execute (a cursor used)",
    ]
    assert vendor_branches(VIOLATIONS) == ["line 16: .vendor compared"]
    assert replacements(VIOLATIONS) == [
        "line 18: .replace() in run",
        "line 21: .replace() in like",
    ]
    assert replacements(VIOLATIONS, {"like", "run"}) == []
    namespace = {"STATEMENT": "SELECT 1", "DESCRIBED": "SELECT 2"}
    assert undescribed(VIOLATIONS, namespace) == ["line 23: STATEMENT"]


@pytest.mark.parametrize("package", PACKAGES)
def test_the_walks_read_every_module(package: str) -> None:
    modules = [relative for relative, _ in _sources() if relative.startswith(f"{package}/")]
    assert len([m for m in modules if _in_db(m)]) > 5, modules
    assert len([m for m in modules if not _in_db(m)]) > 10, modules
