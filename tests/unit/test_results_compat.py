"""Rows written by an earlier sweeper load unchanged: a real run's files, kept as written.

tests/data/results/main-2026-11-25 holds what `sweeper run --world 2 --ops
all_reduce,all_gather,send_recv,h2d --max-size 1K --samples` wrote on gloo before the results
package existed (its Parquet carries no schema version). The expectations below are what
`sweeper.load` returned for it then.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sweeper
from sweeper.errors import CorruptResults
from sweeper.results import records
from sweeper.results.journal import journal_path
from sweeper.results.load import runs
from sweeper.results.schema import SCHEMA, SCHEMA_VERSION, VERSION_KEY
from sweeper.results.upgrade import upgrade

OLD = Path(__file__).parents[1] / "data" / "results" / "main-2026-11-25"
RUN = "20261125T063903Z-c4526e"

_STR, _OBJ, _F64, _UTC = "string", "object", "float64", "datetime64[us, UTC]"
DTYPES = {
    "run_id": _STR,
    "run_started_at": _UTC,
    "run_kind": _STR,
    "cluster_name": _STR,
    "sweeper_version": _STR,
    "ray_version": _STR,
    "torch_version": _STR,
    "nccl_version": _STR,
    "cuda_version": _STR,
    "driver_version": _STR,
    "gpu_model": _STR,
    "nccl_env": _OBJ,
    "backend": _STR,
    "tier": _STR,
    "variant": _STR,
    "group_id": _STR,
    "world_size": "Int32",
    "n_nodes": "Int32",
    "hosts": _OBJ,
    "gpu_uuids": _OBJ,
    "kind": _STR,
    "op": _STR,
    "algorithm": _STR,
    "dtype": _STR,
    "in_place": "boolean",
    "size_bytes": "Int64",
    "count_elems": "Int64",
    "engine": _STR,
    "launch": _STR,
    "launch_note": _STR,
    "registered": "boolean",
    "warmup_iters": "Int32",
    "iters": "Int32",
    "time_us": _F64,
    "time_us_min": _F64,
    "time_us_p50": _F64,
    "time_us_p99": _F64,
    "time_us_blocks": _OBJ,
    "algbw_gb_per_s": _F64,
    "busbw_gb_per_s": _F64,
    "busbw_factor": _F64,
    "busbw_pct_of_link": _F64,
    "status": _STR,
    "error": _STR,
    "n_wrong": "Int64",
    "max_size_bytes": "Int64",
    "probe_s": _F64,
    "samples_us": _OBJ,
    "measured_at": _UTC,
    "src_rank": "Int32",
    "dst_rank": "Int32",
    "src_gpu_uuid": _STR,
    "dst_gpu_uuid": _STR,
    "concurrent": "boolean",
    "rank": "Int32",
    "params": _OBJ,
    "wave": "Int32",
    "started_at": _UTC,
    "ended_at": _UTC,
    "sm_clock_mhz": _OBJ,
    "mem_clock_mhz": _OBJ,
    "power_w": _OBJ,
    "power_limit_w": _OBJ,
    "temperature_c": _OBJ,
    "throttle_reasons": _OBJ,
    "ecc_corrected_delta": _OBJ,
    "ecc_uncorrected_delta": _OBJ,
    "nvlink_replay_delta": _OBJ,
    "nvlink_crc_delta": _OBJ,
    "nvlink_recovery_delta": _OBJ,
    "xid_codes": _OBJ,
    "pcie_gen": _OBJ,
    "pcie_width": _OBJ,
    "pcie_pct_of_peak": _F64,
    "pcie_max_gen": _OBJ,
    "pcie_max_width": _OBJ,
    "stage": _STR,
    "transport": _STR,  # gloo's: null, as rows that go through no NCCL
    "transport_flag": _STR,
    "nccl_connections": _OBJ,
    "nccl_channels": "Int32",
    "nccl_algo": _STR,
    "nccl_proto": _STR,
    "unanswered": _OBJ,
    "comm_start_s": _F64,
    "energy_j": _F64,
    "energy_j_per_gb": _F64,
    "nccl_view": _STR,
    "nccl_predicted_us": _F64,
    "nccl_predictions": _OBJ,
    "measured_over_predicted": _F64,
    "nccl_init_s": _OBJ,
    "other_processes": _OBJ,
    "date": _STR,
}
# how many rows have a value in each column: every row, the 24 measured (the 8 h2d rows are
# skipped on CPU ranks), the 8 skipped (their reason), or none (no GPU, no pairs, no knobs)
_ALL = {"run_id", "run_started_at", "run_kind", "cluster_name", "sweeper_version"}
_ALL |= {"ray_version", "torch_version", "nccl_env", "backend", "tier", "variant", "group_id"}
_ALL |= {"world_size", "n_nodes", "hosts", "gpu_uuids", "kind", "op", "algorithm", "dtype"}
_ALL |= {"in_place", "size_bytes", "count_elems", "engine", "launch", "busbw_factor", "status"}
_ALL |= {"measured_at", "wave", "started_at", "ended_at", "date"}
_MEASURED = {"registered", "warmup_iters", "iters", "time_us", "time_us_min", "time_us_p50"}
_MEASURED |= {"time_us_p99", "time_us_blocks", "algbw_gb_per_s", "busbw_gb_per_s", "n_wrong"}
_MEASURED |= {"max_size_bytes", "samples_us"}
VALUED = {
    c: 32 if c in _ALL else 24 if c in _MEASURED else 8 if c == "error" else 0 for c in DTYPES
}
SIZES = [8, 16, 32, 64, 128, 256, 512, 1024]


def test_a_run_written_before_the_results_package_loads_as_it_did() -> None:
    frame = sweeper.load(OLD)

    assert {c: str(t) for c, t in frame.dtypes.items()} == DTYPES
    assert list(frame.columns) == list(DTYPES)
    assert frame.notna().sum().to_dict() == VALUED
    assert len(frame) == 32
    assert frame["op"].tolist() == [
        op for op in ("all_reduce", "all_gather", "send_recv", "h2d") for _ in SIZES
    ]
    assert frame["size_bytes"].tolist() == SIZES * 4
    assert frame["count_elems"].tolist() == [size // 4 for size in SIZES] * 4
    assert frame["algorithm"].tolist() == ["native"] * 16 + ["ring"] * 8 + ["pinned"] * 8
    assert frame["kind"].tolist() == ["collective"] * 24 + ["copy"] * 8
    assert frame["status"].tolist() == ["ok"] * 24 + ["skipped"] * 8
    assert frame["busbw_factor"].tolist() == [1.0] * 8 + [0.5] * 8 + [1.0] * 16
    assert frame["in_place"].tolist() == [True] * 8 + [False] * 24
    assert frame["registered"].tolist()[:24] == [False] * 24
    assert frame["registered"].isna().tolist() == [False] * 24 + [True] * 8
    assert frame["n_wrong"].tolist()[:24] == [0] * 24
    assert set(frame["error"].dropna()) == {
        "host<->device copies need a GPU: CPU ranks have no device memory"
    }
    assert frame["wave"].tolist() == [0] * 32
    for column, value in {
        "run_id": RUN,
        "run_kind": "run",
        "cluster_name": "vm",
        "backend": "gloo",
        "tier": "cpu",
        "variant": "default",
        "engine": "torch",
        "launch": "eager",
        "dtype": "float32",
        "date": "2026-11-25",
        "torch_version": "2.13.0+cpu",
    }.items():
        assert frame[column].unique().tolist() == [value], column
    assert frame["run_started_at"].unique().tolist() == [
        pd.Timestamp("2026-11-25 06:39:03.379037", tz="UTC")
    ]
    assert frame["world_size"].unique().tolist() == [2]
    assert frame["hosts"].iloc[0].tolist() == ["vm", "vm"]
    assert frame["nccl_env"].iloc[0] == [("NCCL_NVLS_ENABLE", "0")]
    assert [len(blocks) for blocks in frame["time_us_blocks"].dropna()] == [3] * 24


def test_a_run_written_before_the_results_package_is_one_complete_run() -> None:
    listed = runs(OLD)
    kept = records.load(OLD, RUN)

    assert listed["run_id"].tolist() == [RUN]
    assert listed[["points", "failed"]].iloc[0].tolist() == [32, 0]
    assert listed["backend"].tolist() == ["gloo"]
    assert kept is not None
    assert kept.ended == "complete"
    assert kept.command.startswith("sweeper run --world 2 --ops all_reduce,")
    assert kept.options["ops"] == ["all_reduce", "all_gather", "send_recv", "h2d"]
    assert [node.host for node in kept.nodes] == ["vm"]
    assert kept.nodes[0].gpus == ()


def test_nccl_rows_from_before_transports_were_read_say_unknown_and_others_stay_null() -> None:
    ran = {"backend": "nccl", "kind": "collective", "world_size": 4, "time_us": 12.5}
    rows = [
        ran,
        ran | {"kind": "copy"},  # the copy engine's: no NCCL
        ran | {"backend": "gloo"},
        ran | {"world_size": 1},  # a group of one GPU connects to no peer
        ran | {"time_us": None},  # did not run
    ]
    version_2 = pa.Table.from_pylist(rows, schema=SCHEMA)

    upgraded = upgrade(version_2, since=2)

    assert upgraded["transport"].to_pylist() == ["unknown", None, None, None, None]
    assert upgraded.drop_columns(["transport"]).equals(version_2.drop_columns(["transport"]))


def test_a_row_that_says_its_transport_keeps_it() -> None:
    said = {"backend": "nccl", "kind": "collective", "world_size": 4, "time_us": 1.0}
    table = pa.Table.from_pylist([said | {"transport": "SHM"}], schema=SCHEMA)

    assert upgrade(table, since=2)["transport"].to_pylist() == ["SHM"]


_NEWER = {VERSION_KEY: str(SCHEMA_VERSION + 1).encode()}


def test_a_results_file_a_newer_sweeper_wrote_is_skipped_with_one_line_that_names_it(
    tmp_path: Path,
) -> None:
    """Its rows may mean what this sweeper cannot tell (asv refuses a newer API's results),
    so neither read as today's nor taken as another tool's: skipped by name, and the rest
    read."""
    root = tmp_path / "results"
    shutil.copytree(OLD, root)
    batch = root / "date=2026-11-25" / f"{RUN}-00000.parquet"
    newer = batch.with_name(f"{RUN}-00001.parquet")
    pq.write_table(pq.read_table(batch).replace_schema_metadata(_NEWER), newer)

    with pytest.warns(CorruptResults) as skipped:
        rows = sweeper.load(root)

    (message,) = (str(w.message) for w in skipped)
    assert message == (
        f"skipped {newer}: written by a newer sweeper (results schema version "
        f"{SCHEMA_VERSION + 1}; this one reads up to {SCHEMA_VERSION})"
    )
    assert len(rows) == pq.read_metadata(batch).num_rows


def test_a_journal_a_newer_sweeper_left_is_skipped_and_kept_not_recovered(tmp_path: Path) -> None:
    """Recovering it here would write its rows as this version's batch, losing what only the
    newer schema says."""
    run_id = "20261127T000000Z-abcdef"
    journal = journal_path(tmp_path, run_id)
    journal.parent.mkdir(parents=True)
    metadata = {**_NEWER, b"batch": b"0", b"date": b"2026-11-27"}
    rows = pa.Table.from_pylist([{"run_id": run_id}], schema=SCHEMA.with_metadata(metadata))
    with pa.OSFile(str(journal), "wb") as sink, pa.ipc.new_stream(sink, rows.schema) as stream:
        stream.write_table(rows)

    with pytest.warns(CorruptResults, match=r"skipped .*\.arrows: written by a newer sweeper"):
        sweeper.load(tmp_path)

    assert journal.exists()
    assert not list(tmp_path.glob("date=*/*.parquet"))
