"""The prose a newcomer reads first, held short: every module docstring of sweeper/ under 10
lines, and no measurement dated in a comment or docstring (the figure lives in
docs/measurements/; the code names that page, whose file name may carry the date)."""

import ast
import io
import re
import tokenize
from pathlib import Path

SWEEPER = Path(__file__).parents[2] / "sweeper"
MAX_MODULE_DOC_LINES = 9
# A date standing alone; one inside a file name (`h200-x4-2026-11-22.md`) follows a hyphen.
DATE = re.compile(r"(?<![\w-])\d{4}-\d{2}-\d{2}(?!\d)")


def _modules() -> list[Path]:
    return sorted(SWEEPER.rglob("*.py"))


def _docstrings(tree: ast.Module) -> list[tuple[int, str]]:
    nodes = [
        tree,
        *(
            n
            for n in ast.walk(tree)
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        ),
    ]
    found = []
    for node in nodes:
        doc = ast.get_docstring(node, clean=False)
        if doc is not None:
            found.append((node.body[0].lineno, doc))
    return found


def _comments(source: str) -> list[tuple[int, str]]:
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return [(t.start[0], t.string) for t in tokens if t.type == tokenize.COMMENT]


def test_every_module_docstring_is_under_ten_lines() -> None:
    long = []
    for path in _modules():
        doc = ast.get_docstring(ast.parse(path.read_text()))
        if doc is not None and len(doc.splitlines()) > MAX_MODULE_DOC_LINES:
            long.append(f"{path.relative_to(SWEEPER.parent)}: {len(doc.splitlines())} lines")
    assert not long, "module docstrings of 10 lines or more:\n" + "\n".join(long)


def test_no_comment_or_docstring_dates_a_measurement() -> None:
    dated = []
    for path in _modules():
        source = path.read_text()
        for line, text in _comments(source) + _docstrings(ast.parse(source)):
            for match in DATE.finditer(text):
                dated.append(f"{path.relative_to(SWEEPER.parent)}:{line}: {match.group()}")
    assert not dated, (
        "dates in comments or docstrings (move the figure to docs/measurements/):\n"
        + "\n".join(dated)
    )


def test_a_dated_page_name_is_not_a_dated_comment() -> None:
    assert not DATE.search("# docs/measurements/h200-x4-2026-11-22.md")
    assert DATE.search("# 339.6 GB/s on 2x H200, 2026-11-24")
