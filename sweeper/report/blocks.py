"""What a report page is made of: sections of plain blocks the template knows how to draw.

Blocks hold text as it is (the template escapes it) and figures as plotly objects (the
builder serialises them); sections are built from a run's view by `sections/`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar


@dataclass(frozen=True)
class Cell:
    text: str
    css: str = ""  # classes: num (right-aligned), bad, good, best, muted, link-NV, ...
    title: str = ""  # shown on hover: the full text of a shortened one


@dataclass(frozen=True)
class Table:
    kind: ClassVar[str] = "table"
    columns: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    caption: str = ""


@dataclass(frozen=True)
class Figure:
    kind: ClassVar[str] = "figure"
    figure: Any  # a plotly Figure
    half: bool = False  # half the page's width: two side by side


@dataclass(frozen=True)
class Text:
    kind: ClassVar[str] = "text"
    text: str
    css: str = ""


@dataclass(frozen=True)
class Facts:
    """Name: value lines, a value in a code font where `code` names it."""

    kind: ClassVar[str] = "facts"
    items: tuple[tuple[str, str], ...]
    code: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Code:
    """Preformatted text, folded under a summary line."""

    kind: ClassVar[str] = "code"
    summary: str
    text: str


Block = Table | Figure | Text | Facts | Code


@dataclass(frozen=True)
class Section:
    id: str  # the anchor, and what the browser test looks for
    title: str
    blocks: tuple[Block, ...]
    intro: str = ""
