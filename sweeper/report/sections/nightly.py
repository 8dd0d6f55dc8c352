"""A nightly run's judgment against its history (`sweeper nightly`; its summary beside the
page, `results.summaries`): the verdict, the nights it was compared with and by which rule,
the regressions and the series worse tonight, each with its figure, baseline and threshold,
and the groups that vary night to night more than their peers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sweeper.analysis.nightly import metric_name, since
from sweeper.report import figures
from sweeper.report.blocks import Block, Cell, Code, Facts, Section, Table, Text
from sweeper.report.sections import cells
from sweeper.report.view import RunView

_COLUMNS = ("series", "metric", "tonight", "baseline", "threshold", "change", "z", "since")
# A figure of a series, in the unit it reads in: its metric's unit as the summary names it
_WRITTEN = {"GB/s": figures.bandwidth, "us": figures.duration}


_TITLE = "Nightly: against history"


def nightly(view: RunView) -> Section | None:
    """The section of a nightly run whose summary the page was given; None for other runs.
    A summary this sweeper cannot read (hand-edited, or of another shape) is said in a line:
    the rest of the page stands."""
    if view.nightly is None:
        return None
    try:
        return _section(view.nightly)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        said = f"Its summary is not one this sweeper reads ({type(exc).__name__}: {exc})."
        return Section("nightly", _TITLE, (Text(said, "muted"),))


def _section(summary: Mapping[str, Any]) -> Section:
    policy = summary["policy"]
    blocks: list[Block] = [_verdict(summary), Facts(_facts(summary))]
    captions = {
        "regression": f"regressions: past the threshold {policy['persistence']} nights in a row",
        "worse": "worse tonight only: a regression if it persists",
    }
    for status, caption in captions.items():
        found = [s for s in summary["series"] if s["status"] == status]
        if found:
            blocks.append(cells.table(_COLUMNS, (_line(s) for s in found), caption))
    if summary.get("fail_slow"):  # none in a summary from before fail-slow groups
        blocks.append(_fail_slow(summary["fail_slow"]))
    history: Sequence[str] = summary["history"]
    if history:
        blocks.append(Code(f"the {len(history)} nights compared, oldest first", "\n".join(history)))
    z, floor = _bar(policy)
    return Section(
        "nightly",
        _TITLE,
        tuple(blocks),
        "What sweeper nightly decided. Each series (a group, operation, dtype and launch mode) "
        "gives its bus bandwidth and its time at the smallest size; tonight's figure is worse "
        f"past its threshold: at least {z:g} robust sigmas (its night-to-night noise) and "
        f"{floor:.0%} worse than the median of up to {policy['window']} earlier nightly runs "
        "of the same cluster name, backend and GPU model. "
        f"{policy['persistence']} nights in a row worse make a regression; a series with fewer "
        f"than {policy['min_history']} earlier runs is new, and not judged.",
    )


def _bar(policy: Mapping[str, Any]) -> tuple[float, float]:
    """The robust z and the relative floor of the summary's rules (0 where it has none)."""
    rules = {check["rule"]: check for check in policy["checks"]}
    return float(rules.get("RobustZ", {}).get("z", 0)), float(
        rules.get("RelativeFloor", {}).get("fraction", 0)
    )


def _verdict(summary: Mapping[str, Any]) -> Text:
    regressions, condemned = summary["regressions"], len(summary.get("condemned", ()))
    scanned = "scan" in summary
    if not summary["history"]:
        said = "No earlier nightly run of this cluster and hardware: this run starts its history."
    elif regressions:
        said = f"{regressions} regression(s): the tables below give each with its figures."
    else:
        said = "No regression."
    if scanned:
        said += (
            f" The scan condemned {condemned}: the fleet scan names each."
            if condemned
            else " The scan condemned nothing."
        )
    return Text(said)


def _facts(summary: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    fingerprint, history = summary["fingerprint"], summary["history"]
    hardware = fingerprint["gpu_model"] or "CPU ranks"
    counts = ", ".join(f"{n} {status}" for status, n in summary["counts"].items())
    facts = [
        ("cluster", f"{fingerprint['cluster_name']} ({hardware}, {fingerprint['backend']})"),
        (
            "compared with",
            f"{len(history)} earlier nightly runs, {history[0]} to {history[-1]}"
            if history
            else "none",
        ),
        ("series x metrics", counts),
        ("points", f"{summary['points']}, {summary['failed']} failed"),
    ]
    changed = summary["versions_changed"]
    if changed:
        names = "; ".join(f"{name} {v['before']} -> {v['now']}" for name, v in changed.items())
        facts.append(("versions changed", names))
    return tuple(facts)


def _figure(value: object, unit: str) -> Cell:
    written = _WRITTEN.get(unit)
    if value is None or written is None:
        return cells.num(value, cells.SIG)
    return Cell(written(float(value)), "num")  # type: ignore[arg-type]


def _line(series: Mapping[str, Any]) -> tuple[Cell, ...]:
    unit = str(series["unit"])
    return (
        Cell(str(series["series"])),
        Cell(metric_name(series)),
        _figure(series["value"], unit),
        _figure(series["baseline"], unit),
        _figure(series.get("threshold"), unit),  # none in a summary from before thresholds
        cells.num(series["change"], "+.1%", "bad"),
        cells.num(series["z"], "+.1f"),
        Cell(_since(series), "wrap"),
    )


def _since(series: Mapping[str, Any]) -> str:
    """How a worse series got there; '-' where its history is too short to say (JSON null)."""
    trend = series.get("trend")  # none in a summary from before steps and drifts
    known = series.get("step_change" if trend == "step" else "drift")
    return "-" if trend is None or known is None else since(series)


def _fail_slow(groups: Sequence[Mapping[str, Any]]) -> Table:
    lines = tuple(
        (
            Cell(str(group["group_id"])),
            cells.num(group["noise_ratio"], cells.SIG),
            Cell(
                "; ".join(
                    f"{s['series']} {s['metric']}: {cells.fmt(s['noise'], '.1%')}"
                    for s in group["series"]
                ),
                "wrap",
            ),
        )
        for group in groups
    )
    return Table(
        ("group", "x peers' noise", "series: noise (sigma / median)"),
        lines,
        "fail-slow: groups that vary night to night more than their peers",
    )
