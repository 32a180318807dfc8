"""The tool ledger: a tool's recorded result, written once per idempotency key.

``await ledger.run_once(key, fn, *args)`` returns the result recorded under ``key`` if there is
one, without calling ``fn``. Otherwise it calls ``fn``, records its (JSON) result write-once
under ``tools/<hex>.json`` and returns it. The object store decides races: when two callers
(two worker processes, say) record different results for one key, the first write wins and
the other caller returns the winner's result, so every caller sees one result per key. A call
that raises records nothing, so a retry calls the tool again. Results whose JSON is larger
than ``inline_limit`` bytes are stored as content in the :class:`ArtifactStore` and the record
holds only their hash (checked on every read).

The window this cannot close: the result is recorded *after* the tool returns. A crash after
the tool's external effect but before the record is written (or a lost write) means the next
attempt finds no record and calls the tool again. No ledger on the caller's side can close
that window (network delivery alone never gives exactly-once effects). A tool whose effect
must happen exactly once passes the idempotency key to the external system, which dedupes by
it (``pass_key=True`` hands the key to the tool as ``idempotency_key=``). The ledger then
saves the repeated round trip; the external system guarantees the single effect.

Within one process, concurrent calls for the same key are serialized, so only one of them
calls the tool; across processes the write-once store decides as described.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from mwp.core.wire.jcs import JcsDataModelError, canonicalize
from mwp.core.wire.strict_json import JsonSyntaxError, parse_bytes
from mwp.core.wire.values import is_sha256_ref
from mwp.stores.artifacts import ArtifactStore
from mwp.stores.objects import ObjectConflict, ObjectStore

CLAUSES: tuple[str, ...] = ("MWP-WRK-031",)

TOOL_PREFIX = "tools/"
RECORD_FORMAT = "mwp-tool-result/1"
DEFAULT_INLINE_LIMIT = 256 * 1024


class ToolLedgerError(RuntimeError):
    """The ledger cannot record or read a result (not JSON, too large, damaged record)."""


@dataclass(frozen=True)
class ToolRecord:
    """What the ledger holds for a key: the result, and where it came from."""

    key: str
    result: Any
    artifact_hash: str | None  # the result's content hash when stored by reference
    recorded_now: bool  # False: the result was already recorded (by this or another caller)


def record_key(key: str) -> str:
    """The object key of the record of idempotency key ``key``."""
    if not is_sha256_ref(key):
        raise ValueError(f"not a sha256: idempotency key: {key!r}")
    return f"{TOOL_PREFIX}{key[7:]}.json"


class ToolLedger:
    """Write-once tool results over an object store (a folder or S3)."""

    def __init__(
        self,
        store: ObjectStore,
        *,
        artifacts: ArtifactStore | None = None,
        inline_limit: int = DEFAULT_INLINE_LIMIT,
    ) -> None:
        self.store = store
        self.artifacts = artifacts
        self.inline_limit = inline_limit
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    def __repr__(self) -> str:
        return f"ToolLedger({self.store!r})"

    async def recorded(self, key: str) -> ToolRecord | None:
        """The recorded result of ``key``, or None when nothing is recorded."""
        data = await asyncio.to_thread(self.store.get, record_key(key))
        return None if data is None else await self._decode(key, data, recorded_now=False)

    async def run_once(
        self,
        key: str,
        fn: Callable[..., Awaitable[Any]],
        *args: Any,
        pass_key: bool = False,
        **kwargs: Any,
    ) -> Any:
        """The result recorded under ``key``; calls ``fn(*args, **kwargs)`` only if none is."""
        return (await self.run_once_record(key, fn, *args, pass_key=pass_key, **kwargs)).result

    async def run_once_record(
        self,
        key: str,
        fn: Callable[..., Awaitable[Any]],
        *args: Any,
        pass_key: bool = False,
        **kwargs: Any,
    ) -> ToolRecord:
        """Like :meth:`run_once`, returning the whole :class:`ToolRecord`."""
        object_key = record_key(key)
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        async with lock:
            existing = await self.recorded(key)
            if existing is not None:
                return existing
            if pass_key:
                kwargs["idempotency_key"] = key
            result = await fn(*args, **kwargs)
            data, artifact_hash = await self._encode(key, result)
            try:
                await asyncio.to_thread(self.store.put_if_absent, object_key, data)
            except ObjectConflict:
                # Another caller recorded a different result first: theirs is the result.
                winner = await self.recorded(key)
                if winner is None:  # pragma: no cover - a write-once store never unwrites
                    raise ToolLedgerError(f"record of {key} vanished after a conflict") from None
                return winner
            return ToolRecord(key, result, artifact_hash, recorded_now=True)

    # --- encoding ---------------------------------------------------------------------------

    async def _encode(self, key: str, result: Any) -> tuple[bytes, str | None]:
        try:
            body = canonicalize(result)
        except (JcsDataModelError, TypeError, ValueError) as exc:
            raise ToolLedgerError(f"the result of tool call {key} is not JSON: {exc}") from exc
        record: dict[str, Any] = {"format": RECORD_FORMAT, "key": key}
        artifact_hash = None
        if len(body) > self.inline_limit:
            if self.artifacts is None:
                raise ToolLedgerError(
                    f"the result of tool call {key} has {len(body)} bytes, over the inline "
                    f"limit of {self.inline_limit}, and the ledger has no Artifact store"
                )
            stored = await asyncio.to_thread(self.artifacts.put, body)
            artifact_hash = stored.content_hash
            record["resultRef"] = {"contentHash": stored.content_hash, "sizeBytes": len(body)}
        else:
            record["result"] = result
        return canonicalize(record), artifact_hash

    async def _decode(self, key: str, data: bytes, *, recorded_now: bool) -> ToolRecord:
        try:
            record = parse_bytes(data)
        except JsonSyntaxError as exc:
            raise ToolLedgerError(f"the record of {key} is damaged: {exc}") from exc
        if not isinstance(record, dict) or record.get("format") != RECORD_FORMAT:
            raise ToolLedgerError(f"the record of {key} is not a tool result record")
        if record.get("key") != key:
            raise ToolLedgerError(f"the record under {key} names another key")
        if "result" in record:
            return ToolRecord(key, record["result"], None, recorded_now)
        ref = record.get("resultRef")
        if not isinstance(ref, dict) or not is_sha256_ref(str(ref.get("contentHash"))):
            raise ToolLedgerError(f"the record of {key} has neither result nor resultRef")
        if self.artifacts is None:
            raise ToolLedgerError(f"the result of {key} is stored by reference: need Artifacts")
        content_hash = str(ref["contentHash"])
        # ArtifactStore.get checks the content hash: a tampered result raises, never returns.
        body = await asyncio.to_thread(self.artifacts.get, content_hash)
        return ToolRecord(key, parse_bytes(body), content_hash, recorded_now)
