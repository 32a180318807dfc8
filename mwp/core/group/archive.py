"""Group archival (spec 7.4, 15.2): the closed Group records its signed final snapshot.

``ext.missionweaveprotocol.core.group_archive`` is the Organization-owned Command spec 15.2
names for ``group.snapshot.created`` and ``group.archived``. The bundle defines no payload; this
core's is ``snapshot``: the signed Group Snapshot of purpose ``archival`` that
``mwp.log.compaction.archive_group`` wrote. The shell verifies its signature against the
Registry evidence before the core decides, as for an Artifact manifest; the core checks that it
describes exactly this Group's Events through its current sequence and that its creator is the
Group's own Authority (the authorized archival service, spec 6: else ``AUTH_FORBIDDEN``).

From rules ``RULES_OVERSIGHT`` on the snapshot may leave out ``eventIds``: they are this
Group's Event IDs 1 to ``throughSequence``, derived from the Group ID (``ids.event_id``), and a
Group of many thousand Events would otherwise pass the Command size bound. The shell verifies
the signature of the completed document (:func:`completed_snapshot`), so the creator signed
exactly those IDs, and the core decides on that document.

Both Events go on the Mission aggregate, in one atomic decision. From ``group.archived`` on the
Group refuses every Command (``decision.py``), a byte-equal retry excepted. The two Events come
after the snapshot's last sequence: a snapshot cannot list the Events that record it.
"""

from __future__ import annotations

from typing import Any, Final

from mwp.core.group.api import RULES_ARCHIVE, RULES_OVERSIGHT, AuthorityContext
from mwp.core.group.drafts import Drafts
from mwp.core.group.ids import event_id
from mwp.core.group.incoming import Incoming
from mwp.core.group.payload import members
from mwp.core.group.rejection import bad_transition, forbidden, invalid
from mwp.core.group.roles import owner_or_service
from mwp.core.group.rules import CommandRule
from mwp.core.group.state import GroupState
from mwp.core.models import DocumentInvalid, validate_document
from mwp.core.wire.jcs import canonicalize, sha256_ref

Json = dict[str, Any]

GROUP_ARCHIVE_KIND: Final = "ext.missionweaveprotocol.core.group_archive"
ARCHIVAL_DECISION: Final = "group.snapshot.archival"
SNAPSHOT_SCHEMA: Final = "group-snapshot.schema.json"


def compact_snapshot(document: Json) -> Json:
    """The signed final snapshot as a compact archive Command carries it: without its
    ``eventIds``, which its Group ID and ``throughSequence`` determine."""
    return {name: value for name, value in document.items() if name != "eventIds"}


def completed_snapshot(snapshot: Any, sequence: int) -> Any:
    """A compact snapshot with its ``eventIds`` put back: the Group's Event IDs 1 to its
    ``throughSequence``. Anything else is returned as it is (the schema check refuses it), and
    so is a ``throughSequence`` outside 1 to the Group's current ``sequence``: no Command makes
    the shell derive more IDs than the Group has Events."""
    if not isinstance(snapshot, dict) or "eventIds" in snapshot:
        return snapshot
    group_id, through = snapshot.get("groupId"), snapshot.get("throughSequence")
    if not isinstance(group_id, str) or type(through) is not int or not 1 <= through <= sequence:
        return snapshot
    return {**snapshot, "eventIds": [event_id(group_id, s) for s in range(1, through + 1)]}


def _decide_archive(
    state: GroupState, cmd: Incoming, ctx: AuthorityContext, drafts: Drafts
) -> None:
    mission = state.mission
    assert mission is not None
    if not mission.terminal:
        bad_transition("Mission", mission.state, cmd.kind, reason="the Mission is not closed")
    snapshot = cmd.payload.obj("snapshot")
    if ctx.rules >= RULES_OVERSIGHT:
        snapshot = completed_snapshot(snapshot, state.sequence)
    try:
        validate_document(SNAPSHOT_SCHEMA, snapshot)
    except DocumentInvalid as exc:
        invalid(f"the snapshot is not a Group Snapshot: {exc.reason}", member="payload.snapshot")
    creator = snapshot["createdBy"]
    if (creator.get("type"), creator.get("id")) != (ctx.authority.type, ctx.authority.id):
        forbidden(
            "a Group Snapshot is created by this Group's Authority, the archival service",
            createdBy=creator.get("id"),
        )
    _check_covers(state, snapshot)
    through = state.sequence
    aggregate = ("mission", mission.mission_id)
    snapshot_id = snapshot["snapshotId"]
    drafts.add(
        "group.snapshot.created",
        aggregate,
        {
            "snapshotId": snapshot_id,
            "throughSequence": through,
            "stateHash": snapshot["stateHash"],
            # The stored object's hash: the snapshot's JCS bytes, signature included.
            "snapshotHash": sha256_ref(canonicalize(snapshot)),
        },
    )
    drafts.add("group.archived", aggregate, {"snapshotId": snapshot_id, "throughSequence": through})


def _check_covers(state: GroupState, snapshot: Json) -> None:
    """The snapshot describes this Group's whole history at its current sequence."""
    through = state.sequence
    if snapshot["groupId"] != state.group_id:
        invalid("the snapshot is of another Group", reason="snapshot_group")
    if snapshot["throughSequence"] != through:
        invalid(
            "the snapshot does not end at the Group's current sequence",
            reason="snapshot_sequence",
            throughSequence=snapshot["throughSequence"],
            sequence=through,
        )
    expected = [event_id(state.group_id, s) for s in range(1, through + 1)]
    if snapshot["eventIds"] != expected:
        invalid("the snapshot does not list this Group's Events in order", reason="snapshot_events")
    own = snapshot["policyLog"][0]
    details = own.get("details") or {}
    if (
        own.get("decision") != ARCHIVAL_DECISION
        or details.get("purpose") != "archival"
        or details.get("throughSequence") != through
        or not isinstance(details.get("headSigningHash"), str)
    ):
        invalid(
            "the snapshot's first policyLog entry is not its archival decision",
            reason="snapshot_policy_log",
        )


def _evolve_snapshot_created(state: GroupState, event: Json) -> None:
    _mission_revision(state, event)


def _evolve_archived(state: GroupState, event: Json) -> None:
    mission = _mission_revision(state, event)
    mission.archive = {
        "snapshotId": event["payload"]["snapshotId"],
        "throughSequence": event["payload"]["throughSequence"],
        "archivedAt": event["occurredAt"],
    }


def _mission_revision(state: GroupState, event: Json) -> Any:
    mission = state.mission
    assert mission is not None
    mission.revision = event["aggregateRevision"]
    mission.updated_at = event["occurredAt"]
    return mission


RULES = (
    CommandRule(
        GROUP_ARCHIVE_KIND,
        _decide_archive,
        owner_or_service,
        payload=members("snapshot"),
        clauses=("MWP-MSN-009",),
        since_rules=RULES_ARCHIVE,
    ),
)

EVOLVERS = {
    "group.snapshot.created": _evolve_snapshot_created,
    "group.archived": _evolve_archived,
}
