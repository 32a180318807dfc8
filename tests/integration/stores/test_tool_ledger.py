"""The tool ledger on a folder and a real S3 server: one external effect per op_id.

``Counter`` stands for an external system: it outlives the agent's process and counts effects.
Given a key it dedupes by it, as an external system taking an idempotency key does.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mwp.agent import ToolLedger, ToolLedgerError, tool_key
from mwp.stores.artifacts import ArtifactStore
from mwp.stores.objects import ObjectStore

M, W = "urn:mwp:mission:m1", "urn:mwp:work-item:w1"


class Counter:
    def __init__(self) -> None:
        self.effects = 0
        self.seen: dict[str, int] = {}

    async def increment(self, idempotency_key: str | None = None) -> int:
        if idempotency_key is not None and idempotency_key in self.seen:
            return self.seen[idempotency_key]
        self.effects += 1
        if idempotency_key is not None:
            self.seen[idempotency_key] = self.effects
        return self.effects


class CrashBeforeRecord(ObjectStore):  # type: ignore[misc]
    """The store of a worker that dies after the tool's effect, before its record is written."""

    def __init__(self, store: ObjectStore) -> None:
        self.inner = store

    def put_if_absent(self, key: str, data: bytes) -> bool:
        raise SystemExit("worker killed")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class CrashAfterRecord(ObjectStore):  # type: ignore[misc]
    """The store of a worker that dies right after recording, before the caller sees it."""

    def __init__(self, store: ObjectStore) -> None:
        self.inner = store

    def put_if_absent(self, key: str, data: bytes) -> bool:
        self.inner.put_if_absent(key, data)
        raise SystemExit("worker killed")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def test_a_repeated_call_returns_the_recorded_result_without_calling(
    object_store: ObjectStore,
) -> None:
    counter, ledger = Counter(), ToolLedger(object_store)
    key = tool_key(M, W, 1, "count")
    assert await ledger.run_once(key, counter.increment) == 1
    assert await ledger.run_once(key, counter.increment) == 1
    # A restarted worker (a new ledger over the same store) and a preemption-resume of the
    # same owner (same Ownership Epoch, same key) find the record too.
    assert await ToolLedger(object_store).run_once(key, counter.increment) == 1
    assert counter.effects == 1
    assert object_store.exists(f"tools/{key[7:]}.json")


async def test_a_crash_after_the_record_returns_it_on_retry(object_store: ObjectStore) -> None:
    counter = Counter()
    key = tool_key(M, W, 1, "count")
    with pytest.raises(SystemExit):
        await ToolLedger(CrashAfterRecord(object_store)).run_once(key, counter.increment)
    assert await ToolLedger(object_store).run_once(key, counter.increment) == 1
    assert counter.effects == 1


async def test_the_window_between_effect_and_record_repeats_an_effect_without_a_key(
    object_store: ObjectStore,
) -> None:
    """The documented window: the ledger alone cannot make a keyless effect exactly-once."""
    counter = Counter()
    key = tool_key(M, W, 1, "count")
    with pytest.raises(SystemExit):
        await ToolLedger(CrashBeforeRecord(object_store)).run_once(key, counter.increment)
    assert await ToolLedger(object_store).run_once(key, counter.increment) == 2
    assert counter.effects == 2


async def test_a_key_passing_tool_has_one_effect_across_that_window(
    object_store: ObjectStore,
) -> None:
    counter = Counter()
    key = tool_key(M, W, 1, "count")
    with pytest.raises(SystemExit):
        await ToolLedger(CrashBeforeRecord(object_store)).run_once(
            key, counter.increment, pass_key=True
        )
    ledger = ToolLedger(object_store)
    assert await ledger.run_once(key, counter.increment, pass_key=True) == 1
    assert await ledger.run_once(key, counter.increment, pass_key=True) == 1
    assert counter.effects == 1 and list(counter.seen) == [key]


async def test_a_failed_call_records_nothing_and_the_retry_calls_again(
    object_store: ObjectStore,
) -> None:
    ledger, calls = ToolLedger(object_store), []

    async def flaky() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionError("tool outage")
        return "ok"

    key = tool_key(M, W, 1, "flaky")
    with pytest.raises(ConnectionError):
        await ledger.run_once(key, flaky)
    assert await ledger.recorded(key) is None
    assert await ledger.run_once(key, flaky) == "ok"
    assert await ledger.run_once(key, flaky) == "ok"
    assert len(calls) == 2


async def test_concurrent_callers_cannot_record_different_results(
    object_store: ObjectStore,
) -> None:
    """Two workers (two ledgers) call at once; the write-once store picks one result."""
    key = tool_key(M, W, 1, "race")
    both_called = asyncio.Barrier(2)

    def tool(value: str) -> Any:
        async def call() -> str:
            await both_called.wait()  # neither has recorded yet
            return value

        return call

    results = await asyncio.gather(
        ToolLedger(object_store).run_once(key, tool("first")),
        ToolLedger(object_store).run_once(key, tool("second")),
    )
    assert results[0] == results[1] and results[0] in ("first", "second")
    recorded = await ToolLedger(object_store).recorded(key)
    assert recorded is not None and recorded.result == results[0]


async def test_concurrent_calls_in_one_process_call_the_tool_once(
    object_store: ObjectStore,
) -> None:
    counter, ledger = Counter(), ToolLedger(object_store)
    key = tool_key(M, W, 1, "count")
    results = await asyncio.gather(*(ledger.run_once(key, counter.increment) for _ in range(5)))
    assert results == [1] * 5 and counter.effects == 1


async def test_a_new_owner_after_fencing_gets_fresh_keys(object_store: ObjectStore) -> None:
    counter, ledger = Counter(), ToolLedger(object_store)
    first = tool_key(M, W, 1, "count")
    assert await ledger.run_once(first, counter.increment, pass_key=True) == 1
    # Reassigned under Ownership Epoch 2: its call is a new request, not the fenced owner's.
    second = tool_key(M, W, 2, "count")
    assert await ledger.run_once(second, counter.increment, pass_key=True) == 2
    # A late retry of the fenced owner still gets its own recorded result.
    assert await ledger.run_once(first, counter.increment, pass_key=True) == 1
    assert counter.effects == 2


async def test_large_results_go_to_the_artifact_store_by_reference(
    object_store: ObjectStore,
) -> None:
    artifacts = ArtifactStore(object_store)
    ledger = ToolLedger(object_store, artifacts=artifacts, inline_limit=1024)
    big = {"rows": ["x" * 100] * 50}
    key = tool_key(M, W, 1, "export")

    async def export() -> dict[str, Any]:
        return big

    record = await ledger.run_once_record(key, export)
    assert record.artifact_hash is not None and artifacts.exists(record.artifact_hash)
    assert len(object_store.get(f"tools/{key[7:]}.json") or b"") < 400
    again = await ToolLedger(object_store, artifacts=artifacts).recorded(key)
    assert again is not None and again.result == big and not again.recorded_now
    with pytest.raises(ToolLedgerError, match="no Artifact store"):
        await ToolLedger(object_store, inline_limit=1024).run_once(
            tool_key(M, W, 1, "export-2"), export
        )


async def test_a_result_that_is_not_json_is_refused(object_store: ObjectStore) -> None:
    async def bad() -> Any:
        return {1, 2}

    key = tool_key(M, W, 1, "bad")
    with pytest.raises(ToolLedgerError, match="not JSON"):
        await ToolLedger(object_store).run_once(key, bad)
    assert await ToolLedger(object_store).recorded(key) is None
