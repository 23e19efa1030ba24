"""Run spin on the protocol model (docs/protocol/solid_objects.pml) and read pan's report.

One :class:`Check` is one verification run: ``spin -a`` with the check's ``-D`` flags, pan
compiled with gcc, run in a temporary directory. :func:`verify` returns a :class:`Verdict`
with pan's figures; when pan found a violation, ``spin -t`` replays its trail and the
model's ``printf`` narration of that interleaving is kept.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

MODEL = Path(__file__).resolve().parents[2] / "docs" / "protocol" / "solid_objects.pml"
REPORT_ENV = "SOLID_MODEL_REPORT"
#: pan stops (and says so) rather than take more memory than this, in MB.
MEMORY_LIMIT_MB = 2048
#: A depth bound far above what any run reaches (about 200): pan says when it is too small.
MAX_DEPTH = 100_000
#: Seconds any one of spin, gcc or pan may take before the check fails.
STEP_TIMEOUT = 600

#: pan's words for a search that did not cover the whole state space.
INCOMPLETE = (
    "max search depth too small",
    "reached -DMEMLIM bound",
    "out of memory",
    "Search not completed",
)


class ToolMissing(RuntimeError):
    """spin or gcc is not installed."""


@dataclass(frozen=True)
class Check:
    """One run of the model checker."""

    name: str
    description: str
    defines: tuple[str, ...] = ()
    liveness: bool = False
    #: ``None``: the property must hold. Otherwise text pan's report must contain (the
    #: violation the broken variant is known for).
    expect_violation: str | None = None

    @property
    def spin_flags(self) -> list[str]:
        flags = [f"-D{define}" for define in self.defines]
        return [*flags, "-DLIVENESS"] if self.liveness else flags

    @property
    def gcc_flags(self) -> list[str]:
        mode = ["-DNFAIR=3"] if self.liveness else ["-DSAFETY"]
        # A broken variant's counterexample is searched for its shortest trail (-i).
        shortest = ["-DREACH"] if self.expect_violation else []
        return ["-O2", *mode, *shortest, "-DCOLLAPSE", f"-DMEMLIM={MEMORY_LIMIT_MB}"]

    @property
    def pan_flags(self) -> list[str]:
        flags = [f"-m{MAX_DEPTH}", *(["-a", "-f"] if self.liveness else [])]
        return [*flags, "-i"] if self.expect_violation else flags

    def command_line(self) -> str:
        """How to run this check by hand from docs/protocol/."""
        spin = " ".join(["spin", "-a", *self.spin_flags, "solid_objects.pml"])
        gcc = " ".join(["gcc", *self.gcc_flags, "-o", "pan", "pan.c"])
        pan = " ".join(["./pan", *self.pan_flags])
        return f"{spin} && {gcc} && {pan}"


@dataclass
class Verdict:
    """What pan reported."""

    check: str
    errors: int
    states_stored: float
    states_visited: float | None
    transitions: float
    depth: int
    pan_seconds: float
    memory_mb: float
    wall_seconds: float
    incomplete: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    trail: list[str] = field(default_factory=list)
    output: str = ""

    def figures(self) -> dict[str, Any]:
        """The figures for the report (no raw output)."""
        data = asdict(self)
        del data["output"]
        return data

    def summary(self) -> str:
        visited = (
            f" ({self.states_visited:,.0f} visited)" if self.states_visited is not None else ""
        )
        return (
            f"model {self.check}: errors={self.errors} states={self.states_stored:,.0f}"
            f"{visited} transitions={self.transitions:,.0f} depth={self.depth} "
            f"pan={self.pan_seconds:.1f}s wall={self.wall_seconds:.1f}s "
            f"memory={self.memory_mb:.0f}MB"
        )


def require_tools() -> None:
    """Fail clearly (never skip) when the model checker or the compiler is missing."""
    missing = [tool for tool in ("spin", "gcc") if shutil.which(tool) is None]
    if missing:
        raise ToolMissing(
            f"{' and '.join(missing)} not found: the protocol model needs them "
            "(Debian/Ubuntu: apt-get install spin gcc)"
        )


def _run(command: list[str], cwd: Path) -> str:
    try:
        done = subprocess.run(
            command,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=STEP_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"{' '.join(command)} took more than {STEP_TIMEOUT}s") from exc
    if done.returncode != 0 and command[0] != "./pan":
        raise AssertionError(
            f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
        )
    return done.stdout + done.stderr


def _number(pattern: str, text: str, default: float | None = None) -> float:
    match = re.search(pattern, text)
    if match is None:
        if default is not None:
            return default
        raise AssertionError(f"pan's report has no match for {pattern!r}:\n{text}")
    return float(match.group(1))


def parse(check: Check, output: str, wall_seconds: float) -> Verdict:
    """Read pan's final report."""
    visited = re.search(r"states, stored \(([\d.e+]+) visited\)", output)
    return Verdict(
        check=check.name,
        errors=int(_number(r"errors: (\d+)", output)),
        states_stored=_number(r"([\d.e+]+) states, stored", output),
        states_visited=float(visited.group(1)) if visited else None,
        transitions=_number(r"([\d.e+]+) transitions \(=", output),
        depth=int(_number(r"depth reached (\d+)", output)),
        pan_seconds=_number(r"pan: elapsed time ([\d.e+]+) seconds", output, 0.0),
        memory_mb=_number(r"([\d.]+)\s+total actual memory usage", output, 0.0),
        wall_seconds=wall_seconds,
        incomplete=[phrase for phrase in INCOMPLETE if phrase in output],
        violations=re.findall(r"pan:\d+: (.*?) \(at depth \d+\)", output),
        output=output,
    )


def narration(check: Check, workdir: Path) -> list[str]:
    """Replay pan's trail: the model's printf lines, then spin's words on the violation."""
    if not (workdir / "solid_objects.pml.trail").exists():
        return []
    output = _run(["spin", "-t", *check.spin_flags, "solid_objects.pml"], workdir)
    lines = []
    for line in output.splitlines():
        if line.startswith("spin: trail ends") or line.startswith("#processes"):
            break
        if line.strip() and not line.startswith(("ltl ", "Never claim", "      <<<<<")):
            text = line.strip()
            lines.append(text if len(text) <= 120 else text[:117] + "...")
        elif "START OF CYCLE" in line:
            lines.append("(the cycle starts here)")
    return lines


def verify(check: Check, workdir: Path) -> Verdict:
    """Generate, compile and run the verifier for ``check`` in ``workdir``."""
    require_tools()
    shutil.copy(MODEL, workdir / MODEL.name)
    started = time.monotonic()
    _run(["spin", "-a", *check.spin_flags, MODEL.name], workdir)
    _run(["gcc", *check.gcc_flags, "-o", "pan", "pan.c"], workdir)
    output = _run(["./pan", *check.pan_flags], workdir)
    verdict = parse(check, output, time.monotonic() - started)
    if verdict.errors:
        verdict.trail = narration(check, workdir)
    return verdict


def merge_report(verdict: Verdict) -> None:
    """Merge the figures into the JSON file named by ``SOLID_MODEL_REPORT`` (if set)."""
    path = os.environ.get(REPORT_ENV, "").strip()
    if not path:
        return
    target = Path(path)
    report = json.loads(target.read_text()) if target.exists() and target.stat().st_size else {}
    report[verdict.check] = verdict.figures()
    target.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
