"""docs/RESULTS.md describes every result column, and is what its generator writes."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from sweeper.results import columns_doc
from sweeper.results.schema import SCHEMA

RESULTS_MD = Path(__file__).parents[2] / "docs" / "RESULTS.md"
REGENERATE = "python -m sweeper.results.columns_doc > docs/RESULTS.md"


def test_every_schema_column_is_described_and_nothing_else() -> None:
    names = set(SCHEMA.names)
    described = set(columns_doc.DESCRIBED)
    assert not names - described, f"describe them in {columns_doc.__name__}.DESCRIBED"
    assert not described - names, "descriptions of columns the schema does not have"


def test_every_description_says_what_the_column_means() -> None:
    assert all(d.meaning.strip() for d in columns_doc.DESCRIBED.values())


def test_results_md_is_what_the_generator_writes() -> None:
    assert RESULTS_MD.read_text() == columns_doc.markdown(), f"run `{REGENERATE}`"


def test_results_md_has_a_row_per_column_with_its_type() -> None:
    text = RESULTS_MD.read_text()
    for f in SCHEMA:
        assert f"| `{f.name}` | `{columns_doc.type_name(f.type)}` |" in text


def test_an_undescribed_column_is_named_by_the_generator() -> None:
    with pytest.raises(KeyError, match="stage_of_test"):
        columns_doc.markdown(pa.schema([*SCHEMA, ("stage_of_test", pa.string())]))


def test_types_read_as_the_docs_spell_them() -> None:
    assert columns_doc.type_name(pa.list_(pa.int32())) == "list<int32>"
    assert columns_doc.type_name(pa.map_(pa.string(), pa.string())) == "map<string, string>"
