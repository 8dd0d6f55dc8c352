"""How `sweeper nightly` judges histories with the measured noise (benchmarks/nights.py):
over many seeds, 14 nights of eight nodes, one node's bandwidth 10% lower from night 10,
another node twice as noisy, each night judged as it came. Prints the false alarms (a
regression anywhere but the stepped series after its step), how soon the step alarms and
whether it is dated to its night, and the fail-slow flags of the noisy node and of the
others, each with its 95% interval (Wilson).

    python -m benchmarks.nightly_noise --seeds 200
"""

from __future__ import annotations

import argparse
import math
from collections import Counter

from benchmarks.nights import NOISY, STEPPING, judged, nights
from sweeper.analysis.regression import PEAK_BUSBW, Policy
from sweeper.planning.profile import NightlySettings


def wilson(hits: int, n: int) -> str:
    """hits / n with its 95% Wilson interval."""
    if not n:
        return "-"
    p, z = hits / n, 1.96
    middle = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return f"{hits}/{n} = {p:.2%} [{max(0, middle - half):.2%}, {min(1, middle + half):.2%}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=200)
    seeds = parser.parse_args().seeds
    policy = Policy.of(NightlySettings())
    false = series_nights = false_seeds = dated = alarm_nights = 0
    first: Counter[int] = Counter()
    noisy = noisy_n = others = others_n = 0
    for seed in range(seeds):
        history = nights(seed)
        alarms = []
        wrong = False
        for tonight, findings in enumerate(judged(history, policy), start=policy.min_history):
            series_nights += len(findings)
            hit = findings[findings["status"] == "regression"]
            planted = (
                (hit["group_id"] == STEPPING)
                & (hit["metric"] == PEAK_BUSBW.name)
                & (tonight >= history.step_night)
            )
            false += int((~planted).sum())
            wrong |= bool((~planted).any())
            if planted.any():
                alarms.append(tonight)
                began = hit.loc[planted, "step_began"]
                dated += int((began == history.runs[history.step_night]).all())
                alarm_nights += 1
            nodes = findings.drop_duplicates("group_id").set_index("group_id")
            judged_nodes = nodes[nodes["noise_ratio"].notna()]
            others += int(judged_nodes.drop(NOISY, errors="ignore")["fail_slow"].sum())
            others_n += len(judged_nodes.drop(NOISY, errors="ignore"))
            if tonight == len(history.runs) - 1:
                noisy += int(nodes.loc[NOISY, "fail_slow"])
                noisy_n += 1
        false_seeds += wrong
        first[alarms[0] - history.step_night if alarms else -1] += 1
    alarmed = sum(n for after, n in first.items() if after >= 0)
    print(f"{seeds} histories of 14 nights x 8 nodes x 2 metrics, step on night 10")
    print(f"false regressions (series x nights): {wilson(false, series_nights)}")
    print(f"histories with any false regression: {wilson(false_seeds, seeds)}")
    print(f"step alarmed: {wilson(alarmed, seeds)}")
    print(f"first alarm, nights after the step: {sorted(first.items())}")
    print(f"alarm nights dated to the step's night: {wilson(dated, alarm_nights)}")
    print(f"fail-slow, the noisy node on the last night: {wilson(noisy, noisy_n)}")
    print(f"fail-slow, other nodes (nights 10-14): {wilson(others, others_n)}")


if __name__ == "__main__":
    main()
