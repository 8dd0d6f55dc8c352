"""How many places in sweeper/ spell a sweep option's name (issue 53 item 2).

The options are a profile's keys, read from the published JSON Schema (`sweeper config
schema`), so the count is of the same names before and after a change of the model. A place is
a node of a module's syntax tree that names an option: an attribute (`x.dense_sizes`), a
keyword (`dense_sizes=...`), a parameter, a class field, a variable, or a string constant that
is the name or its flag (`"dense_sizes"`, `"--dense-sizes"`). Common words (`nodes`, `seed`)
are also variables' names, so the table gives each option's places and files, and the total of
the options whose names hold an underscore (`dense_sizes`), which nothing else is called.

    python benchmarks/option_spellings.py [--per-option]
"""

from __future__ import annotations

import argparse
import ast
from collections import Counter
from pathlib import Path

from sweeper.planning.profile import Profile

ROOT = Path(__file__).parents[1] / "sweeper"
NOT_OPTIONS = {"nightly", "scan"}  # the profile's own sections, not a sweep's options


def option_names() -> list[str]:
    """A profile's sweep options, as the published schema lists them."""
    schema = Profile.model_json_schema()
    return [name for name in schema["properties"] if name not in NOT_OPTIONS]


def spelled(node: ast.AST) -> str | None:
    """The name a syntax node spells, where it spells one."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.keyword):
        return node.arg
    if isinstance(node, ast.arg):
        return node.arg
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = node.value
        return text.removeprefix("--").replace("-", "_") if text.startswith("--") else text
    return None


def count(names: list[str]) -> tuple[Counter[str], dict[str, set[str]]]:
    """Per option, its places in sweeper/ and the files that hold them."""
    wanted = set(names)
    places: Counter[str] = Counter()
    files: dict[str, set[str]] = {name: set() for name in names}
    for module in sorted(ROOT.rglob("*.py")):
        tree = ast.parse(module.read_text(), filename=str(module))
        for node in ast.walk(tree):
            name = spelled(node)
            if name in wanted:
                places[name] += 1
                files[name].add(str(module.relative_to(ROOT.parent)))
    return places, files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-option", action="store_true", help="a line per option")
    args = parser.parse_args()
    names = option_names()
    places, files = count(names)
    if args.per_option:
        for name in names:
            print(f"{name:24} {places[name]:4} places in {len(files[name]):2} files")
    distinctive = [name for name in names if "_" in name]
    print(f"options: {len(names)}; places: {sum(places.values())}")
    print(
        f"options named with an underscore: {len(distinctive)}; places: "
        f"{sum(places[n] for n in distinctive)}; files per option: "
        f"{sum(len(files[n]) for n in distinctive) / len(distinctive):.1f}"
    )
    print(f"dense_sizes: {places['dense_sizes']} places in {sorted(files['dense_sizes'])}")


if __name__ == "__main__":
    main()
