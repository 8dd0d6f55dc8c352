"""A scan's summary document: it is what its JSON Schema says, `sweeper config schema
--verdicts` prints that schema, the verdicts read back as the judge gave them, and the run
keeps it beside its record."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from sweeper.cli import app
from sweeper.errors import CorruptResults
from sweeper.results import scans
from sweeper.scan.document import SCHEMA, document, verdicts
from sweeper.scan.verdict import Subject
from tests.scan_data import scanned


def test_the_document_is_what_its_schema_says_and_names_every_node_gpu_and_link() -> None:
    scan = scanned()
    doc = json.loads(json.dumps(document(scan)))
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    jsonschema.validate(doc, SCHEMA, cls=jsonschema.Draft202012Validator)
    assert (doc["version"], doc["strategy"], doc["seed"]) == (1, "random:3", 7)
    by = {s: [v for v in doc["verdicts"] if v["subject"] == s] for s in Subject.values()}
    assert [v["nodes"] for v in by["node"]] == [[n.id] for n in scan.fleet.nodes]
    assert len(by["gpu"]) == 32 * 4
    assert by["link"], "the scan's pairs are links with verdicts"
    assert sum(doc["health"].values()) == 32
    assert set(doc["condemned"]) == {v.name for v in scan.verdicts if v.condemned}
    gpu = by["gpu"][5]
    assert gpu["hosts"] == ["host0001"]
    assert (gpu["gpu"], gpu["uuid"]) == (1, "GPU-n0001-1")
    assert gpu["pci_bus_id"] == "00000000:19:00.0"
    # the stages add up their waves
    assert sum(s["waves"] for s in doc["stages"]) == len(doc["waves"]) == len(scan.waves)
    assert doc["stages"][0]["stage"] == "gate"
    assert sum(s["seconds"] for s in doc["stages"]) == pytest.approx(
        sum(w["seconds"] for w in doc["waves"]), abs=1e-2
    )


def test_a_condemned_verdict_carries_its_evidence_and_the_threshold_it_missed() -> None:
    doc = document(scanned())
    slow = [v for v in doc["verdicts"] if v["subject"] == "node" and v["health"] == "slow"]
    assert slow
    for v in slow:
        assert v["stage"] == "screen"  # random:K matchings run as screen waves
        assert len(v["partners"]) >= 2
        assert v["busbw_gb_per_s"] < v["threshold_gb_per_s"] < v["fleet_gb_per_s"]
        assert v["evidence"].startswith(f"{v['nodes'][0]}: ")


def test_each_verdict_gives_its_share_of_the_reference_its_figure_is_held_to() -> None:
    doc = json.loads(json.dumps(document(scanned())))
    shared = [v for v in doc["verdicts"] if v["reference_share"] is not None]
    assert shared, "an H100 fleet's figures have references"
    for v in shared:
        assert v["reference_share"] == pytest.approx(
            v["busbw_gb_per_s"] / v["reference_gb_per_s"], abs=1e-4
        )
        assert v["reference"].startswith("H100 ")
        assert doc["references"][v["reference"]].startswith(f"{v['reference']}: ")
        assert f"{v['reference_share']:.0%} of " in v["evidence"]
    assert set(doc["references"]) == {v["reference"] for v in shared}
    unknown = [v for v in doc["verdicts"] if v["reference"] is None]
    assert all(v["reference_share"] is None is v["reference_gb_per_s"] for v in unknown)


def test_a_summary_written_before_the_reference_keys_is_still_valid_version_1() -> None:
    doc = json.loads(json.dumps(document(scanned())))
    del doc["references"]
    for v in doc["verdicts"]:
        for key in ("reference", "reference_gb_per_s", "reference_share"):
            del v[key]
    jsonschema.validate(doc, SCHEMA, cls=jsonschema.Draft202012Validator)
    assert all(v.reference_gb_per_s is None for v in verdicts(doc))


def test_the_verdicts_read_back_as_the_judge_gave_them() -> None:
    scan = scanned()
    assert verdicts(json.loads(json.dumps(document(scan)))) == list(scan.verdicts)


def test_a_document_the_schema_refuses() -> None:
    doc = document(scanned(nodes=8, gpus=1))
    doc["verdicts"][0]["health"] = "sluggish"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, SCHEMA, cls=jsonschema.Draft202012Validator)
    del doc["verdicts"][0]["evidence"]
    doc["verdicts"][0]["health"] = "slow"
    with pytest.raises(jsonschema.ValidationError, match="evidence"):
        jsonschema.validate(doc, SCHEMA, cls=jsonschema.Draft202012Validator)


def test_sweeper_config_schema_verdicts_prints_the_schema() -> None:
    result = CliRunner().invoke(app, ["config", "schema", "--verdicts"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == json.loads(json.dumps(SCHEMA))


def test_the_run_keeps_its_summary_beside_its_record(tmp_path: Path) -> None:
    scan = scanned(nodes=8, gpus=1)
    doc = document(scan)
    written = scans.save(tmp_path, scan.run_id, doc)
    assert written == tmp_path / "_runs" / f"{scan.run_id}.scan.json"
    assert scans.load(tmp_path, scan.run_id) == json.loads(json.dumps(doc))
    assert scans.load(tmp_path, "20990101T000000Z-ffffff") is None
    written.write_text('{"version": 2}')
    with pytest.warns(CorruptResults, match="not a version 1 scan summary"):
        assert scans.load(tmp_path, scan.run_id) is None


def test_fleet_findings_come_first_with_figure_threshold_and_source_and_notes_read_back() -> None:
    """The fleet as a subject is the summary's first list, before the nodes and verdicts;
    a verdict's transient notes are in it and read back."""
    from dataclasses import replace

    from sweeper.scan.thresholds import Finding

    finding = Finding(
        kind="internode",
        off=True,
        figure_gb_per_s=30.0,
        threshold_gb_per_s=36.0,
        source="80% of the reference 45 GB/s (H100 internode any size all_to_all)",
        below=20,
        nodes=32,
        evidence="the fleet: 20 of 32 nodes below 36 GB/s",
    )
    scan = scanned()
    noted = replace(scan.verdicts[0], notes=("transient: its gate in wave 0 ...",))
    scan = replace(scan, findings=(finding,), verdicts=(noted, *scan.verdicts[1:]))
    doc = json.loads(json.dumps(document(scan)))
    jsonschema.validate(doc, SCHEMA, cls=jsonschema.Draft202012Validator)
    keys = list(doc)
    assert keys.index("findings") < keys.index("nodes") < keys.index("verdicts")
    (first,) = doc["findings"]
    assert (first["figure_gb_per_s"], first["threshold_gb_per_s"]) == (30.0, 36.0)
    assert first["source"].startswith("80% of the reference")
    assert verdicts(doc)[0].notes == noted.notes
    assert finding.line.startswith("fleet internode: off: median 30 GB/s, threshold 36 GB/s (80%")


