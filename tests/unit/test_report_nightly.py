"""The report's nightly section: a nightly run's judgment against its history, read from its
summary (synthetic histories of tests/synthetic.py, judged as `sweeper nightly` judges)."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

from sweeper.analysis import nightly
from sweeper.analysis.regression import Policy
from sweeper.planning.profile import NightlySettings
from sweeper.report import build, figures, page
from sweeper.report.blocks import Code, Facts, Section, Table, Text
from sweeper.report.sections.nightly import nightly as nightly_section
from sweeper.report.sections.run import run_header
from sweeper.report.view import RunView
from sweeper.results import records
from sweeper.results.load import run_rows
from tests.synthetic import History, Series, every_series

POLICY = Policy.of(NightlySettings())
SERIES = every_series(groups=1, ops=2, dtypes=1)  # all_reduce native and ring, one group
SLOWED = SERIES[0]
DROP = 1 / 0.8  # time x this: bus bandwidth 20% lower


def _slow(night: int, series: Series) -> float:
    return DROP if night >= 8 and series == SLOWED else 1.0


def _judged(history: History, reports: Path) -> dict[str, Any]:
    """Every night judged in turn, as `sweeper nightly` does, its summary in `reports`; the
    last night's summary."""
    for run_id in history.run_ids:
        verdict = nightly.judge(history.root, run_id, POLICY, judged_in=reports)
        nightly.write_summary(verdict, reports)
    return nightly.summary(verdict)


def _section(history: History, summary: dict[str, Any]) -> Section:
    rows = run_rows(history.root, history.run_ids[-1])
    section = nightly_section(RunView.of(rows, None, nightly=summary))
    assert section is not None
    return section


def _tables(section: Section) -> dict[str, Table]:
    return {b.caption.split(":")[0]: b for b in section.blocks if isinstance(b, Table)}


def test_a_regression_is_listed_with_its_figure_baseline_and_threshold(tmp_path: Path) -> None:
    history = History(tmp_path / "results", SERIES, noise=0.01)
    history.nights(10, _slow)
    summary = _judged(history, tmp_path / "reports")
    section = _section(history, summary)
    assert isinstance(section.blocks[0], Text)
    assert section.blocks[0].text.startswith("2 regression(s)")  # busbw and time
    (regressions,) = _tables(section).values()
    columns = regressions.columns
    by_metric = {line[1].text.split(" @")[0]: line for line in regressions.rows}
    assert set(by_metric) == {"peak busbw", "time"}
    found = {(s["metric"], s["status"]): s for s in summary["series"] if s["status"] != "ok"}
    busbw = found[("peak_busbw_gb_per_s", "regression")]
    line = by_metric["peak busbw"]
    assert line[0].text == SLOWED.name
    for column in ("tonight", "baseline", "threshold"):
        figure = busbw[{"tonight": "value"}.get(column, column)]
        assert line[columns.index(column)].text == figures.bandwidth(figure)
    assert busbw["value"] < busbw["threshold"] < busbw["baseline"]
    assert line[columns.index("change")].text == f"{busbw['change']:+.1%}"
    time = by_metric["time"]
    assert time[columns.index("tonight")].text.endswith(" us")
    # the nights compared: how many, the first and the last, and each of them folded
    facts = next(b for b in section.blocks if isinstance(b, Facts))
    compared = dict(facts.items)["compared with"]
    assert compared == (
        f"{len(history.run_ids) - 1} earlier nightly runs, {history.run_ids[0]} to "
        f"{history.run_ids[-2]}"
    )
    (nights,) = [b for b in section.blocks if isinstance(b, Code)]
    assert nights.text.splitlines() == history.run_ids[:-1]
    assert "3.5 robust sigmas" in section.intro
    assert "3% worse" in section.intro


def test_a_night_with_no_history_says_it_starts_one(tmp_path: Path) -> None:
    history = History(tmp_path / "results", SERIES, noise=0.01)
    history.nights(1)
    section = _section(history, _judged(history, tmp_path / "reports"))
    assert isinstance(section.blocks[0], Text)
    assert "this run starts its history" in section.blocks[0].text
    assert _tables(section) == {}
    assert not [b for b in section.blocks if isinstance(b, Code)]


