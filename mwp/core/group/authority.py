"""The Group Authority: decide, then append and evolve, one Command at a time.

``submit`` is atomic because it decides first (pure, into drafts) and only then applies the
drafts: a rejection leaves the state exactly as it was. Applying a draft assigns the next
Group sequence, a derived Event ID and the aggregate's next revision, then evolves the state
with the very Event it returns, so ``replay`` of the returned Events rebuilds the same state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from mwp.core.errors import Diagnostic, ErrorCode, MwpError
from mwp.core.group import child_mission, child_usage
from mwp.core.group.admission import Admission, GroupAdmissionLog
from mwp.core.group.api import (
    RULES_ARCHIVE,
    RULES_DOOR,
    AuthorityContext,
    ChildCharged,
    ChildSettled,
    ChildUsage,
    Envelope,
    Outcome,
    Receipt,
    TimerFired,
    TimerRequest,
)
from mwp.core.group.conversation_window import MessageWindow
from mwp.core.group.decision import Accepted, Duplicate, decide
from mwp.core.group.drafts import Aggregate, Drafts
from mwp.core.group.execution_lease import expiry_draft, revocation_drafts
from mwp.core.group.ids import derive_id, event_id
from mwp.core.group.kinds import evolve
from mwp.core.group.mission import termination_evidence
from mwp.core.group.policy import MESSAGE_WINDOW, RECEIPT_WINDOW
from mwp.core.group.receipts import ReceiptCache, ReceiptEntry, command_digest, signing_digest
from mwp.core.group.state import GroupState, WorkItem
from mwp.core.group.timers import item_timers, timer_requests
from mwp.core.group.views import (
    mission_view,
    search_attributes,
    work_item_search_attributes,
    work_item_view,
)

CLAUSES: tuple[str, ...] = ("MWP-EVT-004", "MWP-EVT-005", "MWP-EVT-006")

Json = dict[str, Any]

T = TypeVar("T")

SNAPSHOT_FORMAT = "mwp-group-authority/1"


class GroupAuthority:
    """One Group's authoritative state and the only way to change it."""

    __slots__ = ("_admissions", "_retired", "_state")

    def __init__(
        self, *, receipt_window: int = RECEIPT_WINDOW, message_window: int = MESSAGE_WINDOW
    ) -> None:
        self._state = GroupState(
            receipts=ReceiptCache(receipt_window), messages=MessageWindow(message_window)
        )
        # Full records of the items settled since this object was built or restored: their
        # final views stay available (the shell hands them to each item's WorkItemWorkflow,
        # which keeps them as its result). Never snapshotted, so bounded by one run.
        self._retired: dict[str, WorkItem] = {}
        # This Group's part of the Organization's Admission Log (admission.py).
        self._admissions = GroupAdmissionLog()

    # --- identity ---------------------------------------------------------------------------

    @property
    def group_id(self) -> str:
        return self._state.group_id

    @property
    def mission_id(self) -> str:
        return self._state.mission_id

    def mission_parent(self) -> Json | None:
        """A child Mission's parent link ({missionId, workItemId, depth}), else None."""
        mission = self._state.mission
        return mission.parent if mission is not None else None

    @property
    def sequence(self) -> int:
        return self._state.sequence

    @property
    def archived(self) -> bool:
        """``group.archived`` was recorded: the Group decides no Command any more."""
        mission = self._state.mission
        return mission is not None and mission.archived

    @property
    def receipt_horizon(self) -> int:
        """Receipts of every Command accepted from this Group sequence on are retained."""
        return self._state.receipts.horizon

    # --- Commands ---------------------------------------------------------------------------

    def check(self, envelope: Envelope, ctx: AuthorityContext) -> None:
        """Decide without changing anything; raise :class:`MwpError` to reject.

        A byte-equal retry of an accepted Command passes (``submit`` returns its receipt).
        """
        _guarded(lambda: self._decide(envelope, ctx))

    def termination_evidence(self, envelope: Envelope, ctx: AuthorityContext) -> dict[str, Any]:
        """The unsigned failure Evidence a ``mission.terminate`` would write, by WorkItem ID,
        for the shell to have signed (``AuthorityContext.signed_evidence``)."""
        return termination_evidence(self._state, envelope, ctx)

    def submit(self, envelope: Envelope, ctx: AuthorityContext) -> Outcome:
        """Decide and apply atomically: the receipt and new Events, or a typed rejection."""
        decision, admission = _guarded(lambda: self._decide(envelope, ctx))
        cmd = decision.cmd
        if not isinstance(decision, Accepted):
            receipt = _receipt(
                cmd.action_id, cmd.actor_id, cmd.signing_hash, self._state.group_id, decision.entry
            )
            return Outcome(receipt, (), duplicate=True)
        child_usage.cite_parent(decision.drafts, ctx)
        group_id = self._state.group_id or cmd.group_id or ""
        events = self._apply(
            decision.drafts,
            group_id=group_id,
            actor=cmd.actor,
            cause={"type": "command", "id": cmd.action_id},
            correlation_id=cmd.correlation_id,
            command_hash=event_command_hash(cmd.signing_hash, cmd.command_hash, ctx.rules),
            ctx=ctx,
        )
        entry = ReceiptEntry(
            signing_digest(cmd.signing_hash),
            events[0]["sequence"],
            events[-1]["sequence"],
            events[-1]["aggregateRevision"],
            ctx.now,
        )
        self._state.receipts.record(cmd.actor_id, cmd.action_id, entry)
        if admission is not None:
            admission.commit(self._state.receipts.horizon_time)
        receipt = _receipt(cmd.action_id, cmd.actor_id, cmd.signing_hash, group_id, entry)
        return Outcome(receipt, tuple(events))

    def _decide(
        self, envelope: Envelope, ctx: AuthorityContext
    ) -> tuple[Accepted | Duplicate, Admission | None]:
        """The Authority step, with First Admission from rules ``RULES_DOOR`` on."""
        if ctx.rules < RULES_DOOR:
            return decide(self._state, envelope, ctx), None
        admission = Admission(self._admissions, envelope, ctx)
        return decide(self._state, envelope, ctx, admission.admit), admission

    # --- timers -----------------------------------------------------------------------------

    def timers(self) -> list[TimerRequest]:
        """Every durable timer the current state needs (offer expiry, start-by, leases)."""
        return timer_requests(self._state)

    def work_item_timers(self, work_item_id: str) -> list[TimerRequest]:
        """The timers of one WorkItem: O(1), for syncing the items an Outcome touched."""
        item = self._state.work_items.get(work_item_id)
        return item_timers(self._state, item) if item is not None else []

    def fire(self, timer: TimerFired, ctx: AuthorityContext) -> Outcome | None:
        """A durable timer fired: the Events it causes, or None when stale or Event-free."""
        state = self._state
        mission = state.mission
        item = state.work_items.get(timer.work_item_id)
        if mission is None or mission.state != "active" or item is None:
            return None
        drafts = Drafts(state.sequence + 1)
        if not expiry_draft(item, timer.kind, timer.token, ctx.now, drafts):
            return None
        cause_id = derive_id(state.group_id, "timer", timer.kind, timer.token)
        return self._record(
            drafts,
            cause={"type": "timer", "id": cause_id},
            actor=ctx.authority.to_json(),
            correlation_id=item.work_item_id,
            ctx=ctx,
        )

    def revoke_replaced_sessions(self, ctx: AuthorityContext) -> Outcome | None:
        """The Registry's Session Epochs changed: revoke the Execution Leases of replaced
        Sessions and return their items to ``queued``; None when there are none."""
        state = self._state
        mission = state.mission
        if mission is None or mission.state != "active" or not ctx.session_epochs:
            return None
        drafts = Drafts(state.sequence + 1)
        revoked = revocation_drafts(state, ctx.session_epochs, ctx.now, drafts)
        if not revoked:
            return None
        leases = [d.payload["leaseId"] for d in drafts.items]
        return self._record(
            drafts,
            cause={"type": "policy", "id": derive_id(state.group_id, "session-replaced", *leases)},
            actor=ctx.authority.to_json(),
            correlation_id=revoked[0],
            ctx=ctx,
        )

    # --- child Missions (spec 14) -----------------------------------------------------------

    def found_child(self, parent_event: Mapping[str, Any], ctx: AuthorityContext) -> Outcome | None:
        """Open this (empty) Group as the child Mission a parent's ``mission.child.created``
        Event describes; None if it is open already (founding is idempotent)."""
        state = self._state
        parent_event_id = parent_event["eventId"]
        actor = parent_event["actor"]
        child = parent_event["payload"]["childMission"]
        if state.mission is not None:
            if state.mission.mission_id != child["missionId"]:
                raise MwpError(ErrorCode.INVALID_COMMAND, "this Group holds another Mission")
            return None
        drafts = Drafts(1)
        child_mission.found_child(parent_event, ctx.now, drafts)
        return self._record(
            drafts,
            cause={"type": "event", "id": parent_event_id},
            actor=actor,
            correlation_id=parent_event["correlationId"],
            ctx=ctx,
            group_id=child["groupId"],
        )

    def settle_child(self, report: ChildSettled, ctx: AuthorityContext) -> Outcome | None:
        """Record a child Mission's outcome on the WorkItem waiting for it; None when no item
        waits for it any more (already recorded, or the item ended first)."""
        state = self._state
        item = child_mission.child_item(state, report.child_mission_id)
        if item is None or state.mission is None or state.mission.state != "active":
            return None
        drafts = Drafts(state.sequence + 1)
        child_mission.settle_child(state, item, report, drafts)
        return self._record(
            drafts,
            cause={"type": "event", "id": report.event_id},
            actor=report.actor,
            correlation_id=item.work_item_id,
            ctx=ctx,
        )

    def abandoned_children(self, events: Iterable[Mapping[str, Any]]) -> list[tuple[str, str]]:
        """(child Mission ID, Event ID) for each child whose parent WorkItem these Events ended
        before the child settled: the shell cancels those children (parent propagation)."""
        found = []
        for event in events:
            if event["kind"] not in ("work.failed", "work.cancelled"):
                continue
            item = self._state.item_record(event.get("workItemId", ""))
            link = item.child_mission if item is not None else None
            if link is not None and link["status"] == child_mission.ABANDONED:
                found.append((link["missionId"], event["eventId"]))
        return found

    def close_for_parent(self, parent_event_id: str, ctx: AuthorityContext) -> Outcome | None:
        """Cancel this child Mission because its parent WorkItem ended (spec 7.1: parent
        cancellation propagates); None when it is already terminal."""
        state = self._state
        mission = state.mission
        if mission is None or mission.terminal:
            return None
        drafts = Drafts(state.sequence + 1)
        child_mission.close_for_parent(state, drafts)
        return self._record(
            drafts,
            cause={"type": "event", "id": parent_event_id},
            actor=ctx.authority.to_json(),
            correlation_id=mission.mission_id,
            ctx=ctx,
        )

    # --- a child Mission's usage, charged to its parent too (child_usage.py) -------------------

    def upward_charge(self, envelope: Envelope, ctx: AuthorityContext) -> ChildUsage | None:
        """The usage this Command would record that this child Group's parent must charge
        before ``submit`` applies it; None when there is none (or the Command is a retry).
        Raises :class:`MwpError` as ``check`` does; changes nothing."""
        decision, _ = _guarded(lambda: self._decide(envelope, ctx))
        if not isinstance(decision, Accepted):
            return None
        cmd = decision.cmd
        return child_usage.upward(self._state, decision.drafts, ctx, cmd.actor_id, cmd.action_id)

    def relayed_charge(self, usage: ChildUsage, ctx: AuthorityContext) -> ChildUsage | None:
        """What this Group's own parent must charge before ``charge_child(usage)`` applies:
        the same usage, for the WorkItem waiting here; None at the root (or for a retry)."""
        if child_usage.prior_charge(self._state, usage) is not None:
            return None
        drafts = Drafts(self._state.sequence + 1)
        _guarded(lambda: child_usage.decide_child_usage(self._state, usage, ctx, drafts))
        return child_usage.upward(
            self._state, drafts, ctx, "child", usage.child_mission_id, usage.charge_id
        )

    def charge_child(self, usage: ChildUsage, ctx: AuthorityContext) -> ChildCharged:
        """Charge a child Mission's usage to the WorkItem waiting for it and its ancestry, or
        raise :class:`MwpError` with nothing changed; a retry finds the Event recorded before."""
        prior = child_usage.prior_charge(self._state, usage)
        if prior is not None:
            return ChildCharged(
                prior["eventId"], prior["sequence"], prior["remaining"], duplicate=True
            )
        drafts = Drafts(self._state.sequence + 1)
        _guarded(lambda: child_usage.decide_child_usage(self._state, usage, ctx, drafts))
        child_usage.cite_parent(drafts, ctx)
        (draft,) = drafts.items
        assert draft.work_item_id is not None
        outcome = self._record(
            drafts,
            # The Organization's ledger policy charges it; the child's Command is in its Group.
            cause={"type": "policy", "id": usage.charge_id},
            actor=ctx.authority.to_json(),
            correlation_id=draft.work_item_id,
            ctx=ctx,
        )
        (event,) = outcome.events
        remaining = event["payload"]["remaining"]
        return ChildCharged(event["eventId"], event["sequence"], remaining, outcome=outcome)

    def _record(
        self,
        drafts: Drafts,
        *,
        cause: Json,
        actor: Mapping[str, str],
        correlation_id: str,
        ctx: AuthorityContext,
        group_id: str | None = None,
    ) -> Outcome:
        """Apply Events caused by something other than a Command (a timer, another Group's
        Event); the receipt names the cause, with no signing hash."""
        events = self._apply(
            drafts,
            group_id=group_id or self._state.group_id,
            actor=actor,
            cause=cause,
            correlation_id=correlation_id,
            command_hash=None,
            ctx=ctx,
        )
        entry = ReceiptEntry(
            "",
            events[0]["sequence"],
            events[-1]["sequence"],
            events[-1]["aggregateRevision"],
            ctx.now,
        )
        receipt = _receipt(cause["id"], actor["id"], "", self._state.group_id, entry)
        return Outcome(receipt, tuple(events))

    # --- applying ---------------------------------------------------------------------------

    def _apply(
        self,
        drafts: Drafts,
        *,
        group_id: str,
        actor: Mapping[str, str],
        cause: Json,
        correlation_id: str,
        command_hash: str | None,
        ctx: AuthorityContext,
    ) -> list[Json]:
        state = self._state
        accepted_by = ctx.authority.to_json()
        events = []
        for draft in drafts.items:
            sequence = state.sequence + 1
            event: Json = {
                "protocolVersion": "0.1",
                "eventId": event_id(group_id, sequence),
                "groupId": group_id,
                "sequence": sequence,
                "aggregateRevision": _revision(state, draft.aggregate) + 1,
                "kind": draft.kind,
                "actor": dict(actor),
                "cause": cause,
                "correlationId": correlation_id,
            }
            if draft.conversation_id is not None:
                event["conversationId"] = draft.conversation_id
            if draft.work_item_id is not None:
                event["workItemId"] = draft.work_item_id
            event["occurredAt"] = ctx.now
            event["payload"] = draft.payload
            event["acceptedBy"] = accepted_by
            if command_hash is not None:
                event["commandHash"] = command_hash
            evolve(state, event)
            self._keep_retired()
            events.append(event)
        return events

    def _keep_retired(self) -> None:
        retired = self._state.retired
        if retired:
            self._retired.update((item.work_item_id, item) for item in retired)
            retired.clear()

    # --- following a log -------------------------------------------------------------------

    def follow(self, event: Mapping[str, Any]) -> bool:
        """Apply the next Event of this Group's log, as :func:`replay` does but without its
        receipts: a projection kept by a reader of the signed log (the Coordinator runtime).
        False for an Event it holds already; ``ValueError`` for a gap or a foreign Event."""
        state = self._state
        sequence = event.get("sequence")
        if isinstance(sequence, int) and sequence <= state.sequence:
            return False
        if sequence != state.sequence + 1 or (
            state.group_id and event.get("groupId") != state.group_id
        ):
            raise ValueError(f"Event {event.get('eventId')} does not continue this Group's log")
        evolve(state, dict(event))
        self._keep_retired()
        return True

    # --- continue-as-new --------------------------------------------------------------------

    def snapshot(self) -> Json:
        """Compact JSON state; its size depends on live aggregates and a short record per
        settled WorkItem, never on Event count (receipts and the Message window are bounded).
        Treat it as read-only."""
        snapshot: Json = {"format": SNAPSHOT_FORMAT, "state": self._state.to_json()}
        if len(self._admissions):  # absent when empty, as before First Admission
            snapshot["admissions"] = self._admissions.to_json()
        return snapshot

    @classmethod
    def restore(cls, snapshot: Mapping[str, Any]) -> GroupAuthority:
        if snapshot.get("format") != SNAPSHOT_FORMAT:
            raise ValueError(f"not a {SNAPSHOT_FORMAT} snapshot")
        authority = cls.__new__(cls)
        authority._state = GroupState.from_json(snapshot["state"])
        authority._retired = {}
        authority._admissions = GroupAdmissionLog.from_json(snapshot.get("admissions"))
        return authority

    # --- views ------------------------------------------------------------------------------

    def mission_view(self) -> Json:
        return mission_view(self._state)

    def work_item_view(self, work_item_id: str) -> Json:
        """The full view of an unsettled item, or of one settled since this object was built
        or restored; KeyError otherwise (see ``settled_work_item``)."""
        item = self._state.work_items.get(work_item_id) or self._retired[work_item_id]
        return work_item_view(self._state, item)

    def settled_work_item(self, work_item_id: str) -> Json | None:
        """The record the Group keeps of a verified or cancelled item (None: not settled)."""
        record = self._state.settled.get(work_item_id)
        return record.to_json() if record is not None else None

    def epochs_of(self, principal_id: str) -> Json:
        """What a client signs a Command with, in O(1): the principal's current Membership
        Epoch (None without a live Membership) and the current Coordinator assignment."""
        state = self._state
        member = state.memberships.get(principal_id)
        lease = state.coordinator
        return {
            "membershipEpoch": member.epoch if member and member.state != "ended" else None,
            "coordinator": None
            if lease is None
            else {"agentId": lease.agent_id, "coordinatorEpoch": lease.epoch},
        }

    def work_item_summary(self, work_item_id: str) -> Json:
        """What a WorkItemWorkflow child holds of its item: identity, state and revision (the
        full view stays with the Mission, so each transition signal stays small)."""
        item = self._state.item_record(work_item_id)
        if item is None:
            raise KeyError(work_item_id)
        return {
            "workItemId": item.work_item_id,
            "state": item.state,
            "revision": item.revision,
            "ownershipEpoch": item.ownership_epoch,
        }

    @property
    def work_item_count(self) -> int:
        return len(self._state.work_items) + len(self._state.settled)

    def work_item_ids(self) -> list[str]:
        """Every WorkItem the Group authorized, settled ones included."""
        return [*self._state.work_items, *self._state.settled]

    def search_attributes(self) -> dict[str, str]:
        return search_attributes(self._state)

    def work_item_search_attributes(self, work_item_id: str) -> dict[str, str]:
        item = self._state.work_items.get(work_item_id) or self._retired.get(work_item_id)
        if item is not None:
            return work_item_search_attributes(item)
        settled = self._state.settled[work_item_id]  # settled in an earlier run
        return {"WorkItemState": settled.state}


