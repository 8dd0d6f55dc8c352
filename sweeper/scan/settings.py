"""A scan's settings as the scan runs them (`ScanSettings`: its strategy and thresholds made
from the plain values of a `planning.profile.ScanSection`, `sweeper scan`'s options or a
profile's `scan:`), checked before Ray starts, and as its run record keeps them."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from sweeper.errors import BadInput
from sweeper.planning.profile import ScanSection
from sweeper.scan.policy import STRATEGIES, Scheme, Strategy
from sweeper.scan.thresholds import Thresholds

# the strategies, as `--strategy` takes them: the policy's own table
STRATEGY_NAMES = ", ".join(f"{s}:K" if s is Scheme.RANDOM else str(s) for s in STRATEGIES)


@dataclass(frozen=True, kw_only=True, slots=True)
class ScanSettings:
    strategy: Strategy
    thresholds: Thresholds
    # the operation of every group of whole nodes, by registry name (a plugin's, in tests);
    # None: each stage's own (scan.fleet.OPS)
    op: str | None = None
    # None: every node with a GPU (CPU, on gloo); a count; or the nodes by host or Ray id
    nodes: int | tuple[str, ...] | None = None
    domain_label: str | None = None  # a Ray node label: its values are the screen's groups
    sizes: tuple[int, int] | None = None  # latency, bandwidth; None: by backend
    start_timeout_s: float = 120.0  # an actor set's start, and a rebuild's

    def plain(self) -> dict[str, Any]:
        """The settings as a profile's `scan:` section (planning.profile.ScanSection) gives
        them, JSON: what the run record keeps, and a resume reads back."""
        limits = self.thresholds
        return {
            "strategy": str(self.strategy),
            "seed": self.strategy.seed,
            "pair_rounds": self.strategy.pair_rounds,
            "nodes": list(self.nodes) if isinstance(self.nodes, tuple) else self.nodes,
            "domain_label": self.domain_label,
            "op": self.op,
            "sizes": list(self.sizes) if self.sizes else None,
            "min_busbw_gb_per_s": {str(t): v for t, v in limits.min_busbw_gb_per_s.items()},
            "sigmas": limits.sigmas,
            "min_ratio": limits.min_ratio,
        }


def settings(made: ScanSection, given_as: str | None = None) -> ScanSettings:
    """The scan's settings from its section; a strategy that is none is BadInput naming
    where it was given (`given_as`: scan.strategy in a profile; else --strategy)."""
    limits = Thresholds(min_busbw_gb_per_s=dict(made.min_busbw_gb_per_s))
    if made.sigmas is not None:
        limits = replace(limits, sigmas=made.sigmas)
    if made.min_ratio is not None:
        limits = replace(limits, min_ratio=made.min_ratio)
    strategy = parse_strategy(made.strategy, made.seed, given_as)
    if made.pair_rounds is not None:
        strategy = replace(strategy, pair_rounds=made.pair_rounds)
    return ScanSettings(
        strategy=strategy,
        thresholds=limits,
        op=made.op,
        nodes=made.nodes,
        domain_label=made.domain_label,
        sizes=made.sizes,
    )


def parse_strategy(text: str, seed: int, given_as: str | None = None) -> Strategy:
    """The strategy `text` names; BadInput naming where it was given (default `--strategy`)."""
    try:
        return Strategy.parse(text, seed=seed)
    except ValueError as exc:
        where = given_as or f"--strategy {text}"
        raise BadInput(f"{where}: {exc}".rstrip(), hint=f"one of {STRATEGY_NAMES}") from None
