"""One vocabulary: no class name is defined in two of sweeper's modules, so a name read
anywhere (a type in a signature, a record in a traceback, a doc's `Verdict`) means one thing.
Read from the source with ast: no module is imported."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "sweeper"


def defined_twice(root: Path) -> dict[str, list[str]]:
    """Each class name defined at the top of more than one module under `root`, with those
    modules (paths relative to `root`'s parent)."""
    where: dict[str, list[str]] = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                where[node.name].append(str(path.relative_to(root.parent)))
    return {name: modules for name, modules in where.items() if len(modules) > 1}


def test_no_class_name_is_defined_in_two_modules() -> None:
    assert defined_twice(PACKAGE) == {}


def test_a_class_name_defined_in_two_modules_is_found(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "a.py").write_text("class Verdict:\n    pass\n\nclass Only:\n    pass\n")
    (package / "sub" / "b.py").write_text("class Verdict:\n    pass\n")
    assert defined_twice(package) == {"Verdict": ["pkg/a.py", "pkg/sub/b.py"]}
