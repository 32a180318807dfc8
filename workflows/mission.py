"""MissionWorkflow: one per Mission, its Group Authority on Temporal.

Every Command arrives as the ``command`` Update carrying the Command's exact wire bytes (as
text). The validator verifies the signature in six stages against the Organization's Registry
evidence and asks the pure core to decide without applying; a rejection never enters history.
The handler, which runs next in the same workflow task, reuses that verification (it verifies
itself when no validator ran, as on replay), decides again, applies atomically, and returns
the receipt with the new unsigned Events, without waiting for anything.

WorkItemWorkflow children hold each item's durable timers and report the ones that fire
through the ``timer_fired`` signal. The Mission starts and signals them beside the handlers:
each child has at most one signal in flight and always receives its item's newest state, so
under load one signal may carry several transitions. Search attributes and current details are
refreshed after each workflow task's Commands, and upserted only when they change.

The Registry evidence and Session Epochs come from the Organization's registry workflow
(``registry_changed`` signal), never from a client. Continue-as-new carries the compact
snapshot, compressed; it happens in the run loop once every handler has finished, every child
has its item's newest state and the children that ended have reported it. While it is due, new
Commands get ``BACKPRESSURE``.

Measured with ``benchmarks/group_commands.py``: see ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import zlib
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, WorkflowAlreadyStartedError

from mwp.activities.evidence import SIGN_EVIDENCE, EvidenceSigningRequest
from mwp.contracts.command_size import check_command_size
from mwp.contracts.errors import from_temporal_failure, to_application_error
from mwp.contracts.messages import (
    CHILD_SETTLED,
    CHILD_USAGE,
    MISSION_APPROVED,
    PARENT_CLOSED,
    REGISTRY_NOTICE,
    REGISTRY_SUBSCRIBE,
    SEAL_MESSAGE,
    SERVICE_KEY,
    WORK_ITEM_TRANSITION,
    SealRequest,
    group_authority,
    registry_subscribers,
)
from mwp.contracts.metrics import CommandMetrics
from mwp.contracts.mission import (
    ARCHIVE_GROUP,
    CHARGE_PARENT,
    CLOSED_RETENTION_SECONDS,
    DETAILS_ROWS,
    MIRROR_BATCH_BYTES,
    MIRROR_BATCH_LIMIT,
    MIRROR_EVENTS,
    MIRROR_OUTBOX_LIMIT,
    MISSION_FAILED,
    MISSION_TASK_TIMEOUT,
    MISSION_WORKFLOW_TYPE,
    QUERY_EPOCHS,
    QUERY_EVENTS_THIS_RUN,
    QUERY_MIRRORED_THROUGH,
    QUERY_MISSION,
    QUERY_REFUSED_MESSAGES,
    QUERY_RUN_NUMBER,
    QUERY_SEQUENCE,
    QUERY_WORK_ITEM,
    SIGNAL_CHILD_SETTLED,
    SIGNAL_PARENT_CLOSED,
    SIGNAL_TIMER_FIRED,
    SNAPSHOT_CAPACITY,
    SUMMARY_CHARS,
    UPDATE_CHILD_USAGE,
    UPDATE_COMMAND,
    ArchiveRequest,
    MirrorBatch,
    MissionInput,
    ParentCharge,
    TimerReport,
    mission_workflow_id,
)
from mwp.contracts.names import (
    AUTHORITY_TASK_QUEUE,
    GROUP_ID,
    MISSION_ID,
    MISSION_STATE,
    OWNER,
    WORK_ITEM_STATE,
)
from mwp.contracts.organization import (
    SIGNAL_MISSION_APPROVED,
    SIGNAL_REGISTRY_CHANGED,
    SIGNAL_SUBSCRIBE,
    organization_workflow_id,
)
from mwp.contracts.work_item import SIGNAL_TRANSITION, WorkItemInput, work_item_workflow_id
from mwp.core.errors import ErrorCode, MwpError
from mwp.core.group import GroupAuthority
from mwp.core.group.api import (
    RULES_0_1_0,
    RULES_ARCHIVE,
    RULES_CHILD_USAGE,
    RULES_CONTEXT,
    RULES_DOOR,
    RULES_LEDGER,
    RULES_OFFLINE_RENEWALS,
    RULES_OVERSIGHT,
    AuthorityContext,
    ChildSettled,
    ChildUsage,
    Envelope,
    Outcome,
    TimerFired,
)
from mwp.core.group.approval import embedded_approval
from mwp.core.group.archive import GROUP_ARCHIVE_KIND, completed_snapshot
from mwp.core.group.artifact import embedded_manifest
from mwp.core.group.context_package import embedded_context_package
from mwp.core.group.cooperation_limits import CooperationLimits
from mwp.core.group.knowledge import (
    REUSE_APPROVAL_PROFILE,
    check_approval_shape,
    embedded_import_documents,
)
from mwp.core.kinds import FINAL_WORK_STATES, TERMINAL_MISSION_STATES
from mwp.core.organization.service import RegistrySubscription
from mwp.core.trust.evidence import evidence_unavailable
from mwp.core.trust.registry import Principal
from mwp.core.trust.service_message import (
    MessageRefusedError,
    RefusalRecord,
    TrustedKey,
    open_sealed,
)
from mwp.core.trust.signed_document import PROFILES, verify, verify_value
from mwp.core.wire.jcs import canonicalize, sha256_ref
from mwp.core.wire.strict_json import encode_wire_text
from mwp.core.wire.values import format_utc
from mwp.workflows import patches
from mwp.workflows.key_work import key_work
from mwp.workflows.work_item import WorkItemWorkflow

# How a run hands its snapshot to the next: compressed JSON. Temporal refuses a payload over
# 2 MiB; an unsettled WorkItem takes about 4 KB of JSON, a settled one a short record (its full
# view is its WorkItemWorkflow's result), and the receipts up to about 1 MB.
PACKED_SNAPSHOT = "zlib+base64:json"
# Tries at archiving a Group at the end of its retention window before it completes unarchived.
ARCHIVE_ATTEMPTS = 3


def pack_snapshot(snapshot: dict[str, Any]) -> dict[str, Any]:
    text = json.dumps(snapshot, separators=(",", ":"), ensure_ascii=False)
    data = base64.b64encode(zlib.compress(text.encode("utf-8"), 6)).decode("ascii")
    return {"encoding": PACKED_SNAPSHOT, "data": data}


def unpack_snapshot(value: dict[str, Any]) -> dict[str, Any]:
    """The snapshot ``pack_snapshot`` packed; a plain snapshot passes unchanged."""
    if value.get("encoding") != PACKED_SNAPSHOT:
        return value
    snapshot: dict[str, Any] = json.loads(zlib.decompress(base64.b64decode(value["data"])))
    return snapshot


@workflow.defn(name=MISSION_WORKFLOW_TYPE)
class MissionWorkflow:
    @workflow.init
    def __init__(self, input: MissionInput) -> None:
        self._input = input
        self._authority = (
            GroupAuthority.restore(unpack_snapshot(input.snapshot))
            if input.snapshot
            else GroupAuthority()
        )
        self._principal = Principal(input.authority["type"], input.authority["id"])
        # Organization policy for the runaway controls. Only a new input field sets it, and
        # it issues no command, so a recorded history (which has none) replays unpatched.
        self._cooperation_limits = (
            CooperationLimits()
            if input.cooperation_limits is None
            else CooperationLimits.from_json(input.cooperation_limits)
        )
        # The size this run's state had when it was carried over (0 on a Group's first run).
        self._snapshot_bytes = len((input.snapshot or {}).get("data", ""))
        self._registry = RegistrySubscription(input.organization_id)
        if input.registry_notice is not None:
            self._registry.offer(input.registry_notice)
        self._updates_this_run = 0
        self._events_this_run: list[dict[str, Any]] = []
        # Items of a restored snapshot already have their children (ParentClosePolicy.ABANDON
        # keeps them running across continue-as-new).
        self._children: set[str] = set(self._authority.work_item_ids())
        self._pending_timers: list[TimerReport] = []
        # A newer Registry notice arrived: check for replaced Sessions (spec 11.3).
        self._sessions_changed = False
        # Children being sent their item's state, and those whose item changed again meanwhile.
        self._syncing: set[str] = set()
        self._resync: set[str] = set()
        self._sync_tasks: set[asyncio.Task[None]] = set()
        self._sync_failure: BaseException | None = None
        # What each child was last sent in this run, to skip a signal that would change
        # nothing it holds (an Artifact published, for one, moves only the item's revision).
        self._sent: dict[str, tuple[Any, ...]] = {}
        # Children this run started: their completion is reported to this run.
        self._started_this_run: dict[str, workflow.ChildWorkflowHandle[Any, Any]] = {}
        self._visibility_stale = False
        self._published: dict[str, str] | None = None  # the search attributes last upserted
        # The Mission's (state, revision) for the current details. Only ``mission.*`` Events
        # change them, so the O(WorkItems) Mission view is rebuilt only after one of those.
        self._headline: tuple[Any, Any] | None = None
        self._rolling_over = False  # continue-as-new is due: new Commands get BACKPRESSURE
        self._registry_unreachable = False  # the subscription failed: no evidence will come
        # The validator's verification (wire, Registry revision, Envelope) for its handler.
        self._admitted: tuple[str, int, Envelope] | None = None
        # Child Missions (spec 14): outcomes reported by children, closures by the parent,
        # and the starts and reports this workflow sends, awaited before continue-as-new.
        self._child_outcomes: list[ChildSettled] = []
        self._parent_closures: list[str] = []
        self._outbound: set[asyncio.Task[None]] = set()
        # Accepted Events the mirror has not yet confirmed in the Group Event log, in order.
        carried = unpack_snapshot(input.outbox) if input.outbox else {"events": []}
        self._outbox: list[dict[str, Any]] = list(carried["events"])
        # Messages from other workflows are sealed and opened, and Commands meet the door
        # rules, in every run that starts after the upgrade; a run replaying older history
        # keeps taking them as it did (and takes sealed ones too, unopened, as before).
        self._sealed = workflow.patched(patches.MISSION_SEALED_MESSAGES.id)
        # A closed Group takes its archive Command (its snapshot verified here) and the
        # workflow completes once it is recorded, in every run that starts after the upgrade.
        # Their Events carry each Command's signing hash as commandHash (authority.py).
        self._archives = self._sealed and workflow.patched(patches.MISSION_ARCHIVES.id)
        # A new Worker's offer and a replacement Coordinator name a Context Package the Group
        # published (an offer may carry it, verified here), in every run started after it.
        self._contexts = self._archives and workflow.patched(patches.MISSION_CONTEXT_PACKAGES.id)
        # Usage records, review records and signed Approvals, in every run started after them.
        self._ledger = self._contexts and workflow.patched(patches.MISSION_LEDGER.id)
        # Runaway controls, override grants, compact archive Commands, and archiving a closed
        # Group at the end of its retention window, in every run started after them.
        self._oversight = self._ledger and workflow.patched(patches.MISSION_OVERSIGHT.id)
        # A child Mission's usage is charged to its parent Group before the child records it,
        # in every run started after it. Meanwhile the Group changes in no other way: its
        # Commands and its parent's charges are decided one at a time (``_deciding``), and
        # the run loop records nothing while one waits for the parent (``_has_inbox``).
        self._child_usage = self._oversight and workflow.patched(patches.MISSION_CHILD_USAGE.id)
        # The authority's key work as activities (patches.MISSION_AUTHORITY_ACTIVITIES says
        # why), in every run started after it.
        self._key_activities = self._child_usage and workflow.patched(
            patches.MISSION_AUTHORITY_ACTIVITIES.id
        )
        # A reconciled offline checkpoint may state an earlier expiry of its lease, in every
        # run started after it.
        self._offline_renewals = self._key_activities and workflow.patched(
            patches.MISSION_OFFLINE_RENEWALS.id
        )
        self._deciding = asyncio.Lock()
        self._rules = (
            RULES_OFFLINE_RENEWALS
            if self._offline_renewals
            else RULES_CHILD_USAGE
            if self._child_usage
            else RULES_OVERSIGHT
            if self._oversight
            else RULES_LEDGER
            if self._ledger
            else RULES_CONTEXT
            if self._contexts
            else RULES_ARCHIVE
            if self._archives
            else RULES_DOOR
            if self._sealed
            else RULES_0_1_0
        )
        self._trusted: TrustedKey | None = None  # the key that seals messages, once fetched
        self._trusted_binding: dict[str, Any] | None = None  # the same, as its binding JSON
        self._inbound: list[tuple[str, Any]] = []  # (message type, sealed document) to open
        self._refusals = RefusalRecord.from_json(input.refusals)
        sealing = input.sealing or {
            # A first run has no children yet; a run after one from before sealing may.
            "legacyChildren": input.run_number > 1 or input.snapshot is not None,
            "children": [],
        }
        self._legacy_children_possible: bool = sealing["legacyChildren"]
        self._sealed_children: set[str] = set(sealing["children"])
        self._metrics = CommandMetrics()  # not replayed, no Command: needs no patch
        # A closed Mission's workflow completes, after what must still run and a retention
        # window for retries, in every run that starts after the upgrade.
        self._completes = workflow.patched(patches.MISSION_COMPLETES.id)
        self._closed_at: datetime | None = None  # when this run first saw the Mission closed
        self._ending = False  # the retention window is over: new Commands are refused
        self._archive_attempts = 0  # archiving the Group at the end of its retention window
        self._cancel_asked: set[str] = set()  # cancelled items whose child was asked to cancel
        # The most recently changed WorkItems (ID: goal), for the table in the details, and
        # the goals this run has read (a goal never changes; reading one builds a whole view).
        self._recent: dict[str, str] = {}
        self._goals: dict[str, str] = {}
        if input.founding is not None and self._authority.mission_id == "":
            founded = self._authority.found_child(input.founding, self._context())
            if founded is not None:
                self._after_accept(founded)

    # --- run loop --------------------------------------------------------------------------

    @workflow.run
    async def run(self, input: MissionInput) -> dict[str, Any]:
        registry = organization_workflow_id(input.organization_id)
        subscription: Any = workflow.info().workflow_id
        if self._sealed:
            binding = await self._key_work(
                SERVICE_KEY,
                group_authority(input.organization_id).id,
                "the key that seals this Organization's messages",
            )
            self._trusted, self._trusted_binding = TrustedKey.from_binding(binding), binding
            subscription = await self._seal(REGISTRY_SUBSCRIBE, registry, {})
        if self._sealed:
            try:
                await workflow.get_external_workflow_handle(registry).signal(
                    SIGNAL_SUBSCRIBE, subscription
                )
            except Exception:
                workflow.logger.warning("the Organization's registry %s is unreachable", registry)
                self._registry_unreachable = True
        else:
            await workflow.get_external_workflow_handle(registry).signal(
                SIGNAL_SUBSCRIBE, subscription
            )
        publisher = asyncio.create_task(self._publish_visibility())
        self._mirror_task = asyncio.create_task(self._mirror())
        while True:
            await workflow.wait_condition(
                lambda: (
                    self._has_inbox()
                    or self._should_continue_as_new()
                    or self._failed(publisher)
                    or self._closed()
                )
            )
            self._raise_failure(publisher)
            self._drain_inbox()
            if self._closed() and not self._should_continue_as_new():
                if await self._wind_down(publisher):
                    return self._completion()
                continue
            if self._should_continue_as_new():
                self._rolling_over = True
                await workflow.wait_condition(
                    lambda: (
                        self._has_inbox()
                        or self._failed(publisher)
                        or (workflow.all_handlers_finished() and self._settled())
                    )
                )
                if self._has_inbox() or self._failed(publisher):
                    # A timer report arrived meanwhile: the snapshot does not carry it and its
                    # child reports it only once, so record it first (or fail the task).
                    continue
                # The unconfirmed Events travel in the input; a mirror call still running
                # writes the same bytes again or nothing (it is idempotent).
                workflow.continue_as_new(self._next_input())

    def _has_inbox(self) -> bool:
        if self._deciding.locked():
            return False  # a decision waits for the parent Group: it decides on this state
        return bool(
            self._pending_timers
            or self._child_outcomes
            or self._parent_closures
            or self._sessions_changed
            or (self._inbound and self._trusted is not None)
        )

    def _drain_inbox(self) -> None:
        """Record what timers, child Missions and the parent reported, in arrival order per
        source."""
        if self._trusted is not None:
            while self._inbound:
                self._open_inbound(*self._inbound.pop(0))
        while self._pending_timers:
            self._apply_timer(self._pending_timers.pop(0))
        context = self._context
        while self._child_outcomes:
            outcome = self._authority.settle_child(self._child_outcomes.pop(0), context())
            if outcome is not None:
                self._after_accept(outcome)
        while self._parent_closures:
            outcome = self._authority.close_for_parent(self._parent_closures.pop(0), context())
            if outcome is not None:
                self._after_accept(outcome)
        self._revoke_replaced_sessions()

    def _revoke_replaced_sessions(self) -> None:
        if self._sessions_changed:
            self._sessions_changed = False
            outcome = self._authority.revoke_replaced_sessions(self._context())
            if outcome is not None:
                self._after_accept(outcome)

    def _closed(self) -> bool:
        """The Mission is approved, cancelled or failed (and this run completes its workflow)."""
        return (
            self._completes
            and self._authority.search_attributes()[MISSION_STATE.name] in TERMINAL_MISSION_STATES
        )

    async def _wind_down(self, publisher: asyncio.Task[None]) -> bool:
        """Keep answering retries for the retention window, then refuse new Commands and wait
        for what must still run: the Group Event log, the children, the handlers. False if
        something arrived for the run loop first (it is recorded, then this is called again)."""
        if self._closed_at is None:
            self._closed_at = workflow.now()
            self._tell_failed_work_items()
        retention = timedelta(
            seconds=self._input.closed_retention_seconds or CLOSED_RETENTION_SECONDS
        )
        remaining = self._closed_at + retention - workflow.now()
        if not self._ending and remaining > timedelta(0) and not self._archived():
            try:
                await workflow.wait_condition(
                    lambda: (
                        self._has_inbox()
                        or self._failed(publisher)
                        or self._should_continue_as_new()
                        or self._archived()
                    ),
                    timeout=remaining,
                )
                return False
            except TimeoutError:
                pass
        self._ending = True
        if self._oversight and not self._archived() and self._archive_attempts < ARCHIVE_ATTEMPTS:
            # Organization policy: a closed Group is archived by the end of its retention
            # window. Once the log holds every Event, the archival service signs the final
            # snapshot; the Group decides its archive Command like any other.
            await workflow.wait_condition(
                lambda: (
                    self._has_inbox()
                    or self._failed(publisher)
                    or (workflow.all_handlers_finished() and self._settled() and not self._outbox)
                )
            )
            if self._has_inbox() or self._failed(publisher):
                return False
            await self._archive_group()
            return False  # its Events are recorded (or it gave up): wind down again
        await workflow.wait_condition(
            lambda: (
                self._has_inbox()
                or self._failed(publisher)
                or (workflow.all_handlers_finished() and self._settled() and not self._outbox)
            )
        )
        return not (self._has_inbox() or self._failed(publisher))

    async def _archive_group(self) -> None:
        """Have the archival service snapshot the Group and sign its archive Command, then
        decide it. An Event recorded meanwhile (a timer's, a child's) outdates the snapshot:
        the next attempt covers it. A Group that cannot be archived completes unarchived."""
        self._archive_attempts += 1
        sequence = self._authority.sequence
        try:
            evidence = self._registry.evidence
        except ValueError:
            evidence = None
        if evidence is None:
            workflow.logger.error(
                "no Registry evidence: Group %s is not archived", self._authority.group_id
            )
            self._archive_attempts = ARCHIVE_ATTEMPTS
            return
        try:
            wire = await workflow.execute_activity(
                ARCHIVE_GROUP,
                ArchiveRequest(
                    self._authority.group_id, self._principal.id, sequence, evidence.to_json()
                ),
                result_type=str,
                task_queue=self._input.mirror_task_queue or AUTHORITY_TASK_QUEUE,
                start_to_close_timeout=timedelta(minutes=10),
                heartbeat_timeout=timedelta(minutes=1),
                retry_policy=RetryPolicy(
                    initial_interval=timedelta(seconds=1),
                    maximum_interval=timedelta(seconds=30),
                    maximum_attempts=20,
                ),
                summary=f"archive the Group through sequence {sequence}",
            )
        except ActivityError as exc:
            workflow.logger.error("the Group cannot be archived: %s", exc.cause or exc)
            self._archive_attempts = ARCHIVE_ATTEMPTS
            return
        if self._authority.sequence != sequence:
            return  # outdated while it was made
        try:
            envelope, context = self._admit(wire)
            outcome = self._authority.submit(envelope, context)
        except (ApplicationError, MwpError) as exc:
            workflow.logger.error("the archive Command was refused: %s", exc)
            return
        self._after_accept(outcome)

    def _archived(self) -> bool:
        """``group.archived`` is recorded: the Group takes nothing more, so the retention
        window ends early (only in runs that archive)."""
        return self._archives and self._authority.archived

    def _tell_failed_work_items(self) -> None:
        """A failed item can be offered again only while its Mission is active: now its child
        gets its final view and ends Failed."""
        for work_item_id in self._authority.work_item_ids():
            state = self._authority.work_item_search_attributes(work_item_id)[WORK_ITEM_STATE.name]
            if state == "failed":
                self._sync(work_item_id)

    def _completion(self) -> dict[str, Any]:
        """The workflow's result: Completed for an approved or cancelled Mission, Failed for a
        failed one (the Temporal UI shows which; the queries keep answering either way)."""
        attributes = self._authority.search_attributes()
        result = {
            "missionId": attributes[MISSION_ID.name],
            "groupId": attributes[GROUP_ID.name],
            "state": attributes[MISSION_STATE.name],
            "sequence": self._authority.sequence,
            "workItems": self._authority.work_item_count,
        }
        if result["state"] == "failed":
            reason = self._authority.mission_view().get("closingReason") or "no reason given"
            raise ApplicationError(
                f"Mission {result['missionId']} failed: {reason}"[:1000],
                {**result, "reason": reason},
                type=MISSION_FAILED,
                non_retryable=True,
            )
        return result

    def _settled(self) -> bool:
        """No child signal, start or report in flight, no child completion due, visibility
        current."""
        return not (self._syncing or self._outbound or self._visibility_stale)

    def _failed(self, publisher: asyncio.Task[None]) -> bool:
        return self._sync_failure is not None or publisher.done()

    def _raise_failure(self, publisher: asyncio.Task[None]) -> None:
        """A failure beside the handlers fails the workflow task, like one inside them."""
        if self._sync_failure is not None:
            raise RuntimeError("syncing a WorkItem child failed") from self._sync_failure
        if publisher.done():
            publisher.result()
            raise RuntimeError("the visibility publisher stopped")

    def _should_continue_as_new(self) -> bool:
        return (
            self._updates_this_run >= self._input.updates_per_run
            or workflow.info().is_continue_as_new_suggested()
        )

    def _next_input(self) -> MissionInput:
        notice = self._registry.notice
        return MissionInput(
            organization_id=self._input.organization_id,
            authority=self._input.authority,
            snapshot=pack_snapshot(self._authority.snapshot()),
            registry_notice=notice.to_json() if notice is not None else None,
            updates_per_run=self._input.updates_per_run,
            run_number=self._input.run_number + 1,
            outbox=pack_snapshot({"events": self._outbox}) if self._outbox else None,
            mirror_task_queue=self._input.mirror_task_queue,
            snapshot_capacity=self._input.snapshot_capacity,
            sealing=(
                {
                    "legacyChildren": self._legacy_children_possible,
                    "children": sorted(self._sealed_children),
                }
                if self._sealed
                else None
            ),
            # A run that does not seal cannot vouch for its parent sealing either.
            legacy_parent=self._input.legacy_parent or not self._sealed,
            refusals=self._refusals.to_json() if self._refusals.total else None,
            closed_retention_seconds=self._input.closed_retention_seconds,
            cooperation_limits=self._input.cooperation_limits,
        )

    # --- Commands --------------------------------------------------------------------------

    @workflow.update(name=UPDATE_COMMAND)
    async def command(self, wire: str) -> dict[str, Any]:
        if self._registry.notice is None:
            await workflow.wait_condition(
                lambda: self._registry.notice is not None or self._registry_unreachable
            )
        admitted, self._admitted = self._admitted, None
        if not self._child_usage:
            return await self._decide_command(wire, admitted)
        async with self._deciding:
            return await self._decide_command(wire, admitted)

    async def _decide_command(
        self, wire: str, admitted: tuple[str, int, Envelope] | None
    ) -> dict[str, Any]:
        if admitted is not None and admitted[:2] == (wire, self._registry.revision):
            envelope, context = admitted[2], self._context()
        else:  # no validator ran (replay), or it ran before the Registry evidence arrived
            envelope, context = self._admit(wire)
        self._revoke_replaced_sessions()  # before anything is decided under a new Session
        if self._ledger and envelope.command.get("kind") == "mission.terminate":
            context = await self._sign_failure_evidence(envelope, context)
        if self._child_usage:
            context = await self._charge_parent_first(envelope, context)
        try:
            outcome = self._authority.submit(envelope, context)
        except MwpError as exc:
            raise self._refused(exc, context.now) from None
        self._metrics.accepted(duplicate=outcome.duplicate)
        if not outcome.duplicate:
            self._updates_this_run += 1
            self._after_accept(outcome)
            await self._report_root_approval(outcome)
        return {
            "receipt": outcome.receipt.to_json(),
            "events": list(outcome.events),
            "duplicate": outcome.duplicate,
        }

    async def _charge_parent_first(
        self, envelope: Envelope, context: AuthorityContext
    ) -> AuthorityContext:
        """MISSION_CHILD_USAGE: the usage this Command records in a child Mission, charged to
        the parent Group first (child_usage.py); its refusal refuses the Command. The Command
        is then decided under the same ``context``, on the same state, citing the charge."""
        try:
            usage = self._authority.upward_charge(envelope, context)
        except MwpError as exc:
            raise self._refused(exc, context.now) from None
        if usage is None:
            return context
        answer = await self._ask_parent(usage, context, envelope.command.get("actionId"))
        return replace(context, parent_charge=answer)

    async def _ask_parent(
        self, usage: ChildUsage, context: AuthorityContext, action_id: Any = None
    ) -> dict[str, Any]:
        """The parent Group's answer to ``usage`` (``ChildCharged.answer``), or the refusal
        of the decision waiting for it."""
        parent = self._authority.mission_parent()
        assert parent is not None
        target = mission_workflow_id(parent["missionId"])
        sealed = await self._seal(CHILD_USAGE, target, usage.to_json())
        try:
            answer: dict[str, Any] = await workflow.execute_activity(
                CHARGE_PARENT,
                ParentCharge(target, sealed),
                result_type=dict,
                start_to_close_timeout=timedelta(seconds=30),
                schedule_to_close_timeout=timedelta(minutes=2),
                retry_policy=RetryPolicy(
                    initial_interval=timedelta(milliseconds=100),
                    maximum_interval=timedelta(seconds=2),
                ),
                summary=f"charge the parent Group for {usage.child_work_item_id}",
            )
        except ActivityError as exc:
            remote = from_temporal_failure(exc)
            error = MwpError(
                remote.code if remote is not None else ErrorCode.INTERNAL_ERROR,
                remote.message
                if remote is not None
                else "the parent Group could not be asked to charge this usage",
                retryable=remote.retryable if remote is not None else True,
                action_id=action_id if isinstance(action_id, str) else None,
                group_id=self._authority.group_id,
                # Which Group refused: the level the details name is the parent's.
                details={**(remote.details or {}), "parentMissionId": parent["missionId"]}
                if remote is not None
                else {"parentMissionId": parent["missionId"]},
            )
            raise self._refused(error, context.now) from None
        return answer

    async def _sign_failure_evidence(
        self, envelope: Envelope, context: AuthorityContext
    ) -> AuthorityContext:
        """MISSION_LEDGER: the failure Evidence a ``mission.terminate`` writes, signed by the
        Group Authority (``sign_evidence`` on the authority worker, recorded in history) and
        handed to the decision in ``context``. A Command the rules refuse signs nothing (the
        validator ran ``check`` already unless it could not); the validator never signs."""
        while True:
            try:
                self._authority.check(envelope, context)
            except MwpError:
                return context  # submit refuses it as before
            records = self._authority.termination_evidence(envelope, context)
            if not records:
                return context
            sequence = self._authority.sequence
            signed = await self._key_work(
                SIGN_EVIDENCE, EvidenceSigningRequest(self._principal.id, records)
            )
            self._revoke_replaced_sessions()
            if self._authority.sequence == sequence:
                return replace(context, signed_evidence=signed)
            # Events were recorded while signing (their IDs and times moved on): sign again
            # what the decision would write now, at its new time.
            context = self._context()

    @command.validator
    def _validate_command(self, wire: str) -> None:
        try:  # first: a Command too large is refused before it is read (command_size.py)
            check_command_size(wire)
        except MwpError as exc:
            raise self._refused(exc) from None
        if self._ending:
            # Past the retention window no retry can still be fresh; the workflow is ending.
            raise self._refused(
                MwpError(
                    ErrorCode.INVALID_STATE_TRANSITION,
                    "the Mission is closed and its workflow is completing",
                    retryable=False,
                )
            )
        if self._rolling_over or self._updates_this_run >= self._input.updates_per_run:
            # Leave room for continue-as-new; the sender retries shortly. A rollover takes a
            # few hundred ms: a short retry interval keeps senders from idling past its end
            # (200 ms cost 8% of the rate after 10,000 Events, benchmarks/RESULTS.md).
            raise self._refused(
                MwpError(ErrorCode.BACKPRESSURE, "Group is rolling over", retry_after_ms=50)
            )
        if len(self._outbox) >= MIRROR_OUTBOX_LIMIT:
            # The Group Event log is far behind (its store is down?): accept nothing more
            # until the mirror catches up, so the carried outbox stays bounded.
            raise self._refused(
                MwpError(
                    ErrorCode.BACKPRESSURE, "the Group Event log is behind", retry_after_ms=1000
                )
            )
        if self._registry.notice is None and not self._registry_unreachable:
            return  # the handler waits for the Registry evidence, then decides
        envelope, context = self._admit(wire)
        try:
            self._authority.check(envelope, context)
        except MwpError as exc:
            raise self._refused(exc, context.now) from None
        # The handler runs next, in this workflow task, and would verify the same bytes again.
        self._admitted = (wire, self._registry.revision, envelope)

    def _admit(self, wire: str) -> tuple[Envelope, AuthorityContext]:
        now = format_utc(workflow.now())
        try:
            evidence = self._registry.evidence
        except ValueError:
            evidence = None
        if evidence is None:  # fail closed: no coherent Registry revision to verify against
            if self._sealed:
                raise self._refused(evidence_unavailable(), now)
            raise self._refused(
                MwpError(ErrorCode.INTERNAL_ERROR, "Registry evidence unavailable"), now
            )
        try:
            # A lone surrogate in the text is PROTOCOL_VIOLATION, like bytes that are not UTF-8.
            verified = verify(encode_wire_text(wire), "command", evidence)
            if verified.document.get("kind") == "artifact.publish":
                # The manifest is signed by its producer: verified here, where the Registry
                # evidence is, before the core decides on its content.
                verify_value(
                    embedded_manifest(verified.document["payload"]), PROFILES["artifact"], evidence
                )
            elif self._archives and verified.document.get("kind") == GROUP_ARCHIVE_KIND:
                # The final snapshot is signed by its creator (the core checks who that may
                # be), verified here against the same Registry evidence.
                snapshot = verified.document["payload"].get("snapshot")
                if self._oversight:  # a compact snapshot is verified with its Event IDs
                    snapshot = completed_snapshot(snapshot, self._authority.sequence)
                verify_value(snapshot, PROFILES["group-snapshot"], evidence)
            if self._contexts:
                # A carried Context Package is signed by its generator: verified here too.
                package = embedded_context_package(
                    verified.document.get("kind", ""), verified.document["payload"]
                )
                if package is not None:
                    verify_value(package, PROFILES["context-package"], evidence)
            if self._ledger:
                # The Approval mission.approve carries is signed by its approver: verified here.
                approval = embedded_approval(
                    verified.document.get("kind", ""), verified.document["payload"]
                )
                if approval is not None:
                    verify_value(approval, PROFILES["approval"], evidence)
                # An import carries the source's manifest and Organization policy's approval
                # for reuse: both verified here against the Organization's Registry evidence.
                imported = embedded_import_documents(
                    verified.document.get("kind", ""), verified.document["payload"]
                )
                if imported is not None:
                    verify_value(imported[0], PROFILES["artifact"], evidence)
                    verify_value(
                        imported[1],
                        REUSE_APPROVAL_PROFILE,
                        evidence,
                        schema_check=check_approval_shape,
                    )
        except MwpError as exc:
            raise self._refused(exc, now) from None
        envelope = Envelope(
            command=verified.document,
            signing_hash=verified.signing_hash,
            command_hash=sha256_ref(canonicalize(verified.document)),
            verified=verified,  # First Admission reads the key and its validity from it
        )
        return envelope, self._context()

    def _refused(self, error: MwpError, now: str | None = None) -> ApplicationError:
        """The Update's failure for a refused Command, counted by its code."""
        self._metrics.refused(error.code.value)
        return to_application_error(error, now)

    def _context(self) -> AuthorityContext:
        # The notice's maps are handed over as they are (the core only reads them): copying
        # them cost O(agents + approved Missions) on every Command.
        now = format_utc(workflow.now())
        notice = self._registry.notice
        full = self._snapshot_bytes >= (self._input.snapshot_capacity or SNAPSHOT_CAPACITY)
        limits = self._cooperation_limits
        if notice is None:
            return AuthorityContext(
                now, self._principal, at_capacity=full, rules=self._rules, cooperation_limits=limits
            )
        return AuthorityContext(
            now,
            self._principal,
            notice.session_epochs,
            notice.approved_missions,
            full,
            rules=self._rules,
            cooperation_limits=limits,
        )

    def _after_accept(self, outcome: Outcome) -> None:
        self._events_this_run.extend(outcome.events)
        self._outbox.extend(outcome.events)
        self._metrics.mirror_lag(self._authority.group_id, len(self._outbox))
        self._visibility_stale = True
        if any(e["kind"].startswith("mission.") for e in outcome.events):
            self._headline = None
        self._link_missions(outcome)
        touched = {e["workItemId"] for e in outcome.events if "workItemId" in e}
        if self._completes:
            self._note_recent(outcome.events)
        for work_item_id in sorted(touched):
            self._sync(work_item_id)

    def _sync(self, work_item_id: str) -> None:
        if work_item_id in self._syncing:
            self._resync.add(work_item_id)
        else:
            self._syncing.add(work_item_id)
            task = asyncio.create_task(self._sync_work_item(work_item_id))
            self._sync_tasks.add(task)
            # Dropped when done; never via current_task() in a finally, which fails when an
            # evicted or replayed run's coroutine is closed outside the event loop.
            task.add_done_callback(self._sync_tasks.discard)

    # --- WorkItem children and their timers ------------------------------------------------

    async def _sync_work_item(self, work_item_id: str) -> None:
        """Bring the item's child up to its newest state (starting it first), then, if the
        item ended and this run started the child, wait for the child's completion."""
        try:
            while True:
                await self._notify_work_item(work_item_id)
                if work_item_id not in self._resync:
                    break
                self._resync.discard(work_item_id)
            child = self._started_this_run.get(work_item_id)
            state = self._authority.work_item_search_attributes(work_item_id)[WORK_ITEM_STATE.name]
            if self._completes and state == "cancelled" and work_item_id not in self._cancel_asked:
                # Temporal shows a workflow Cancelled only if asked: the child waits for this.
                self._cancel_asked.add(work_item_id)
                child_id = work_item_workflow_id(self._authority.mission_id, work_item_id)
                try:
                    await workflow.get_external_workflow_handle(child_id).cancel()
                except Exception:
                    workflow.logger.info("WorkItem %s no longer running", work_item_id)
            if child is not None and self._child_ends(state):
                # Its completion is reported to this run: let it arrive before continue-as-new,
                # which the server refuses while an Event is arriving (the retried workflow
                # task then replays the whole run).
                del self._started_this_run[work_item_id]
                try:
                    await child
                except Exception:
                    if not self._completes:
                        workflow.logger.warning("WorkItem %s child ended abnormally", work_item_id)
                    # Failed or Cancelled, as its item ended (work_item.py).
        except Exception as exc:  # raised by the run loop (eviction and cancellation pass)
            self._sync_failure = exc
        finally:
            self._syncing.discard(work_item_id)

    def _child_ends(self, state: str) -> bool:
        """Whether an item in ``state`` ends its child now (a failed one's, once closed)."""
        return state in FINAL_WORK_STATES or (
            self._completes and state == "failed" and self._closed()
        )

    async def _notify_work_item(self, work_item_id: str) -> None:
        mission_id = self._authority.mission_id
        child_id = work_item_workflow_id(mission_id, work_item_id)
        view = self._authority.work_item_summary(work_item_id)
        timers = [t.__dict__ for t in self._authority.work_item_timers(work_item_id)]
        attributes = self._authority.work_item_search_attributes(work_item_id)
        # A settled item's full view leaves this workflow's state: its child keeps it.
        final = None
        if self._child_ends(view["state"]):
            with contextlib.suppress(KeyError):  # held unless it settled in an earlier run
                final = self._authority.work_item_view(work_item_id)
        held = (
            view["state"],
            view["ownershipEpoch"],
            [sorted(t.items()) for t in timers],
            sorted(attributes.items()),
        )
        if final is None and self._sent.get(work_item_id) == held:
            return
        self._sent[work_item_id] = held
        if final is not None:
            self._sent.pop(work_item_id, None)
        if work_item_id not in self._children:
            child_input = WorkItemInput(
                mission_workflow_id=workflow.info().workflow_id,
                mission_id=mission_id,
                work_item_id=work_item_id,
                view=view,
                timers=timers,
                search_attributes=attributes,
                final=final,
                trusted_key=self._trusted_binding if self._sealed else None,
                cancel_follows=self._completes,
            )
            try:
                child = await workflow.start_child_workflow(
                    WorkItemWorkflow.run,
                    child_input,
                    id=child_id,
                    task_queue=AUTHORITY_TASK_QUEUE,
                    parent_close_policy=workflow.ParentClosePolicy.ABANDON,
                    static_summary=(
                        _summary(f"WorkItem: {self._goal(work_item_id)}")
                        if self._completes
                        else f"WorkItem {work_item_id}"
                    ),
                )
            except WorkflowAlreadyStartedError:
                self._children.add(work_item_id)  # it runs already: send it the state instead
            else:
                self._children.add(work_item_id)
                self._started_this_run[work_item_id] = child
                return
        handle = workflow.get_external_workflow_handle(child_id)
        update: dict[str, Any] = {"view": view, "timers": timers, "searchAttributes": attributes}
        if final:
            update["final"] = final
        if self._completes:
            update["cancelFollows"] = True
        message = (
            await self._seal(WORK_ITEM_TRANSITION, child_id, update) if self._sealed else update
        )
        try:
            await handle.signal(SIGNAL_TRANSITION, message)
        except Exception:
            # A finished child (terminal item) has nothing left to time; the Group's state
            # is authoritative either way.
            workflow.logger.info("WorkItem %s no longer running", work_item_id)

    @workflow.signal(name=SIGNAL_TIMER_FIRED)
    def timer_fired(self, report: Any) -> None:
        # Taken as JSON, not as a TimerReport: a payload that does not decode is refused and
        # recorded here, where the SDK would only log it.
        try:
            timer = TimerReport(report["work_item_id"], report["kind"], report["token"])
        except (KeyError, TypeError):
            timer = None
        if timer is None or not all(
            isinstance(v, str) for v in (timer.work_item_id, timer.kind, timer.token)
        ):
            if self._sealed:
                self._refuse("timer-fired", "malformed")
            return
        self._pending_timers.append(timer)

    def _apply_timer(self, report: TimerReport) -> None:
        # Needs no seal: the Authority acts only on a timer that is current and due.
        timer = TimerFired(report.work_item_id, report.kind, report.token)  # type: ignore[arg-type]
        outcome = self._authority.fire(timer, self._context())
        if outcome is not None:
            self._after_accept(outcome)

    # --- the Group Event log ----------------------------------------------------------------

    async def _mirror(self) -> None:
        """Hand accepted Events to the mirror activity, in order, batched while one call runs.
        It retries until the store takes them: nothing accepted is lost, the log catches up."""
        while True:
            await workflow.wait_condition(lambda: bool(self._outbox))
            batch = (
                _mirror_batch(self._outbox) if self._sealed else self._outbox[:MIRROR_BATCH_LIMIT]
            )
            await workflow.execute_activity(
                MIRROR_EVENTS,
                MirrorBatch(self._authority.group_id, self._principal.id, batch),
                task_queue=self._input.mirror_task_queue or AUTHORITY_TASK_QUEUE,
                # A batch (at most 500 Events) is written in seconds; a worker that died holding
                # it is replaced after this long (the write is idempotent), not after minutes.
                start_to_close_timeout=timedelta(seconds=20),
                retry_policy=RetryPolicy(
                    initial_interval=timedelta(milliseconds=500),
                    maximum_interval=timedelta(seconds=30),
                ),
                summary=f"mirror sequences {batch[0]['sequence']}..{batch[-1]['sequence']}",
            )
            del self._outbox[: len(batch)]
            self._metrics.mirror_lag(self._authority.group_id, len(self._outbox))

    @workflow.query(name=QUERY_MIRRORED_THROUGH)
    def mirrored_through(self) -> int:
        """The Group Event log holds every Event up to this sequence."""
        return self._authority.sequence - len(self._outbox)

    # --- child Missions (spec 14) ----------------------------------------------------------

    def _link_missions(self, outcome: Outcome) -> None:
        """Start the child Groups this Outcome created, cancel the ones it abandoned, and
        report this child Mission's end to its parent."""
        for event in outcome.events:
            if event["kind"] == "mission.child.created" and "workItemId" in event:
                self._send(self._start_child_mission(event))
        for child_id, event_id in self._authority.abandoned_children(outcome.events):
            self._send(self._signal_mission(child_id, SIGNAL_PARENT_CLOSED, event_id))
        parent = self._authority.mission_parent()
        if parent is not None:
            for event in outcome.events:
                report = _child_report(self._authority.mission_id, event)
                if report is not None:
                    self._send(
                        self._signal_mission(parent["missionId"], SIGNAL_CHILD_SETTLED, report)
                    )

    def _send(self, coroutine: Any) -> None:
        task: asyncio.Task[None] = asyncio.create_task(coroutine)
        self._outbound.add(task)
        task.add_done_callback(self._outbound.discard)

    async def _start_child_mission(self, event: dict[str, Any]) -> None:
        child = event["payload"]["childMission"]
        child_input = MissionInput(
            organization_id=self._input.organization_id,
            authority=self._input.authority,
            registry_notice=None,
            updates_per_run=self._input.updates_per_run,
            founding=event,
            mirror_task_queue=self._input.mirror_task_queue,
            legacy_parent=not self._sealed,
            closed_retention_seconds=self._input.closed_retention_seconds,
            # A child Mission is the same Organization's: the same policy decides there.
            cooperation_limits=self._input.cooperation_limits,
        )
        if self._sealed:
            self._sealed_children.add(child["missionId"])
        try:
            await workflow.start_child_workflow(
                MissionWorkflow.run,
                child_input,
                id=mission_workflow_id(child["missionId"]),
                task_queue=AUTHORITY_TASK_QUEUE,
                parent_close_policy=workflow.ParentClosePolicy.ABANDON,
                static_summary=(
                    _summary(f"child Mission: {child.get('objective') or child['missionId']}")
                    if self._completes
                    else f"child Mission {child['missionId']} of {event['workItemId']}"
                ),
                task_timeout=MISSION_TASK_TIMEOUT if self._sealed else None,
            )
        except WorkflowAlreadyStartedError:
            # Another workflow holds that Mission ID: the WorkItem stays blocked and the
            # Coordinator sees no child; it can cancel or fail the item and replan.
            workflow.logger.warning("child Mission %s already exists", child["missionId"])

    async def _signal_mission(self, mission_id: str, signal: str, arg: Any) -> None:
        target = mission_workflow_id(mission_id)
        handle = workflow.get_external_workflow_handle(target)
        if self._sealed:
            if signal == SIGNAL_PARENT_CLOSED:
                arg = await self._seal(PARENT_CLOSED, target, {"eventId": arg})
            else:
                arg = await self._seal(CHILD_SETTLED, target, arg)
        try:
            await handle.signal(signal, arg)
        except Exception:
            # The other Group is gone for good; this Group's record stands either way.
            workflow.logger.warning("signal %s to Mission %s failed", signal, mission_id)

    @workflow.signal(name=SIGNAL_CHILD_SETTLED)
    def child_settled(self, report: Any) -> None:
        if not self._sealed:
            self._take_child_report(_unsealed(report))
        elif _is_sealed(report):
            self._inbound.append((CHILD_SETTLED, report))
        elif (
            self._legacy_children_possible
            and isinstance(report, dict)
            and report.get("childMissionId") not in self._sealed_children
        ):
            # A child that started before the upgrade reports unsealed, as it always did.
            self._take_child_report(report)
        else:
            self._refuse(CHILD_SETTLED, "unsealed")

    def _take_child_report(self, report: Any) -> None:
        try:
            outcome = _child_settled(report)
        except (KeyError, TypeError, ValueError):
            self._refuse(CHILD_SETTLED, "malformed")
            return
        self._child_outcomes.append(outcome)

    @workflow.update(name=UPDATE_CHILD_USAGE)
    async def child_usage(self, sealed: Any) -> dict[str, Any]:
        """A child Mission's usage, charged to the WorkItem waiting for it and its ancestry
        (this Group's own parent first, if it has one), or refused with nothing recorded."""
        await workflow.wait_condition(lambda: self._trusted is not None)
        usage = self._open_child_usage(sealed)
        async with self._deciding:
            context = self._context()
            try:
                relayed = self._authority.relayed_charge(usage, context)
            except MwpError as exc:
                raise self._refused(exc, context.now) from None
            if relayed is not None:
                context = replace(context, parent_charge=await self._ask_parent(relayed, context))
            try:
                charged = self._authority.charge_child(usage, context)
            except MwpError as exc:
                raise self._refused(exc, context.now) from None
            if charged.outcome is not None:
                self._after_accept(charged.outcome)
            return charged.answer(self._authority.mission_id)

    @child_usage.validator
    def _validate_child_usage(self, sealed: Any) -> None:
        # Refused here, a forged or untimely request never enters this workflow's history.
        if not self._child_usage:
            raise self._refused(
                MwpError(ErrorCode.INVALID_COMMAND, "this Group does not charge child usage yet")
            )
        if self._ending or self._rolling_over or self._trusted is None:
            raise self._refused(
                MwpError(ErrorCode.BACKPRESSURE, "the Group is not deciding", retry_after_ms=100)
            )
        self._open_child_usage(sealed)

    def _open_child_usage(self, sealed: Any) -> ChildUsage:
        """The request a child sealed for this workflow, or the Update's typed refusal."""
        assert self._trusted is not None
        me = workflow.info().workflow_id
        try:
            opened = open_sealed(sealed, self._trusted, message_type=CHILD_USAGE, recipient=me)
            usage = ChildUsage.from_json(opened.body)
            if opened.sender != mission_workflow_id(usage.child_mission_id):
                raise MessageRefusedError("wrong-sender")
        except MessageRefusedError as exc:
            raise self._refused(
                MwpError(
                    ErrorCode.AUTH_INVALID_SIGNATURE,
                    "not a child-usage request sealed by this Organization's Group Authority "
                    "for this Mission",
                    details={"reason": exc.reason},
                )
            ) from None
        except (KeyError, TypeError, ValueError):
            raise self._refused(
                MwpError(ErrorCode.INVALID_COMMAND, "a malformed child-usage request")
            ) from None
        return usage

    @workflow.signal(name=SIGNAL_PARENT_CLOSED)
    def parent_closed(self, closure: Any) -> None:
        if not self._sealed:
            body = _unsealed(closure)
            self._parent_closures.append(body["eventId"] if isinstance(body, dict) else body)
        elif _is_sealed(closure):
            self._inbound.append((PARENT_CLOSED, closure))
        elif self._input.legacy_parent and isinstance(closure, str):
            self._parent_closures.append(closure)  # from a parent run older than sealing
        else:
            self._refuse(PARENT_CLOSED, "unsealed")

    async def _report_root_approval(self, outcome: Outcome) -> None:
        """Tell the Organization a root Mission was approved before the receipt returns, so a
        follow-up created right after can link to it."""
        if self._authority.mission_parent() is not None:
            return
        for event in outcome.events:
            if event["kind"] != "mission.approved":
                continue
            report: Any = {"missionId": self._authority.mission_id, "ownerId": event["actor"]["id"]}
            registry = organization_workflow_id(self._input.organization_id)
            if self._sealed:
                report = await self._seal(MISSION_APPROVED, registry, report)
            try:
                await workflow.get_external_workflow_handle(registry).signal(
                    SIGNAL_MISSION_APPROVED, report
                )
            except Exception:
                workflow.logger.warning("the registry did not take the approval report")

    # --- Organization services -------------------------------------------------------------

    @workflow.signal(name=SIGNAL_REGISTRY_CHANGED)
    def registry_changed(self, notice: Any) -> None:
        if self._sealed:
            # Opened in the run loop, once the trusted key is known.
            self._inbound.append((REGISTRY_NOTICE, notice))
        else:
            self._offer_notice(_unsealed(notice))

    def _offer_notice(self, notice: Any) -> None:
        # Keeps only a newer revision of this Organization; a newer one may carry a
        # replacement Session whose holder's active leases must be revoked.
        if self._registry.offer(notice):
            self._sessions_changed = True

    # --- sealed messages (mwp.contracts.messages) -------------------------------------------

    async def _seal(self, message_type: str, recipient: str, body: dict[str, Any]) -> Any:
        return await self._key_work(
            SEAL_MESSAGE,
            SealRequest(
                group_authority(self._input.organization_id).id,
                message_type,
                workflow.info().workflow_id,
                recipient,
                format_utc(workflow.now()),
                body,
            ),
        )

    async def _key_work(self, name: str, arg: Any, summary: str | None = None) -> dict[str, Any]:
        return await key_work(name, arg, as_activity=self._key_activities, summary=summary)

    def _open_inbound(self, message_type: str, value: Any) -> None:
        """Open one sealed message and act on it; refuse (and record) anything else. Nothing
        a sender puts in a message can fail this workflow's task."""
        assert self._trusted is not None
        me = workflow.info().workflow_id
        if message_type == REGISTRY_NOTICE:
            me = registry_subscribers(self._input.organization_id)
        try:
            opened = open_sealed(value, self._trusted, message_type=message_type, recipient=me)
            body = opened.body
            if message_type == REGISTRY_NOTICE:
                registry = organization_workflow_id(self._input.organization_id)
                if opened.sender != registry:
                    raise MessageRefusedError("wrong-sender")
                if body["organizationId"] != self._input.organization_id:
                    raise MessageRefusedError("wrong-organization")
                if int(body["revision"]) < self._registry.revision:
                    raise MessageRefusedError("out-of-order")  # a replayed older notice
                self._offer_notice(body)
            elif message_type == CHILD_SETTLED:
                outcome = _child_settled(body)
                if opened.sender != mission_workflow_id(outcome.child_mission_id):
                    raise MessageRefusedError("wrong-sender")
                self._child_outcomes.append(outcome)
            elif message_type == PARENT_CLOSED:
                parent = self._authority.mission_parent()
                if parent is None or opened.sender != mission_workflow_id(parent["missionId"]):
                    raise MessageRefusedError("wrong-sender")
                event_id = body["eventId"]
                if not isinstance(event_id, str):
                    raise MessageRefusedError("malformed")
                self._parent_closures.append(event_id)
        except MessageRefusedError as exc:
            self._refuse(message_type, exc.reason)
        except (KeyError, TypeError, ValueError):
            self._refuse(message_type, "malformed")

    def _refuse(self, message_type: str, reason: str) -> None:
        self._refusals.add(message_type, reason, format_utc(workflow.now()))
        self._visibility_stale = True
        workflow.logger.warning("refused a %s message: %s", message_type, reason)

    # --- visibility ------------------------------------------------------------------------

    async def _publish_visibility(self) -> None:
        """Refresh the visibility after the Commands of a workflow task (not after each)."""
        while True:
            await workflow.wait_condition(lambda: self._visibility_stale)
            self._visibility_stale = False
            self._refresh_visibility()

    def _refresh_visibility(self) -> None:
        attributes = self._authority.search_attributes()
        if attributes != self._published:
            self._published = attributes
            workflow.upsert_search_attributes(
                [
                    MISSION_ID.value_set(attributes[MISSION_ID.name]),
                    GROUP_ID.value_set(attributes[GROUP_ID.name]),
                    MISSION_STATE.value_set(attributes[MISSION_STATE.name]),
                ]
            )
        if self._headline is None:
            view = self._authority.mission_view()
            self._headline = (view.get("state"), view.get("revision"))
        state, revision = self._headline
        refused = self._refusals.total
        workflow.set_current_details(
            f"**{state}** · revision {revision} · "
            f"sequence {self._authority.sequence} · {self._authority.work_item_count} "
            f"WorkItems · run {self._input.run_number}"
            + (f"  \n{refused} forged or malformed messages refused" if refused else "")
            + (self._work_item_table() if self._completes else "")
        )

    def _note_recent(self, events: tuple[dict[str, Any], ...] | list[dict[str, Any]]) -> None:
        for event in events:
            work_item_id = event.get("workItemId")
            if work_item_id is None:
                continue
            self._recent.pop(work_item_id, None)
            if event["kind"] == "work.authorized":
                contract = (event["payload"].get("workItem") or {}).get("contract") or {}
                if isinstance(contract.get("goal"), str) and contract["goal"]:
                    self._goals[work_item_id] = contract["goal"]
            self._recent[work_item_id] = self._goal(work_item_id)
            while len(self._recent) > DETAILS_ROWS:
                del self._recent[next(iter(self._recent))]

    def _goal(self, work_item_id: str) -> str:
        """The item's goal, or its ID once the Group keeps only a short record of it."""
        if work_item_id not in self._goals:
            try:
                goal = self._authority.work_item_view(work_item_id)["contract"]["goal"]
            except (KeyError, TypeError):
                return work_item_id
            self._goals[work_item_id] = goal if isinstance(goal, str) and goal else work_item_id
        return self._goals[work_item_id]

    def _work_item_table(self) -> str:
        """A markdown table of the most recently changed WorkItems, newest first."""
        if not self._recent:
            return ""
        rows = ["", "", "| WorkItem | state | owner |", "| --- | --- | --- |"]
        for work_item_id, goal in reversed(self._recent.items()):
            attributes = self._authority.work_item_search_attributes(work_item_id)
            cells = (
                goal[:60],
                attributes.get(WORK_ITEM_STATE.name, ""),
                attributes.get(OWNER.name),
            )
            rows.append("| " + " | ".join(_cell(c) for c in cells) + " |")
        more = self._authority.work_item_count - len(self._recent)
        if more > 0:
            rows.append(f"\nand {more} more")
        return "\n".join(rows)

    @workflow.query(name=QUERY_MISSION)
    def mission(self) -> dict[str, Any]:
        return self._authority.mission_view()

    @workflow.query(name=QUERY_EPOCHS)
    def epochs(self, principal_id: str) -> dict[str, Any]:
        """The Membership and Coordinator epochs a Command by ``principal_id`` carries (O(1),
        unlike the whole Mission view)."""
        return self._authority.epochs_of(principal_id)

    @workflow.query(name=QUERY_WORK_ITEM)
    def work_item(self, work_item_id: str) -> dict[str, Any]:
        """The item's view; for an item settled in an earlier run, the Group's short record
        of it and ``finalView.workflowId``: its WorkItemWorkflow, whose result is the view."""
        try:
            return self._authority.work_item_view(work_item_id)
        except KeyError:
            record = self._authority.settled_work_item(work_item_id)
            if record is None:
                raise
        child_id = work_item_workflow_id(self._authority.mission_id, work_item_id)
        return {**record, "finalView": {"workflowId": child_id}}

    @workflow.query(name=QUERY_EVENTS_THIS_RUN)
    def events_this_run(self, after_sequence: int = 0) -> list[dict[str, Any]]:
        return [e for e in self._events_this_run if e.get("sequence", 0) > after_sequence]

    @workflow.query(name=QUERY_SEQUENCE)
    def sequence(self) -> int:
        return self._authority.sequence

    @workflow.query(name=QUERY_REFUSED_MESSAGES)
    def refused_messages(self) -> dict[str, Any]:
        """What this Group refused of the messages other workflows (or forgers) sent it."""
        return self._refusals.to_json()

    @workflow.query(name=QUERY_RUN_NUMBER)
    def run_number(self) -> int:
        """Which run of this Group this is (1, then +1 per continue-as-new)."""
        return self._input.run_number