def test_a_gloo_nights_judgment_names_no_nccl_or_cuda(tmp_path: Path) -> None:
    history = History(tmp_path / "results", SERIES, noise=0.01, gpu_model=None)
    for _ in range(10):
        history.night(_slow, backend="gloo")
    section = _section(history, _judged(history, tmp_path / "reports"))
    facts = next(b for b in section.blocks if isinstance(b, Facts))
    assert dict(facts.items)["cluster"] == "synthetic (CPU ranks, gloo)"
    said = " ".join(
        [section.intro, *(b.text for b in section.blocks if isinstance(b, Text))]
        + [c.text for t in _tables(section).values() for row in t.rows for c in row]
    )
    assert not re.search(r"CUDA|NCCL|nccl|graph", said), said


def test_a_nightly_runs_page_carries_its_judgment_from_the_summary_beside_it(
    tmp_path: Path,
) -> None:
    """`sweeper report` of a nightly run finds its summary where its run wrote reports;
    another run's page has no such section."""
    results = tmp_path / "results"
    history = History(results, SERIES, noise=0.01)
    history.nights(10, _slow)
    _judged(history, tmp_path / "reports")  # beside the results, as sweeper nightly writes
    tonight = history.run_ids[-1]
    shown = build.write(results, tonight, tmp_path / "tonight.html").read_text()
    assert '<section id="nightly">' in shown
    assert SLOWED.name in shown
    ad_hoc = history.night(run_kind="run")
    assert '<section id="nightly">' not in build.write(results, ad_hoc).read_text()
    # a summary elsewhere (sweeper nightly --reports-dir) is where its run record says
    elsewhere = tmp_path / "pages"
    elsewhere.mkdir()
    record = records.RunRecord(tonight, "sweeper nightly", {"reports_dir": str(elsewhere)}, ())
    records.save(results, record)
    summary = f"{tonight}.summary.json"
    (tmp_path / "reports" / summary).rename(elsewhere / summary)
    assert '<section id="nightly">' in build.write(results, tonight).read_text()


def test_the_section_follows_the_run_header(tmp_path: Path) -> None:
    history = History(tmp_path / "results", SERIES, noise=0.01)
    history.nights(2)
    summary = _judged(history, tmp_path / "reports")
    view = RunView.of(run_rows(history.root, history.run_ids[-1]), None, nightly=summary)
    ids = [s.id for s in page.sections(view)]
    assert ids[ids.index("run") + 1] == "nightly"


def test_a_series_worse_tonight_only_has_its_own_table(tmp_path: Path) -> None:
    history = History(tmp_path / "results", SERIES, noise=0.01)
    history.nights(9)
    history.night(lambda night, series: DROP if series == SLOWED else 1.0)
    section = _section(history, _judged(history, tmp_path / "reports"))
    tables = _tables(section)
    assert set(tables) == {"worse tonight only"}
    assert {line[0].text for line in tables["worse tonight only"].rows} == {SLOWED.name}
    assert isinstance(section.blocks[0], Text)
    assert section.blocks[0].text == "No regression."


def test_an_older_summary_is_shown_and_one_of_another_shape_said_in_a_line(
    tmp_path: Path,
) -> None:
    history = History(tmp_path / "results", SERIES, noise=0.01)
    history.nights(10, _slow)
    summary = _judged(history, tmp_path / "reports")
    older = {key: value for key, value in summary.items() if key != "fail_slow"}
    older["series"] = [
        {k: v for k, v in s.items() if k not in ("trend", "threshold")} for s in summary["series"]
    ]
    (regressions,) = _tables(_section(history, older)).values()
    at = regressions.columns.index("threshold")
    assert {line[at].text for line in regressions.rows} == {"-"}
    assert {line[-1].text for line in regressions.rows} == {"-"}  # no step or drift said
    broken = {key: value for key, value in summary.items() if key != "policy"}
    (said,) = _section(history, broken).blocks
    assert isinstance(said, Text)
    assert said.text == "Its summary is not one this sweeper reads (KeyError: 'policy')."


def test_a_run_whose_rows_say_not_when_they_were_made_says_so_not_nan(tmp_path: Path) -> None:
    """The synthetic nights' rows carry no `measured_at`, as rows written by hand may not."""
    history = History(tmp_path / "results", SERIES, noise=0.01)
    undated = history.night()
    dated = history.night(measured_at=history.start + timedelta(days=1, seconds=42))
    assert _measuring_took(history, undated) == "not recorded"
    assert _measuring_took(history, dated) == "42 s"


def _measuring_took(history: History, run_id: str) -> str:
    header = run_header(RunView.of(run_rows(history.root, run_id), None))
    facts = next(b for b in header.blocks if isinstance(b, Facts))
    return dict(facts.items)["measuring took"]
