"""Print the adversarial suites' figures compactly: python3 .ci/figures.py REPORT_DIR.

Reads the JSON reports the suites write when SOLID_REPORT_DIR is set (.ci/test-matrix):
soak-*.json, restart-*.json, partition-*.json, model-*.json and hypothesis-*.json; scalar
figures only.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def scalars(values: dict) -> str:
    return ", ".join(
        f"{key}={value}"
        for key, value in values.items()
        if isinstance(value, int | float | str | bool) and key not in ("kill_schedule",)
    )


def main(folder: str) -> None:
    for path in sorted(Path(folder).glob("*.json")):
        data = json.loads(path.read_text())
        kind = path.name.split("-", 1)[0]
        if kind == "hypothesis":
            total = sum(v for v in data.values() if isinstance(v, int))
            print(f"{path.stem}: {total} distinct generated inputs over {len(data)} tests")
            continue
        for name, values in data.items():
            if isinstance(values, dict):
                print(f"{path.stem} {name}: {scalars(values)}")
            else:
                print(f"{path.stem} {name}: {values}")


if __name__ == "__main__":
    main(sys.argv[1])
