"""Scheduler decision time with many Groups (MWP-WRK-009/010 at scale).

Run: ``make bench-scheduler`` (or ``.venv/bin/python -m benchmarks.scheduler``). One process,
pure code, no I/O. Builds 1,000 Groups with 100 queued items each (fed as accepted Group
Events: authorized, offered, accepted), weights 1 to 4, mixed urgency. Then times
``--decisions`` decisions; a decision is ``next_start()`` (fair Group, then its best item,
slot bound). Between decisions, outside the timing, the started item's ``work.started`` and
``work.submitted`` Events are applied so a slot frees and queues drain as in production.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

from mwp.core.scheduler import AgentProfile, GroupPolicy, Scheduler
from mwp.core.scheduler.clock import seconds, timestamp

URGENCIES = ("routine", "normal", "high", "critical")
T0 = seconds("2030-01-01T00:00:00Z")


def _contract(urgency: str) -> dict[str, object]:
    return {
        "contractVersion": 1,
        "requiredCapabilities": [{"id": "text.summarize", "version": "1.0.0"}],
        "dependencyWorkItemIds": [],
        "deadline": "2031-01-01T00:00:00Z",
        "requestedUrgency": urgency,
        "budget": {"wallClockSecondsLimit": 600},
        "sideEffectRisk": "none",
        "executionApproval": "not_required",
    }


def build(groups: int, items: int, slots: int) -> tuple[Scheduler, dict[str, int]]:
    sched = Scheduler(
        AgentProfile(
            agent_id="agent",
            card_version=1,
            capabilities={"text.summarize": frozenset({"1.0.0"})},
            slots=slots,
            queue_bound=groups * items + 1,
        )
    )
    sequences: dict[str, int] = {}
    for g in range(groups):
        gid = f"group-{g:04d}"
        sched.join_group(gid, f"mission-{g:04d}", GroupPolicy(weight=1 + g % 4, queue_bound=items))
        seq = 0
        for i in range(items):
            item, when = f"{gid}-item-{i:03d}", timestamp(T0 + i)
            for kind, payload in (
                ("work.authorized", {"workItem": {"contract": _contract(URGENCIES[i % 4])}}),
                (
                    "work.offer.created",
                    {"offers": [], "startWithinSeconds": 3600, "withdrawnOfferIds": []},
                ),
                (
                    "work.offer.accepted",
                    {
                        "owner": {
                            "agentId": "agent",
                            "ownershipEpoch": 1,
                            "acceptedAt": when,
                            "startBy": when,
                        }
                    },
                ),
            ):
                seq += 1
                sched.apply(
                    gid, {"kind": kind, "sequence": seq, "workItemId": item, "payload": payload}
                )
        sequences[gid] = seq
    return sched, sequences


def run(groups: int, items: int, slots: int, decisions: int) -> list[float]:
    sched, seqs = build(groups, items, slots)
    times: list[float] = []
    active: list[tuple[str, str]] = []
    lease = {"executionLease": {"leaseId": "lease"}}
    for _ in range(decisions):
        t = time.perf_counter_ns()
        d = sched.next_start()
        times.append((time.perf_counter_ns() - t) / 1000)
        assert d is not None
        gid, item = d.context.group_id, d.context.work_item_id
        seqs[gid] += 1
        sched.apply(
            gid,
            {"kind": "work.started", "sequence": seqs[gid], "workItemId": item, "payload": lease},
        )
        active.append((gid, item))
        if len(active) == slots:  # the oldest finishes: one slot frees for the next decision
            gid, item = active.pop(0)
            seqs[gid] += 1
            sched.apply(
                gid,
                {
                    "kind": "work.submitted",
                    "sequence": seqs[gid],
                    "workItemId": item,
                    "payload": {},
                },
            )
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--items", type=int, default=100)
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--decisions", type=int, default=20_000)
    args = parser.parse_args()
    started = time.perf_counter()
    times = run(args.groups, args.items, args.slots, args.decisions)
    ordered = sorted(times)
    p99 = ordered[int(0.99 * (len(ordered) - 1))]
    median, worst = statistics.median(times), ordered[-1]
    print(
        f"Python {platform.python_version()} on {platform.machine()}: {args.groups} Groups x "
        f"{args.items} queued items, {args.slots} slots, {len(times)} decisions"
    )
    print(f"decision time: p50 {median:.1f} us, p99 {p99:.1f} us, max {worst:.1f} us")
    verdict = "met" if p99 < 1000 else "NOT met"
    print(f"target p99 < 1000 us: {verdict}; total {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
