"""alpha-beta fits: the model's parameters come back, robustly, from rows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sweeper.analysis import fit_alpha_beta, fits
from sweeper.results.load import load
from tests import report_data

SIZES = np.array([8 * 4.0**k for k in range(14)])


def _times(alpha_us: float, beta_gb_per_s: float) -> np.ndarray:
    return alpha_us + SIZES / (beta_gb_per_s * 1e3)


def test_exact_points_give_back_alpha_and_beta() -> None:
    fit = fit_alpha_beta(SIZES, _times(35.0, 240.0))
    assert fit is not None
    assert fit.alpha_us == pytest.approx(35.0, rel=1e-6)
    assert fit.beta_gb_per_s == pytest.approx(240.0, rel=1e-6)
    assert fit.rel_error == pytest.approx(0.0, abs=1e-9)
    assert fit.points == len(SIZES)
    assert fit.time_us(2**20) == pytest.approx(35.0 + 2**20 / 240e3)


def test_a_few_disturbed_points_do_not_move_the_fit() -> None:
    times = _times(20.0, 100.0)
    times[[2, 9]] *= 3.0  # a neighbour's job, twice
    fit = fit_alpha_beta(SIZES, times)
    assert fit is not None
    assert fit.alpha_us == pytest.approx(20.0, rel=0.02)
    assert fit.beta_gb_per_s == pytest.approx(100.0, rel=0.02)


def test_small_sizes_weigh_as_much_as_large_ones() -> None:
    """On relative error, 5% noise leaves alpha within a few percent, although the largest
    times are 10^4 times alpha."""
    rng = np.random.default_rng(0)
    times = _times(30.0, 300.0) * rng.uniform(0.95, 1.05, len(SIZES))
    fit = fit_alpha_beta(SIZES, times)
    assert fit is not None
    assert fit.alpha_us == pytest.approx(30.0, rel=0.05)
    assert fit.beta_gb_per_s == pytest.approx(300.0, rel=0.05)


def test_parameters_never_go_negative() -> None:
    fit = fit_alpha_beta(SIZES, SIZES / 50e3 * np.linspace(1.3, 0.9, len(SIZES)))
    assert fit is not None
    assert fit.alpha_us >= 0
    flat = fit_alpha_beta(SIZES, np.full(len(SIZES), 10.0))
    assert flat is not None
    assert flat.alpha_us == pytest.approx(10.0)
    assert flat.beta_gb_per_s == float("inf")


def test_one_size_is_not_enough_to_fit() -> None:
    assert fit_alpha_beta([64, 64], [3.0, 3.1]) is None
    assert fit_alpha_beta([], []) is None


def test_fits_per_tier_and_operation_from_stored_rows(tmp_path: Path) -> None:
    report_data.write_run(tmp_path, "r1")
    table = fits(load(tmp_path).query("status == 'ok' and op != 'p2p' and op != 'copy'"))
    rows = table.set_index(["tier", "operation"])
    for (op, algorithm, variant), (alpha, beta, _) in report_data.MODELS.items():
        tier = "nvlink" if variant == "default" else f"nvlink/{variant}"
        name = op if algorithm == "native" else f"{op} ({algorithm})"
        assert rows.loc[(tier, name), "alpha_us"] == pytest.approx(alpha, rel=1e-3)
        assert rows.loc[(tier, name), "beta_gb_per_s"] == pytest.approx(beta, rel=1e-3)
    assert set(table["world_size"]) == {4}
