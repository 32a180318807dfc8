"""The Registry's performance records as the gateway keeps them (mwp.gateway.performance): a
projection of every signed Group log of the Organization in the store, read incrementally and
idempotently; another Organization's Groups and what follows a tampered entry are not taken;
Events are cited only where the reader's Membership lets it see them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mwp.core.trust.registry import RegistryEvidence
from mwp.core.wire.ed25519 import SigningKey
from mwp.gateway.https import HttpRefusal
from mwp.gateway.performance import RegistryPerformance, _parsed, performance_path
from mwp.log.compaction import compact
from mwp.log.group_log import GroupEventLog
from mwp.stores.objects import FolderObjectStore
from tests.event_log_samples import OTHER_KEY, OTHER_KEY_ID, OTHER_SERVICE, authority_evidence
from tests.unit.group.harness import AUTHORITY, COORD, W1, W2, Harness, mission_harness
from tests.unit.organization.test_performance import PYTHON, rejected

KEY_ID = "urn:example:key:group-authority:1"
KEY = SigningKey(bytes(range(7, 39)))
EVIDENCE = authority_evidence(AUTHORITY, KEY_ID, KEY)
BETA = "urn:example:group:beta"
FOREIGN = "urn:example:group:foreign"


async def evidence() -> RegistryEvidence:
    return EVIDENCE


def projection(store: FolderObjectStore) -> RegistryPerformance:
    return RegistryPerformance(store, evidence, AUTHORITY, refresh_seconds=0, safety_net_seconds=0)


def sealed(store: FolderObjectStore, h: Harness, first: int = 0) -> None:
    GroupEventLog(store, h.group_id).seal_and_append(h.events[first:], KEY_ID, KEY)


def alpha() -> Harness:
    """W1's result rejected, W2's accepted, in the Group both are Workers of."""
    h = mission_harness()
    rejected(h, "b", W1)
    h.verify("a", W2)
    return h


def beta() -> Harness:
    """Another Group, W1 its only Worker: W1's result accepted."""
    h = Harness(group_id=BETA)
    h.create_mission(missionId="urn:example:mission:beta")
    h.admit(W1)
    h.verify("c", W1)
    return h


def counts(records: RegistryPerformance, agent: str, reader: str | None = None) -> Any:
    (record,) = records.records(agent, PYTHON, reader=reader)
    return {o: n for o, n in record.counts.items() if n}, record.cited


async def test_every_group_of_the_organization_is_read_and_reading_again_adds_nothing(
    tmp_path: Path,
) -> None:
    store = FolderObjectStore(tmp_path)
    a, b = alpha(), beta()
    sealed(store, a)
    sealed(store, b)
    records = RegistryPerformance(
        store, evidence, AUTHORITY, refresh_seconds=0, safety_net_seconds=3600
    )
    await records.refresh()
    assert counts(records, W1.id)[0] == {"completed": 1, "changes_requested": 1}
    await records.refresh()
    assert counts(records, W1.id)[0] == {"completed": 1, "changes_requested": 1}
    # The log grows: read once a hint says so (or after the safety net), each Event once.
    length = len(a.events)
    a.verify("d", W1)
    sealed(store, a, length)
    await records.refresh()
    assert counts(records, W1.id)[0] == {"completed": 1, "changes_requested": 1}
    records.hint(a.group_id)
    await records.refresh()
    assert counts(records, W1.id)[0] == {"completed": 2, "changes_requested": 1}
    again = projection(store)  # rebuilt from the logs, as on a restart
    await again.refresh()
    (rebuilt,), (kept,) = again.records(W1.id), records.records(W1.id)
    assert rebuilt.counts == kept.counts
    assert {o: set(ids) for o, ids in rebuilt.cited.items()} == {
        o: set(ids) for o, ids in kept.cited.items()
    }


async def test_a_compacted_group_is_read_from_its_archive(tmp_path: Path) -> None:
    store = FolderObjectStore(tmp_path)
    a = alpha()
    sealed(store, a)
    outcomes = len(a.events)
    a.authorize("e")  # the head stays online
    sealed(store, a, outcomes)
    log = GroupEventLog(store, a.group_id)
    compact(log, outcomes, KEY_ID, KEY, evidence=EVIDENCE, authority=AUTHORITY)
    assert log.first_sequence() == outcomes + 1  # every outcome is in the archive now
    records = projection(store)
    await records.refresh()
    assert counts(records, W1.id)[0] == {"changes_requested": 1}
    assert counts(records, W2.id)[0] == {"completed": 1}


async def test_events_are_cited_only_where_the_reader_is_a_member(tmp_path: Path) -> None:
    store = FolderObjectStore(tmp_path)
    a, b = alpha(), beta()
    sealed(store, a)
    sealed(store, b)
    records = projection(store)
    await records.refresh()
    accepted_in = {
        h.group_id: [e["eventId"] for e in h.events if e["kind"] == "work.result.accepted"]
        for h in (a, b)
    }
    operator = counts(records, W1.id)[1]
    assert operator["completed"] == tuple(accepted_in[BETA])
    # W2 is a member of alpha only: beta's acceptance is counted, not cited.
    found, cited = counts(records, W1.id, reader=W2.id)
    assert found == {"completed": 1, "changes_requested": 1}
    assert cited["completed"] == ()
    assert cited["changes_requested"] != ()
    nobody = records.records(W1.id, PYTHON, reader="urn:example:agent:nobody")
    assert all(ids == () for ids in nobody[0].cited.values())
    assert records.is_coordinator(COORD.id)
    assert not records.is_coordinator(W1.id)


async def test_another_organizations_group_and_a_tampered_entry_are_not_taken(
    tmp_path: Path,
) -> None:
    store = FolderObjectStore(tmp_path)
    foreign = beta()
    events = [
        {**e, "groupId": FOREIGN, "acceptedBy": OTHER_SERVICE.to_json()} for e in foreign.events
    ]
    GroupEventLog(store, FOREIGN).seal_and_append(events, OTHER_KEY_ID, OTHER_KEY)
    a = alpha()
    sealed(store, a)
    accepted = next(e for e in a.events if e["kind"] == "work.result.accepted")
    key = GroupEventLog(store, a.group_id).key(accepted["sequence"])
    path = tmp_path / key
    value = json.loads(path.read_bytes())
    value["payload"]["comments"] = "tampered"
    path.chmod(0o644)
    path.write_text(json.dumps(value))
    records = projection(store)
    await records.refresh()
    assert counts(records, W1.id)[0] == {"changes_requested": 1}
    assert counts(records, W2.id)[0] == {}  # its acceptance was the tampered entry


def test_a_request_names_one_agent_and_perhaps_a_capability() -> None:
    assert _parsed(performance_path(W1.id, PYTHON)) == (W1.id, PYTHON)
    assert _parsed(performance_path(W1.id)) == (W1.id, None)
    for bad in (
        "/registry/performance/",
        "/registry/performance/a/b",
        performance_path(W1.id, "x"),
    ):
        try:
            _parsed(bad)
        except HttpRefusal as refusal:
            assert refusal.status == 400
        else:
            raise AssertionError(f"{bad} was taken")