def test_the_prometheus_textfile_carries_the_fleet_findings_first_with_threshold_and_source(
    tmp_path: Path,
) -> None:
    import pandas as pd
    from prometheus_client.parser import text_string_to_metric_families

    from sweeper.results import prometheus

    summary = document(scanned())
    summary["findings"] = [
        {
            "kind": "internode",
            "off": True,
            "figure_gb_per_s": 30.0,
            "threshold_gb_per_s": 36.0,
            "source": "the flag's 36 GB/s for internode",
            "below": 20,
            "nodes": 32,
            "evidence": "the fleet: 20 of 32 nodes below 36 GB/s",
        }
    ]
    rows = pd.DataFrame({c: pd.Series(dtype=object) for c in prometheus.COLUMNS})
    path = tmp_path / "sweeper.prom"
    prometheus.write(path, prometheus.metrics(rows, summary))
    families = list(text_string_to_metric_families(path.read_text()))
    assert [f.name for f in families[:2]] == list(prometheus.FINDING_NAMES)
    (figure,), (threshold,) = (f.samples for f in families[:2])
    labels = {"kind": "internode", "state": "off", "source": "the flag's 36 GB/s for internode"}
    assert (figure.labels, figure.value) == (labels, 30e9)
    assert (threshold.labels, threshold.value) == (labels, 36e9)
    per_host = prometheus.per_host(rows, summary)
    assert all(fams[0].name == prometheus.FINDING for fams in per_host.values())


def test_scan_simulate_prints_the_fleet_findings_before_the_verdicts_and_its_json_has_them() -> (
    None
):
    args = ["scan", "--simulate", "--nodes", "16", "--gpus-per-node", "2", "--faults", "1"]
    args += ["--min-busbw", "internode=60"]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "1000"})  # each finding one line
    lines = result.stdout.splitlines()
    (found,) = [i for i, line in enumerate(lines) if line.strip().startswith("fleet internode")]
    assert "off: median" in lines[found]
    assert "threshold 60 GB/s (the flag's 60 GB/s for internode)" in lines[found]
    verdicts = [i for i, line in enumerate(lines) if line.startswith("  ") and "n00" in line]
    assert verdicts
    assert found < min(verdicts)
    result = CliRunner().invoke(app, [*args, "--format", "json"])
    (off,) = [f for f in json.loads(result.stdout)["findings"] if f["off"]]
    assert (off["kind"], off["threshold_gb_per_s"]) == ("internode", 60.0)
