"""docs/ARCHITECTURE.md's layer table, enforced: each row's "may import" column is the sweeper
code its modules may import (module-level, function-level and type-only imports alike), read
from the page itself, so the page and the test cannot disagree; the page's "Layers, bottom up"
line orders the rows so that no row imports one above its own."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "ARCHITECTURE.md"
_CODE = re.compile(r"`([^`\s]+)`")


def _names(text: str) -> list[str]:
    """The package's names a cell or line quotes: `rank/` and `wire.py` as rank and wire."""
    return [name.removesuffix("/").removesuffix(".py") for name in _CODE.findall(text)]


class Table:
    """The layer table: each row's modules and what they may import, by dotted name under
    the package (`rank.template`: that module; `rank`: the package and all its modules)."""

    def __init__(self, rows: dict[str, tuple[set[str], set[str]]], layers: list[str]) -> None:
        self.rows = rows  # a row's first name: (its modules, its grants)
        self.layers = layers  # the rows' names, bottom up, as the page's line orders them

    @classmethod
    def of(cls, page: str) -> Table:
        rows: dict[str, tuple[set[str], set[str]]] = {}
        section = page.split("## The packages", 1)[1].split("\n## ", 1)[0]
        for line in section.splitlines():
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if not line.startswith("| `") or len(cells) != 4:
                continue
            members = _names(cells[0])
            rows[members[0]] = (set(members), set(_names(cells[3])))
        # the first sentence of the paragraph that begins "Layers, bottom up"
        line = section.split("\nLayers, bottom up", 1)[1].split(". ", 1)[0]
        return cls(rows, _names(line))

    def row(self, name: str) -> str | None:
        """The row that module `name` (dotted, under the package) belongs to."""
        top = name.split(".", 1)[0]
        return next((row for row, (members, _) in self.rows.items() if top in members), None)

    def allows(self, module: str, imported: str) -> bool:
        row = self.row(module)
        if row is None:
            return False
        members, grants = self.rows[row]
        if imported.split(".", 1)[0] in members:
            return True
        return any(imported == g or imported.startswith(g + ".") for g in grants)


def _module(root: Path, path: Path) -> str:
    """`path`'s dotted name under the package at `root` (`__init__` is the package itself; the
    top package's own is `__init__`, its row's name)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def imports(root: Path) -> list[tuple[str, str]]:
    """(module, what it imports) for every import of the package's own code in the package
    at `root`, wherever in a module it is, names under the package; `from a import b` names
    `a.b` where that is a module, else `a`."""
    package = root.name
    edges = []
    for path in sorted(root.rglob("*.py")):
        module = _module(root, path)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found = [_target(root, node.module, alias.name) for alias in node.names]
            else:
                continue
            for name in found:
                if name == package:
                    edges.append((module, "__init__"))
                elif name.startswith(package + "."):
                    edges.append((module, name.removeprefix(package + ".")))
    return edges


def _target(root: Path, module: str, name: str) -> str:
    below = Path(root.parent, *module.split("."), name)
    is_module = below.with_suffix(".py").is_file() or (below / "__init__.py").is_file()
    return f"{module}.{name}" if is_module else module


def breaches(root: Path, table: Table) -> list[str]:
    """Each import the table does not allow, once."""
    return sorted({f"{m} imports {i}" for m, i in imports(root) if not table.allows(m, i)})


@pytest.fixture(scope="module")
def table() -> Table:
    return Table.of(PAGE.read_text())


def test_the_package_imports_only_what_the_architecture_pages_layer_table_allows(
    table: Table,
) -> None:
    assert breaches(ROOT / "sweeper", table) == []


def test_every_module_of_the_package_has_a_row_in_the_layer_table(table: Table) -> None:
    root = ROOT / "sweeper"
    assert [m for p in root.rglob("*.py") if table.row(m := _module(root, p)) is None] == []


def test_the_layer_table_grants_only_modules_that_exist_and_rows_below_its_own(
    table: Table,
) -> None:
    """The page's "Layers, bottom up" line names every row once, and each row may import only
    rows below it in that line: the table is a layering, so no import cycle can pass it."""
    assert sorted(table.layers) == sorted(table.rows)
    for row, (_, grants) in table.rows.items():
        for grant in grants:
            assert (ROOT / "sweeper").joinpath(*grant.split(".")).with_suffix(".py").is_file() or (
                ROOT / "sweeper" / Path(*grant.split("."))
            ).is_dir(), f"{row} may import {grant}, which is no module"
            below = table.row(grant)
            assert below is not None, f"{row} may import {grant}, which has no row"
            assert below != row, f"{row} grants itself {grant}"
            assert table.layers.index(below) < table.layers.index(row), f"{row} over {grant}"


_TYPING = "from typing import TYPE_CHECKING\n"


def _package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "sweeper" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "sweeper"


@pytest.mark.parametrize(
    ("written", "breach"),
    [
        ("from sweeper.telemetry import Watch\n", "telemetry"),
        ("def later() -> None:\n    import sweeper.driver.sweep\n", "driver.sweep"),
        (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from sweeper import driver\n",
            "driver",
        ),
    ],
    ids=["module-level", "function-level", "type-only"],
)
def test_an_import_of_a_layer_above_its_own_is_a_breach_wherever_it_is_written(
    tmp_path: Path, table: Table, written: str, breach: str
) -> None:
    """wire (the bottom row) importing telemetry or the driver is named; the same imports
    made by the driver, which may, are not."""
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "wire.py": written,
            "telemetry.py": "from sweeper.wire import Point\n",
            "driver/__init__.py": "",
            "driver/sweep.py": "from sweeper import telemetry\nfrom sweeper.driver import x\n",
        },
    )
    assert breaches(root, table) == [f"wire imports {breach}"]


def test_a_grant_of_one_module_allows_that_module_and_no_other_of_its_package(
    tmp_path: Path, table: Table
) -> None:
    """The driver may import the rank's template (its actor starts and reaches it) but not the
    rank's worker, which imports torch."""
    root = _package(
        tmp_path,
        {
            "driver/__init__.py": "",
            "driver/actor.py": "from sweeper.rank.template import shared\n",
            "driver/cluster.py": "from sweeper.rank import worker\n",
            "rank/__init__.py": "",
            "rank/template.py": "",
            "rank/worker.py": "",
        },
    )
    assert breaches(root, table) == ["driver.cluster imports rank.worker"]


def _imported(path: Path) -> set[str]:
    """The top-level packages a script imports, at any depth of its code."""
    tree = ast.parse(path.read_text())
    names = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    names |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    return {name.split(".")[0] for name in names}


def test_benchmarks_import_nothing_from_the_tests() -> None:
    """A benchmark is run from a clone without its test suite in mind: what it shares with a
    test lives in benchmarks/ (or sweeper/), and the test imports it from there."""
    scripts = sorted((Path(__file__).parents[2] / "benchmarks").glob("*.py"))
    assert scripts
    assert [path.name for path in scripts if "tests" in _imported(path)] == []