def replay(
    events: Iterable[Mapping[str, Any]],
    *,
    receipt_window: int = RECEIPT_WINDOW,
    message_window: int = MESSAGE_WINDOW,
) -> GroupAuthority:
    """Rebuild a Group from its Event log alone: the same state ``submit`` built.

    Receipts are rebuilt from each Event's cause and ``commandHash`` (see receipts.py for what
    that can and cannot recognize). Raises ``ValueError`` on a gap or a foreign Event.
    """
    authority = GroupAuthority(receipt_window=receipt_window, message_window=message_window)
    state = authority._state
    pending: tuple[str, str, ReceiptEntry] | None = None
    for event in events:
        if event.get("sequence") != state.sequence + 1 or (
            state.group_id and event.get("groupId") != state.group_id
        ):
            raise ValueError(f"Event {event.get('eventId')} does not continue this Group's log")
        evolve(state, dict(event))
        authority._keep_retired()
        cause, actor = event["cause"], event["actor"]
        if cause["type"] != "command":
            if pending is not None:
                state.receipts.record(*pending)
                pending = None
            continue
        if pending is not None and (pending[0], pending[1]) == (actor["id"], cause["id"]):
            pending[2].last_sequence = event["sequence"]
            pending[2].aggregate_revision = event["aggregateRevision"]
            continue
        if pending is not None:
            state.receipts.record(*pending)
        pending = (
            actor["id"],
            cause["id"],
            ReceiptEntry(
                command_digest(event.get("commandHash", "")),
                event["sequence"],
                event["sequence"],
                event["aggregateRevision"],
                event["occurredAt"],
            ),
        )
    if pending is not None:
        state.receipts.record(*pending)
    return authority


