"""Rebuild a Group Event log from Temporal workflow history alone (``mwp log rebuild``).

Every accepted Event of a Group appears in its MissionWorkflow's history: in the result of
the Update that accepted it and in the input of the mirror activity that stored it (timer and
child-Mission Events only there). Collecting them over every run of the workflow, checking
that they are contiguous and agree wherever they appear twice, and sealing them again with the
Group Authority's key gives the log the mirror wrote, byte for byte: seals are deterministic.
Runs older than the namespace's retention period are gone from history; so is their part of
the log from this rebuild.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from mwp.client import Identity
from mwp.contracts.mission import MIRROR_EVENTS
from mwp.log.group_log import GroupEventLog
from mwp.stores.objects import ObjectStore

CLAUSES: tuple[str, ...] = ("MWP-MSN-009",)

# ``progress(done, total)``: history events read (total unknown), or sequences compared.
Progress = Callable[[int, int | None], None]


class RebuildError(RuntimeError):
    pass


@dataclass(frozen=True)
class Rebuilt:
    workflow_id: str
    runs: int
    events: int
    written: int


@dataclass(frozen=True)
class Comparison:
    compared: int
    first_difference: int | None  # a sequence whose bytes differ or that one side lacks

    @property
    def identical(self) -> bool:
        return self.first_difference is None


async def mission_workflow_of(client: Client, group_id: str) -> str:
    """The MissionWorkflow ID deciding for ``group_id`` (its GroupId search attribute)."""
    query = f"WorkflowType = 'MissionWorkflow' AND GroupId = '{_quoted(group_id)}'"
    found = {execution.id async for execution in client.list_workflows(query)}
    if len(found) != 1:
        raise RebuildError(f"{len(found)} Mission workflows hold Group {group_id}")
    return found.pop()


async def events_from_history(
    client: Client, workflow_id: str, progress: Progress | None = None
) -> tuple[list[dict[str, Any]], int]:
    """Every accepted Event in the workflow's histories (all runs), in Group order; and the
    number of runs read. ``progress`` hears of every history event read."""
    runs = [
        execution.run_id
        async for execution in client.list_workflows(f"WorkflowId = '{_quoted(workflow_id)}'")
    ]
    by_sequence: dict[int, dict[str, Any]] = {}
    read = 0
    for run_id in runs:
        handle = client.get_workflow_handle(workflow_id, run_id=run_id)
        async for event in handle.fetch_history_events():
            read += 1
            if progress is not None:
                progress(read, None)
            for accepted in await _accepted_events(client, event):
                _keep(by_sequence, accepted)
    if not by_sequence:
        raise RebuildError(f"no accepted Events in the history of {workflow_id}")
    sequences = sorted(by_sequence)
    if sequences != list(range(1, len(sequences) + 1)):
        missing = next(s for s in range(1, sequences[-1] + 1) if s not in by_sequence)
        raise RebuildError(f"history lacks sequence {missing} (older runs past retention?)")
    return [by_sequence[s] for s in sequences], len(runs)


async def _accepted_events(client: Client, event: Any) -> list[dict[str, Any]]:
    converter = client.data_converter
    if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
        attributes = event.activity_task_scheduled_event_attributes
        if attributes.activity_type.name != MIRROR_EVENTS:
            return []
        (batch,) = await converter.decode(attributes.input.payloads, [dict])
        return list(batch["events"])
    if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:
        outcome = event.workflow_execution_update_completed_event_attributes.outcome
        if not outcome.HasField("success") or not outcome.success.payloads:
            return []
        (result,) = await converter.decode(outcome.success.payloads, [dict])
        if not isinstance(result, dict) or "receipt" not in result:
            return []
        return list(result.get("events", []))
    return []


def _keep(by_sequence: dict[int, dict[str, Any]], event: Mapping[str, Any]) -> None:
    sequence = int(event["sequence"])
    seen = by_sequence.setdefault(sequence, dict(event))
    if seen != event:
        raise RebuildError(f"history holds two different Events at sequence {sequence}")


async def rebuild(
    client: Client,
    group_id: str,
    destination: ObjectStore,
    authority: Identity,
    progress: Progress | None = None,
) -> Rebuilt:
    """Seal the Group's Events from history into ``destination`` with ``authority``'s key;
    ``progress`` hears of every history event read."""
    workflow_id = await mission_workflow_of(client, group_id)
    events, runs = await events_from_history(client, workflow_id, progress)
    if any(e["groupId"] != group_id for e in events):
        raise RebuildError("history holds Events of another Group")
    log = GroupEventLog(destination, group_id)
    result = log.seal_and_append(events, authority.key_id, authority.key)
    return Rebuilt(workflow_id, runs, len(events), result.written)


def compare(
    one: GroupEventLog, other: GroupEventLog, progress: Progress | None = None
) -> Comparison:
    """Whether two logs of a Group hold the same bytes at every sequence; ``progress`` hears
    of every sequence compared."""
    last = max(one.last_sequence(), other.last_sequence())
    for sequence in range(1, last + 1):
        if progress is not None:
            progress(sequence, last)
        mine, theirs = one.store.get(one.key(sequence)), other.store.get(other.key(sequence))
        if mine is None or theirs is None or mine != theirs:
            return Comparison(sequence - 1, sequence)
    return Comparison(last, None)


def _quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace("'", "\\'")
