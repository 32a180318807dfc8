"""MissionWorkflow: one per Mission, its Group Authority on Temporal.

Every Command arrives as the ``command`` Update carrying the Command's exact wire bytes (as
text). The validator verifies the signature in six stages against the Organization's Registry
evidence and asks the pure core to decide without applying; a rejection never enters history.
The handler verifies and decides again, applies atomically, and returns the receipt with the
new unsigned Events. WorkItemWorkflow children hold each item's durable timers and report the
ones that fire through the ``timer_fired`` signal.

The Registry evidence and Session Epochs come from the Organization's registry workflow
(``registry_changed`` signal), never from a client. Continue-as-new carries the compact
snapshot; it happens in the run loop, after every handler has finished.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributeKey

with workflow.unsafe.imports_passed_through():
    from mwp.core.errors import ErrorCode, MwpError
    from mwp.core.group import GroupAuthority
    from mwp.core.group.api import AuthorityContext, Envelope, Outcome, TimerFired
    from mwp.core.jcs import canonicalize, sha256_ref
    from mwp.core.registry import Principal
    from mwp.core.signed_document import verify
    from mwp.core.values import format_utc
    from mwp.mission_names import MissionInput, TimerReport, work_item_workflow_id
    from mwp.organization import (
        SIGNAL_REGISTRY_CHANGED,
        SIGNAL_SUBSCRIBE,
        RegistrySubscription,
        organization_workflow_id,
    )
    from mwp.temporal_errors import to_application_error
    from mwp.temporal_names import AUTHORITY_TASK_QUEUE
    from workflows.work_item import WorkItemInput, WorkItemWorkflow

MISSION_ID = SearchAttributeKey.for_keyword("MissionId")
GROUP_ID = SearchAttributeKey.for_keyword("GroupId")
MISSION_STATE = SearchAttributeKey.for_keyword("MissionState")


@workflow.defn(name="MissionWorkflow")
class MissionWorkflow:
    @workflow.init
    def __init__(self, input: MissionInput) -> None:
        self._input = input
        self._authority = (
            GroupAuthority.restore(input.snapshot) if input.snapshot else GroupAuthority()
        )
        self._principal = Principal(input.authority["type"], input.authority["id"])
        self._registry = RegistrySubscription(input.organization_id)
        if input.registry_notice is not None:
            self._registry.offer(input.registry_notice)
        self._updates_this_run = 0
        self._events_this_run: list[dict[str, Any]] = []
        # Items of a restored snapshot already have their children (ParentClosePolicy.ABANDON
        # keeps them running across continue-as-new).
        self._children: set[str] = set(self._authority.work_item_ids())
        self._pending_timers: list[TimerReport] = []

    # --- run loop --------------------------------------------------------------------------

    @workflow.run
    async def run(self, input: MissionInput) -> dict[str, Any]:
        registry = organization_workflow_id(input.organization_id)
        await workflow.get_external_workflow_handle(registry).signal(
            SIGNAL_SUBSCRIBE, workflow.info().workflow_id
        )
        while True:
            await workflow.wait_condition(
                lambda: bool(self._pending_timers) or self._should_continue_as_new()
            )
            while self._pending_timers:
                await self._apply_timer(self._pending_timers.pop(0))
            if self._should_continue_as_new():
                await workflow.wait_condition(workflow.all_handlers_finished)
                if self._pending_timers:
                    # A timer report arrived while the handlers finished: the snapshot does
                    # not carry it and its child reports it only once, so record it first.
                    continue
                workflow.continue_as_new(self._next_input())

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
            snapshot=self._authority.snapshot(),
            registry_notice=notice.to_json() if notice is not None else None,
            updates_per_run=self._input.updates_per_run,
            run_number=self._input.run_number + 1,
        )

    # --- Commands --------------------------------------------------------------------------

    @workflow.update
    async def command(self, wire: str) -> dict[str, Any]:
        await workflow.wait_condition(lambda: self._registry.notice is not None)
        envelope, context = self._admit(wire)
        try:
            outcome = self._authority.submit(envelope, context)
        except MwpError as exc:
            raise to_application_error(exc, context.now) from None
        if not outcome.duplicate:
            self._updates_this_run += 1
            await self._after_accept(outcome)
        return {
            "receipt": outcome.receipt.to_json(),
            "events": list(outcome.events),
            "duplicate": outcome.duplicate,
        }

    @command.validator
    def _validate_command(self, wire: str) -> None:
        if self._updates_this_run >= self._input.updates_per_run:
            # Leave room for continue-as-new; the sender retries shortly.
            raise to_application_error(
                MwpError(ErrorCode.BACKPRESSURE, "Group is rolling over", retry_after_ms=200)
            )
        if self._registry.notice is None:
            return  # the handler waits for the Registry evidence, then decides
        envelope, context = self._admit(wire)
        try:
            self._authority.check(envelope, context)
        except MwpError as exc:
            raise to_application_error(exc, context.now) from None

    def _admit(self, wire: str) -> tuple[Envelope, AuthorityContext]:
        now = format_utc(workflow.now())
        try:
            evidence = self._registry.evidence
        except ValueError:
            evidence = None
        if evidence is None:  # fail closed: no coherent Registry revision to verify against
            raise to_application_error(
                MwpError(ErrorCode.INTERNAL_ERROR, "Registry evidence unavailable"), now
            )
        try:
            verified = verify(wire.encode("utf-8"), "command", evidence)
        except MwpError as exc:
            raise to_application_error(exc, now) from None
        envelope = Envelope(
            command=verified.document,
            signing_hash=verified.signing_hash,
            command_hash=sha256_ref(canonicalize(verified.document)),
        )
        context = AuthorityContext(now, self._principal, self._session_epochs())
        return envelope, context

    def _session_epochs(self) -> dict[str, int]:
        notice = self._registry.notice
        return dict(notice.session_epochs) if notice is not None else {}

    async def _after_accept(self, outcome: Outcome) -> None:
        self._events_this_run.extend(outcome.events)
        self._refresh_visibility()
        touched = {e["workItemId"] for e in outcome.events if "workItemId" in e}
        for work_item_id in sorted(touched):
            await self._notify_work_item(work_item_id)

    # --- WorkItem children and their timers ------------------------------------------------

    async def _notify_work_item(self, work_item_id: str) -> None:
        mission_id = self._authority.mission_id
        child_id = work_item_workflow_id(mission_id, work_item_id)
        view = self._authority.work_item_view(work_item_id)
        timers = [t.__dict__ for t in self._authority.work_item_timers(work_item_id)]
        attributes = self._authority.work_item_search_attributes(work_item_id)
        if work_item_id not in self._children:
            self._children.add(work_item_id)
            await workflow.start_child_workflow(
                WorkItemWorkflow.run,
                WorkItemInput(
                    mission_workflow_id=workflow.info().workflow_id,
                    mission_id=mission_id,
                    work_item_id=work_item_id,
                    view=view,
                    timers=timers,
                    search_attributes=attributes,
                ),
                id=child_id,
                task_queue=AUTHORITY_TASK_QUEUE,
                parent_close_policy=workflow.ParentClosePolicy.ABANDON,
                static_summary=f"WorkItem {work_item_id}",
            )
            return
        handle = workflow.get_external_workflow_handle(child_id)
        try:
            await handle.signal(
                "transition", {"view": view, "timers": timers, "searchAttributes": attributes}
            )
        except Exception:
            # A finished child (terminal item) has nothing left to time; the Group's state
            # is authoritative either way.
            workflow.logger.info("WorkItem %s no longer running", work_item_id)

    @workflow.signal
    def timer_fired(self, report: TimerReport) -> None:
        self._pending_timers.append(report)

    async def _apply_timer(self, report: TimerReport) -> None:
        context = AuthorityContext(
            format_utc(workflow.now()), self._principal, self._session_epochs()
        )
        timer = TimerFired(report.work_item_id, report.kind, report.token)  # type: ignore[arg-type]
        outcome = self._authority.fire(timer, context)
        if outcome is not None:
            await self._after_accept(outcome)

    # --- Organization services -------------------------------------------------------------

    @workflow.signal(name=SIGNAL_REGISTRY_CHANGED)
    def registry_changed(self, notice: dict[str, Any]) -> None:
        self._registry.offer(notice)  # keeps only a newer revision of this Organization

    # --- visibility ------------------------------------------------------------------------

    def _refresh_visibility(self) -> None:
        attributes = self._authority.search_attributes()
        workflow.upsert_search_attributes(
            [
                MISSION_ID.value_set(attributes["MissionId"]),
                GROUP_ID.value_set(attributes["GroupId"]),
                MISSION_STATE.value_set(attributes["MissionState"]),
            ]
        )
        view = self._authority.mission_view()
        workflow.set_current_details(
            f"**{view.get('state')}** · revision {view.get('revision')} · "
            f"sequence {self._authority.sequence} · {len(self._authority.work_item_ids())} "
            f"WorkItems · run {self._input.run_number}"
        )

    @workflow.query
    def mission(self) -> dict[str, Any]:
        return self._authority.mission_view()

    @workflow.query
    def work_item(self, work_item_id: str) -> dict[str, Any]:
        return self._authority.work_item_view(work_item_id)

    @workflow.query
    def events_this_run(self, after_sequence: int = 0) -> list[dict[str, Any]]:
        return [e for e in self._events_this_run if e.get("sequence", 0) > after_sequence]

    @workflow.query
    def sequence(self) -> int:
        return self._authority.sequence

    @workflow.query
    def run_number(self) -> int:
        """Which run of this Group this is (1, then +1 per continue-as-new)."""
        return self._input.run_number
