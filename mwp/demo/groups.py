"""What the demo reads as proof: each Group's signed Event log from the store (the Events the
Authority accepted, in Group order), and small questions about those Events."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from mwp.client import MwpClient
from mwp.client.missions import MissionHandle
from mwp.contracts.mission import QUERY_MIRRORED_THROUGH
from mwp.core.group.context_package import PUBLISHED_KIND as CONTEXT_PACKAGE_PUBLISHED
from mwp.log.group_log import GroupEventLog
from mwp.stores.objects import ObjectStore

Json = dict[str, Any]
# The Events that move a submitted Mission: submitted, sent back, approved.
MISSION_DECISIONS = frozenset(
    {"mission.submitted_for_approval", "mission.changes_requested", "mission.approved"}
)


@dataclass
class GroupEvents:
    """The Events of one Group, as its signed log holds them."""

    events: list[Json]

    def of(self, kind: str, work_item_id: str | None = None) -> list[Json]:
        return [
            e
            for e in self.events
            if e["kind"] == kind and (work_item_id is None or e.get("workItemId") == work_item_id)
        ]

    def first(self, kind: str, work_item_id: str | None = None) -> Json | None:
        found = self.of(kind, work_item_id)
        return found[0] if found else None

    def by(self, agent_id: str, kinds: Iterable[str] = ()) -> list[Json]:
        wanted = set(kinds)
        return [
            e
            for e in self.events
            if e["actor"]["id"] == agent_id and (not wanted or e["kind"] in wanted)
        ]


def proof(events: Sequence[Json | None]) -> list[Json]:
    """How a check cites Events: sequence, kind, Event ID."""
    return [
        {"sequence": e["sequence"], "kind": e["kind"], "eventId": e["eventId"]}
        for e in events
        if e is not None
    ]


async def mirrored(client: MwpClient, mission: MissionHandle, timeout: float = 30.0) -> int:
    """Wait until the Mission's Group log holds every Event it accepted; its last sequence."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        accepted = await mission.sequence()
        through: int = await client.query(mission.workflow_id, QUERY_MIRRORED_THROUGH)
        if through >= accepted or (asyncio.get_running_loop().time() > deadline):
            return through
        await asyncio.sleep(0.1)


class LogFollower:
    """A Group's log in the store as the mirror writes it, read on from where it stopped:
    what the scenes wait on (a look at a few files, no query to a busy workflow), never what
    they prove (the proofs verify the logs)."""

    def __init__(self, store: ObjectStore, group_id: str) -> None:
        self.log = GroupEventLog(store, group_id)
        self.events: list[Json] = []

    def read(self) -> GroupEvents:
        while batch := self.log.read(len(self.events), limit=1000):
            self.events.extend(entry.event for entry in batch)
        return GroupEvents(self.events)


def awaits_approval(events: GroupEvents) -> bool:
    """Whether the Mission's last submission waits for its owner's decision."""
    decided = [e["kind"] for e in events.events if e["kind"] in MISSION_DECISIONS]
    return bool(decided) and decided[-1] == "mission.submitted_for_approval"


def settled_for_approval(events: GroupEvents) -> bool:
    """Whether the Mission awaits its owner's decision and its Coordinator's Mission-wide
    Context Package after the submission is in: nothing more comes until the owner decides."""
    if not awaits_approval(events):
        return False
    submitted = events.of("mission.submitted_for_approval")[-1]["sequence"]
    return any(
        e["sequence"] > submitted and "workItemId" not in e["payload"]["contextPackage"]
        for e in events.of(CONTEXT_PACKAGE_PUBLISHED)
    )


def verified(events: GroupEvents) -> int:
    """How many of the Mission's WorkItems had a result accepted."""
    return len({e["workItemId"] for e in events.of("work.result.accepted")})


def read_log(store: ObjectStore, group_id: str) -> tuple[GroupEventLog, GroupEvents]:
    log = GroupEventLog(store, group_id)
    entries: list[Json] = []
    while batch := log.read(len(entries), limit=1000):
        entries.extend(entry.event for entry in batch)
    return log, GroupEvents(entries)
