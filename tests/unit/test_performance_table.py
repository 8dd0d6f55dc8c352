"""docs/PERFORMANCE.md's table and the descriptors must say the same thing, for n = 2, 4, 8."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweeper.collectives import REGISTRY

DOC = Path(__file__).parents[2] / "docs" / "PERFORMANCE.md"


def _table() -> dict[str, list[str]]:
    rows = {}
    for line in DOC.read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 8 and cells[0] in REGISTRY:
            rows[cells[0]] = cells
    return rows


def _elements(expr: str, c: int, n: int) -> tuple[int, int]:
    """'c', 'b', '0' or 'root / others' -> elements on (root, a non-root rank)."""
    values = {"c": c, "b": c // n, "0": 0}
    parts = [values[part.strip()] for part in expr.split("/")]
    return (parts[0], parts[-1])


def test_the_table_covers_every_registered_operation() -> None:
    assert set(_table()) == set(REGISTRY)


@pytest.mark.parametrize("n", [2, 4, 8])
@pytest.mark.parametrize("name", list(REGISTRY))
def test_descriptor_matches_the_documented_buffers_and_factor(name: str, n: int) -> None:
    row = _table()[name]
    collective = REGISTRY[name]
    count = 1024 * n
    root, other = _elements(row[2], count, n), _elements(row[3], count, n)
    assert collective.layout(count, n, 0).send == root[0]
    assert collective.layout(count, n, 1).send == root[1]
    assert collective.layout(count, n, 0).recv == other[0]
    assert collective.layout(count, n, 1).recv == other[1]
    documented = float(row[{2: 5, 4: 6, 8: 7}[n]])
    assert collective.busbw_factor(n) == pytest.approx(documented)
