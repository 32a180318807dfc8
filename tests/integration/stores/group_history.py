"""Real Group histories for the compaction and archival tests.

The Events come from the pure Group Authority (driven by the unit-test harness), so replaying
them rebuilds a real Group state; they are sealed with a Group Authority service key that the
Registry evidence here binds, next to an impostor service that is also registered.
"""

from __future__ import annotations

from typing import Any

from mwp.core.wire.ed25519 import SigningKey
from mwp.log.group_log import GroupEventLog
from mwp.stores.objects import ObjectStore
from tests.event_log_samples import OTHER_KEY, OTHER_KEY_ID, OTHER_SERVICE, authority_evidence
from tests.unit.group.harness import (
    ARTIFACT_A,
    AUTHORITY,
    COORD,
    GROUP,
    W1,
    Harness,
    mission_harness,
)

__all__ = ["ARTIFACT_A", "AUTHORITY", "GROUP"]

KEY_ID = "urn:example:key:group-authority:1"
KEY = SigningKey(bytes(range(7, 39)))
# The harness's Group Authority signs here; the registered impostor is the samples' one.
IMPOSTOR, IMPOSTOR_KEY_ID, IMPOSTOR_KEY = OTHER_SERVICE, OTHER_KEY_ID, OTHER_KEY
EVIDENCE = authority_evidence(AUTHORITY, KEY_ID, KEY)


def _post(h: Harness, count: int) -> None:
    for n in range(count):
        h.submit(W1, "message.post", {"content": [{"type": "text", "text": f"note {n}"}]})


def open_mission(messages: int = 4) -> list[dict[str, Any]]:
    """A Mission with one verified WorkItem and some Messages, still active."""
    h = mission_harness()
    h.verify("a")
    _post(h, messages)
    return h.events


def closed_mission(messages: int = 4) -> list[dict[str, Any]]:
    """The same Mission submitted and approved by its owner (a closed Group)."""
    h = mission_harness()
    h.verify("a")
    _post(h, messages)
    h.submit(COORD, "mission.submit_for_approval", {"artifactHashes": [ARTIFACT_A]})
    h.approve()
    return h.events


def stored_log(store: ObjectStore, events: list[dict[str, Any]]) -> GroupEventLog:
    log = GroupEventLog(store, GROUP)
    log.seal_and_append(events, KEY_ID, KEY)
    return log
