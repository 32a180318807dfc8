"""Weighted fair choice of the next Group: stride scheduling over virtual time (MWP-WRK-009/010).

Each Group has a weight (its organization priority class, set by policy or the MissionOwner,
never by a Coordinator) and a *pass*. The runnable Group with the smallest pass is served and
its pass grows by ``STRIDE_UNIT // weight``; so over any run of decisions each backlogged Group
gets a share proportional to its weight. A Group that becomes runnable again starts at the
current virtual time, so idleness banks no credit.

Bound (stated in docs/scheduler.md and tested): while Group ``g`` stays runnable, between two of
its services every other runnable Group ``i`` is served at most ``ceil(w_i / w_g) + 1`` times.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Mapping

CLAUSES: tuple[str, ...] = ("MWP-WRK-009", "MWP-WRK-010")

STRIDE_UNIT = 1 << 40  # large and fixed: integer passes keep every decision exact and replayable


def starvation_bound(weights: Mapping[str, int], group: str) -> int:
    """Most decisions for other Groups between two services of ``group`` while it is runnable."""
    w = weights[group]
    return sum(math.ceil(wi / w) + 1 for gid, wi in weights.items() if gid != group)


class StrideFairness:
    __slots__ = ("_heap", "_in_heap", "_joined", "_pass", "_vtime", "_weight")

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, str]] = []  # (pass, join order, group)
        self._in_heap: dict[str, int] = {}  # group -> the pass its live heap entry carries
        self._pass: dict[str, int] = {}
        self._weight: dict[str, int] = {}
        self._vtime = 0
        self._joined = 0

    def set_weight(self, group: str, weight: int) -> None:
        if weight < 1:
            raise ValueError("a Group weight is a positive integer")
        self._weight[group] = weight

    def weight(self, group: str) -> int:
        return self._weight.get(group, 1)

    def wake(self, group: str) -> None:
        """``group`` may have become runnable: enter it at no earlier than virtual time."""
        if group in self._in_heap:
            return
        start = max(self._pass.get(group, 0), self._vtime)
        self._pass[group] = start
        self._joined += 1
        self._in_heap[group] = start
        heapq.heappush(self._heap, (start, self._joined, group))

    def choose(self, runnable: Callable[[str], bool]) -> str | None:
        """The runnable Group with the smallest pass; Groups found not runnable leave the heap
        (their owner calls :meth:`wake` when that changes)."""
        heap = self._heap
        while heap:
            pass_, _, group = heap[0]
            if self._in_heap.get(group) != pass_:
                heapq.heappop(heap)  # stale
                continue
            if runnable(group):
                return group
            heapq.heappop(heap)
            del self._in_heap[group]
        return None

    def charge(self, group: str) -> None:
        """Account one service to ``group`` (which :meth:`choose` just returned)."""
        pass_ = self._in_heap.pop(group)
        heapq.heappop(self._heap)
        self._vtime = pass_
        nxt = pass_ + STRIDE_UNIT // self.weight(group)
        self._pass[group] = nxt
        self._joined += 1
        self._in_heap[group] = nxt
        heapq.heappush(self._heap, (nxt, self._joined, group))
