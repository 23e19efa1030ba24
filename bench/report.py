"""``python -m bench.report FILE...``: a result file of ``python -m bench`` or
``python -m bench.peers`` as the Markdown table ``docs/benchmarks.md`` shows."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any


def _number(value: float) -> str:
    if math.isnan(value):
        return "n/a"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}" if abs(value) < 10 else f"{value:.1f}"


def bench_table(data: dict[str, Any]) -> str:
    lines = [
        f"{data['database']} ({data['server_version'][:40]}), run {data.get('started_at', '')}, "
        f"commit {str(data.get('commit', ''))[:10]}, `{' '.join(data.get('command', []))}`",
        "",
        "| measure | value | unit | ratio to raw | note |",
        "| --- | ---: | --- | ---: | --- |",
    ]
    for r in data["results"]:
        ratio = f"{r['ratio']:.0%}" if r.get("ratio") is not None else ""
        lines.append(
            f"| {r['name']} | {_number(float(r['value']))} | {r['unit']} | {ratio} | {r['note']} |"
        )
    return "\n".join(lines)


def peers_table(data: dict[str, Any]) -> str:
    lines = [
        f"{data['database']}, run {data['started_at']}, commit {str(data['commit'])[:10]}, "
        f"{data['messages']} messages per workload and round",
        "",
        "| peer | workload | project msg/s | peer jobs/s | project/peer (median) | per round |",
        "| --- | --- | ---: | ---: | ---: | --- |",
    ]
    for row in data["summary"]:
        rounds = ", ".join(f"{r:.2f}" for r in row["ratios"])
        lines.append(
            f"| {row['peer']} | {row['workload']} | {_number(row['project_median'])} | "
            f"{_number(row['peer_median'])} | **{row['median_ratio']:.2f}x** | {rounds} |"
        )
    for peer, reason in data.get("not_run", {}).items():
        lines.append(f"| {peer} | not run | | | | {reason} |")
    return "\n".join(lines)


def main() -> None:
    for name in sys.argv[1:]:
        data = json.loads(Path(name).read_text())
        print(peers_table(data) if "summary" in data else bench_table(data))
        print()


if __name__ == "__main__":
    main()
