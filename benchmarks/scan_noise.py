"""Writes sweeper/scan/recorded_noise.py, the simulated scan's noise, from recorded GPU runs:
every directory under the one given, each point of a series measured in two runs or more
(the same directory, point and NCCL environment: sweeper.results.schema.POINT) as its median
block over the median block of its series (`sweeper.scan.noise.relative_times`).

    python benchmarks/scan_noise.py tests/data/results > sweeper/scan/recorded_noise.py
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

import sweeper
from sweeper.results.schema import POINT
from sweeper.scan.noise import relative_times

PER_LINE = 8
HEADER = '''"""Relative point times of the recorded GPU runs in tests/data/results, by size in bytes
(`sweeper.scan.noise`): written by `python benchmarks/scan_noise.py tests/data/results`,
which tests/unit/test_scan_noise.py runs again to hold this table to the data. Not edited.
"""

# eight figures a line, as written
# fmt: off
TIMES: dict[int, tuple[float, ...]] = {
'''


def series(root: Path) -> dict[int, list[list[list[float]]]]:
    """Each size's series: its points' blocks, from the GPU rows (NCCL's) that ran."""
    found: dict[tuple[str, ...], list[list[float]]] = defaultdict(list)
    for directory in sorted(p for p in root.iterdir() if p.is_dir()):
        rows = sweeper.load(directory)
        rows = rows[(rows["backend"] == "nccl") & (rows["status"] == "ok")]
        for row in rows.to_dict("records"):
            blocks = row["time_us_blocks"]
            if blocks is None or len(blocks) == 0:
                continue
            key = (
                directory.name,
                *(str(row[c]) for c in POINT),
                str(row["nccl_env"]),
                str(row["gpu_uuids"]),
            )
            found[key].append([float(b) for b in blocks])
    by_size: dict[int, list[list[list[float]]]] = defaultdict(list)
    size_at = 1 + POINT.index("size_bytes")
    for key, points in found.items():
        by_size[int(key[size_at])].append(points)
    return dict(sorted(by_size.items()))


def table(root: Path) -> str:
    lines = [HEADER]
    for size, points in series(root).items():
        times = sorted(round(t, 4) for t in relative_times(points))
        if not times:
            continue
        lines.append(f"    {size}: (\n")
        for i in range(0, len(times), PER_LINE):
            lines.append("        " + " ".join(f"{t}," for t in times[i : i + PER_LINE]) + "\n")
        lines.append("    ),\n")
    lines.append("}\n# fmt: on\n")
    return "".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=Path, help="a directory of results directories")
    print(table(parser.parse_args().root), end="")


if __name__ == "__main__":
    main()