def _mirror_batch(outbox: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The next Events to mirror: at most MIRROR_BATCH_LIMIT of them and (but for a first
    Event larger than that) MIRROR_BATCH_BYTES of JSON."""
    size = 0
    for count, event in enumerate(outbox[:MIRROR_BATCH_LIMIT]):
        size += len(json.dumps(event, separators=(",", ":")))
        if count and size > MIRROR_BATCH_BYTES:
            return outbox[:count]
    return outbox[:MIRROR_BATCH_LIMIT]


def _summary(text: str) -> str:
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"


def _cell(value: str | None) -> str:
    """A markdown table cell: one line, no column break."""
    if not value:
        return "—"
    return value.replace("|", "\\|").replace("\n", " ")


def _is_sealed(value: Any) -> bool:
    return isinstance(value, dict) and "signature" in value and "body" in value


def _unsealed(value: Any) -> Any:
    """What a run from before sealing takes: a message's body, sealed or not (unopened)."""
    return value["body"] if _is_sealed(value) else value


_CHILD_STATES = frozenset({"approved", "cancelled", "failed"})


def _child_settled(report: Any) -> ChildSettled:
    """A child's report as the core takes it; KeyError/TypeError/ValueError if malformed."""
    state = report["state"]
    if state not in _CHILD_STATES:
        raise ValueError("unknown child state")
    if not all(isinstance(report[k], str) for k in ("childMissionId", "eventId")):
        raise TypeError("IDs are strings")
    actor = report["actor"]
    if not isinstance(actor, dict) or not all(isinstance(actor[k], str) for k in ("type", "id")):
        raise TypeError("actor is a Principal")
    approval = report.get("approval")
    if state == "approved" and (
        not isinstance(approval, dict) or not isinstance(approval.get("artifactHashes"), list)
    ):
        raise ValueError("an approval names its Artifacts")
    reason = report.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise TypeError("reason is text")
    return ChildSettled(report["childMissionId"], state, report["eventId"], actor, approval, reason)


_CHILD_END = {"mission.approved": "approved", "mission.cancelled": "cancelled"}


def _child_report(mission_id: str, event: dict[str, Any]) -> dict[str, Any] | None:
    """What a child Mission's terminal Event tells its parent Group, if it is one."""
    kind = event["kind"]
    state = _CHILD_END.get(kind, "failed" if kind == "mission.terminated" else None)
    if state is None:
        return None
    report: dict[str, Any] = {
        "childMissionId": mission_id,
        "state": state,
        "eventId": event["eventId"],
        "actor": event["actor"],
    }
    if state == "approved":
        report["approval"] = event["payload"]["approval"]
    else:
        report["reason"] = event["payload"].get("reason")
    return report
