"""How much of a fleet is slow, read from how many of its groups of each size held no slow
node: a group runs at its slowest member's pace, so where a share d of the nodes is slow and
scattered, a group of g nodes passes a threshold with chance (1 - d)^g. The fleet off as a
whole passes none (d = 1); 20% of 256 nodes slow passes 3.5% of the screen's groups of 16
(d = 0.2), while the median of the nodes' best groups is already a slow node's, since most
healthy nodes never sat in a clean group. A rack is not scattered: the screen's lines spread
it, one node a line, so it reads as less than it is, never as more."""

from __future__ import annotations

from collections.abc import Iterable

_STEPS = 60  # bisection steps on (0, 1): far below any share's meaning


def slow_share(groups: Iterable[tuple[int, bool]]) -> float:
    """The share of slow nodes most likely to give these groups' passes (nodes in the group,
    whether it passed): 0 where every group passed, 1 where none did."""
    sizes: dict[int, list[int]] = {}
    for nodes, passed in groups:
        tally = sizes.setdefault(nodes, [0, 0])
        tally[0] += 1
        tally[1] += passed
    if not sizes or all(passed == 0 for _, passed in sizes.values()):
        return 1.0
    if all(passed == count for count, passed in sizes.values()):
        return 0.0

    def slope(q: float) -> float:  # of the log-likelihood in q = 1 - d, falling in q
        return sum(
            passed * g / q - (count - passed) * g * q ** (g - 1) / (1 - q**g)
            for g, (count, passed) in sizes.items()
        )

    low, high = 0.0, 1.0
    for _ in range(_STEPS):
        q = (low + high) / 2
        if slope(q) > 0:
            low = q
        else:
            high = q
    return 1 - (low + high) / 2
