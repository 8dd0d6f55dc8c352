"""docs/PERFORMANCE.md's table and the descriptors must say the same thing, for n = 2, 4, 8."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweeper.ops.registry import REGISTRY

DOC = Path(__file__).parents[2] / "docs" / "PERFORMANCE.md"


SIZED = [name for name, c in REGISTRY.items() if c.traits.fixed_count is None]


def _table() -> dict[str, list[str]]:
    rows = {}
    for line in DOC.read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 9 and cells[0] in REGISTRY:
            rows[cells[0]] = cells
    return rows


def _elements(expr: str, c: int, n: int) -> tuple[int, int]:
    """An expression in c, b and n, or 'first / second' -> elements on rank 0 and rank 1."""
    values = [
        eval(part, {"__builtins__": {}}, {"c": c, "b": c // n, "n": n}) for part in expr.split("/")
    ]
    return (values[0], values[-1])


def test_the_table_covers_every_operation_with_a_size_grid() -> None:
    assert set(_table()) == set(SIZED)


@pytest.mark.parametrize(
    ("name", "n"),
    [(name, n) for name in SIZED for n in (2, 4, 8) if REGISTRY[name].traits.ranks in (None, n)],
)
def test_descriptor_matches_the_documented_buffers_and_factor(name: str, n: int) -> None:
    collective = REGISTRY[name]
    row = _table()[name]
    count = 1024 * n
    layouts = [collective.layout(count, n, rank) for rank in (0, 1)]
    for column, field in ((2, "send"), (3, "recv"), (4, "work")):
        documented = _elements(row[column], count, n)
        assert tuple(getattr(lay, field) for lay in layouts) == documented, field
    documented_factor = float(row[{2: 6, 4: 7, 8: 8}[n]])
    assert collective.busbw_factor(n) == pytest.approx(documented_factor)