def event_command_hash(signing_hash: str, command_hash: str, rules: int) -> str:
    """The ``commandHash`` of the Events a Command causes: from rules ``RULES_ARCHIVE`` on its
    signing hash (the JCS bytes without the signature, spec 6.4), as the reference
    implementation records it; before, the hash of the whole Command, which Groups that
    decided under older rules keep (docs/event-log.md, "commandHash")."""
    return signing_hash if rules >= RULES_ARCHIVE else command_hash


def _receipt(
    action_id: str, actor_id: str, signing_hash: str, group_id: str, entry: ReceiptEntry
) -> Receipt:
    return Receipt(
        action_id=action_id,
        actor_id=actor_id,
        signing_hash=signing_hash,
        group_id=group_id,
        first_sequence=entry.first_sequence,
        last_sequence=entry.last_sequence,
        event_ids=tuple(
            event_id(group_id, s) for s in range(entry.first_sequence, entry.last_sequence + 1)
        ),
        aggregate_revision=entry.aggregate_revision,
        accepted_at=entry.accepted_at,
    )


def _revision(state: GroupState, aggregate: Aggregate) -> int:
    kind, ident = aggregate
    if kind == "mission":
        return state.mission.revision if state.mission else 0
    if kind == "work_item":
        item = state.item_record(ident)
        return item.revision if item else 0
    if kind == "membership":
        member = state.memberships.get(ident)
        return member.revision if member else 0
    if kind == "conversation":
        return state.conversations[ident].revision
    if kind == "coordinator_lease":
        lease = state.coordinator
        return lease.revision if lease and lease.lease_id == ident else 0
    proposal = state.proposals.get(ident)
    return proposal.revision if proposal else 0


def _guarded(step: Callable[[], T]) -> T:
    """Run a decision; an unexpected fault becomes a retryable ``INTERNAL_ERROR`` (nothing was
    applied, so the Group is unchanged)."""
    try:
        return step()
    except MwpError:
        raise
    except Exception as exc:  # a defect, not a verdict: never let it escape untyped
        raise MwpError(
            ErrorCode.INTERNAL_ERROR,
            "the Authority failed without accepting the Command",
            diagnostic=Diagnostic("decide", type(exc).__name__),
        ) from exc
