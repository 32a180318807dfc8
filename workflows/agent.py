"""AgentWorkflow: one per Agent, its Worker Scheduler (MWP-WRK-005, 008 to 012, 015).

It runs on the agent's own task queue, so the agent worker process (which holds the agent's
key) hosts it and its activities. The agent's inboxes (:mod:`mwp.agent.inbox`) signal each
Group's verified Events in order (``deliver``); the pure :class:`~mwp.core.scheduler.Scheduler`
projects them into per-Group queues. For each new offer it decides admission: an admitted
offer is accepted (the ``accept_offer`` activity signs and sends ``work.accept_offer``); a
declined one is recorded with its structured reason and left to lapse. Whenever a slot is free
the Scheduler picks the next item (weighted fair across Groups, urgency with aging within
one) and the ``run_capability`` activity runs it under an Execution Lease
(:mod:`mwp.agent.execution`). A slot is freed as soon as the Authority has answered its run
(the receipt of its submission, checkpoint, block or failure, or its fencing); the items
themselves move only with the Group's Events, so the log stays authoritative for the queues.

Preemption is cooperative: ``preempt`` (or a policy change that lowers a Group's quota below
what it runs) flags the slot; the run sees the flag at its next checkpoint, records the
checkpoint (which releases the lease) and stops; the item re-enters its Group queue and later
resumes from that checkpoint.

State is a projection: to continue as new it first drains (no new run or Command starts; those
in flight finish), then the new run starts from empty queues and the inboxes replay the Group
logs from the start (the Cursors reset), which rebuilds the same queues.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy

from mwp.contracts.agent import (
    ACCEPT_OFFER,
    AGENT_WORKFLOW_TYPE,
    DISCLOSE_SCHEDULE,
    QUERY_CURSORS,
    QUERY_PREEMPTION_REQUESTED,
    QUERY_QUEUES,
    QUERY_STATUS,
    RUN_CAPABILITY,
    SIGNAL_DELIVER,
    SIGNAL_PREEMPT,
    SIGNAL_SESSION,
    SIGNAL_SET_POLICY,
    AgentInput,
    ExecutionOrder,
    ExecutionOutcome,
    OfferAcceptance,
    ScheduleUpdate,
)
from mwp.core.scheduler import (
    AgentProfile,
    Declined,
    GroupPolicy,
    Phase,
    Scheduler,
)
from mwp.core.scheduler.clock import seconds
from mwp.core.scheduler.group_queue import snapshot_json
from mwp.core.wire.values import format_utc

Json = dict[str, Any]

# An owner Command (acceptance, disclosure) is one signed Update; a restarted worker retries it.
OWNER_COMMAND_RETRY = RetryPolicy(maximum_interval=timedelta(seconds=5), maximum_attempts=20)
# A run's own failures are handled inside it (the contract's retry budget, work.fail); Temporal
# retries only a run whose worker died, and that retry continues under the same lease only
# while the Session is unchanged.
RUN_RETRY = RetryPolicy(maximum_interval=timedelta(seconds=10), maximum_attempts=3)
KEPT_RECORDS = 200


@workflow.defn(name=AGENT_WORKFLOW_TYPE)
class AgentWorkflow:
    @workflow.init
    def __init__(self, input: AgentInput) -> None:
        self._input = input
        self._session_epoch = input.session_epoch
        self._scheduler = Scheduler(
            AgentProfile(
                agent_id=input.agent_id,
                card_version=input.card_version,
                capabilities={k: frozenset(v) for k, v in input.capabilities.items()},
                slots=input.slots,
                mean_duration=input.mean_duration_seconds,
            )
        )
        self._cursors: dict[str, Json] = {}
        self._missions: dict[str, str] = {}
        self._admissions: list[tuple[str, str]] = []
        # Runs in flight by run number (a retried run of a revoked lease may overlap a new
        # run of the same item).
        self._runs: dict[int, asyncio.Task[None]] = {}
        self._run_number = 0
        self._details = ""
        self._in_flight = 0  # owner Commands being sent (acceptances, schedule disclosures)
        self.disclosures = 0
        self._touched: set[str] = set()  # Groups whose queues moved since the last round
        self._tasks: set[asyncio.Task[None]] = set()  # acceptances and disclosures in flight
        self._dirty = False
        self._draining = False  # rolling over: nothing new starts
        self._decisions: list[Json] = []  # admissions, newest last (bounded)
        self._outcomes: list[Json] = []  # run outcomes, newest last (bounded)

    # --- the loop ------------------------------------------------------------------------

    @workflow.run
    async def run(self, input: AgentInput) -> None:
        rounds = 0
        while True:
            await workflow.wait_condition(lambda: self._dirty)
            self._dirty = False
            rounds += 1
            if not self._draining and (
                workflow.info().is_continue_as_new_suggested() or 0 < input.rounds_per_run <= rounds
            ):
                # Roll over once the runs and Commands in flight are done: no new ones start
                # meanwhile. Offers seen while draining are decided after the rollover, when
                # the inboxes replay the logs into the new run.
                self._draining = True
            if not self._draining:
                self._admit()
                self._dispatch()
                self._disclose()
            self._show()
            if self._draining and not self._in_flight_work():
                await workflow.wait_condition(workflow.all_handlers_finished)
                if not self._in_flight_work():
                    self._input.session_epoch = self._session_epoch
                    self._input.mean_duration_seconds = self._scheduler.mean_duration
                    workflow.continue_as_new(self._input)

    def _show(self) -> None:
        """What the Temporal UI shows at a glance: slots, queues, Groups."""
        s = self._scheduler
        details = (
            f"**{s.running_total()} of {self._input.slots} slots running** · "
            f"{s.queued_total()} queued · {len(self._missions)} Groups · "
            f"Session {self._session_epoch}"
        )
        if details != self._details:
            self._details = details
            workflow.set_current_details(details)

    def _in_flight_work(self) -> bool:
        return bool(self._runs) or self._in_flight > 0

    def _now(self) -> str:
        return format_utc(workflow.now())

    def _admit(self) -> None:
        pending, self._admissions = self._admissions, []
        now = self._now()
        for group_id, item_id in pending:
            entry = self._scheduler.queue(group_id).entries.get(item_id)
            if entry is None or entry.phase is not Phase.OFFERED or entry.offer is None:
                continue  # accepted elsewhere, withdrawn or fenced before we decided
            if entry.offer.expires_at <= seconds(now):
                continue  # a replayed offer that has lapsed
            decision = self._scheduler.admit(group_id, item_id, now)
            record: Json = {"groupId": group_id, "workItemId": item_id, "decidedAt": now}
            if isinstance(decision, Declined):
                record.update(
                    decision="declined", reason=decision.reason.value, details=decision.details
                )
            else:
                record.update(decision="admitted", schedule=decision.disclosure.schedule_estimate())
                acceptance = OfferAcceptance(
                    group_id,
                    self._missions.get(group_id, ""),
                    item_id,
                    entry.offer.offer_id,
                    entry.terms.contract_version,
                    self._session_epoch,
                    decision.disclosure.schedule_estimate(),  # disclosed on acceptance
                )
                self._owner_command(
                    ACCEPT_OFFER, acceptance, f"accept {item_id}", self._accepted(item_id)
                )
            _keep(self._decisions, record)

    def _owner_command(
        self, activity: str, arg: Any, summary: str, record: Callable[[Json], None]
    ) -> None:
        """Send an owner Command through ``activity`` without waiting for it (the loop goes
        on); ``record`` gets its result."""

        async def send() -> None:
            try:
                result: Json = await workflow.execute_activity(
                    activity,
                    arg,
                    start_to_close_timeout=timedelta(seconds=60),
                    retry_policy=OWNER_COMMAND_RETRY,
                    result_type=dict,
                    summary=summary,
                )
                record(result)
            finally:
                self._in_flight -= 1
                self._dirty = True
                self._tasks = {t for t in self._tasks if not t.done()}

        self._in_flight += 1
        self._tasks.add(asyncio.create_task(send()))

    def _disclose(self) -> None:
        """Publish the estimates of waiting items that moved materially (spec 11.2)."""
        touched, self._touched = self._touched, set()
        now = self._now()
        for group_id in sorted(touched):
            mission_id = self._missions[group_id]
            queue = self._scheduler.queue(group_id)
            for disclosure in self._scheduler.material_changes(group_id, now):
                entry = queue.entries[disclosure.work_item_id]
                if entry.ownership_epoch is None:
                    continue
                update = ScheduleUpdate(
                    group_id,
                    mission_id,
                    entry.work_item_id,
                    entry.ownership_epoch,
                    self._session_epoch,
                    disclosure.schedule_estimate(),
                )
                self._owner_command(
                    DISCLOSE_SCHEDULE, update, f"schedule {entry.work_item_id}", self._disclosed
                )

    def _accepted(self, work_item_id: str) -> Callable[[Json], None]:
        return lambda result: _keep(self._decisions, {**result, "workItemId": work_item_id})

    def _disclosed(self, result: Json) -> None:
        self.disclosures += 1 if result.get("disclosed") else 0

    def _dispatch(self) -> None:
        while (dispatch := self._scheduler.next_start()) is not None:
            context = dispatch.context
            order = ExecutionOrder(
                agent_id=self._input.agent_id,
                session_epoch=self._session_epoch,
                group_id=context.group_id,
                mission_id=context.mission_id,
                work_item_id=context.work_item_id,
                ownership_epoch=context.ownership_epoch,
                resume_from=dispatch.resume_from,
                lease_seconds=self._input.lease_seconds,
            )
            self._run_number += 1
            self._runs[self._run_number] = asyncio.create_task(self._run(self._run_number, order))

    async def _run(self, key: int, order: ExecutionOrder) -> None:
        started = workflow.now()
        try:
            outcome = await workflow.execute_activity(
                RUN_CAPABILITY,
                order,
                result_type=ExecutionOutcome,
                start_to_close_timeout=timedelta(days=1),
                heartbeat_timeout=timedelta(seconds=max(10, order.lease_seconds)),
                retry_policy=RUN_RETRY,
                summary=f"{order.work_item_id} (epoch {order.ownership_epoch})",
            )
            record: Json = {"status": outcome.status, "leaseId": outcome.lease_id}
            record.update(outcome.detail)
            if outcome.status == "submitted":
                self._scheduler.observe_run((workflow.now() - started).total_seconds())
        except Exception as exc:  # the run's worker kept dying: the lease will lapse
            record = {"status": "crashed", "error": str(exc)[:500]}
        finally:
            del self._runs[key]
            self._dirty = True
        if record["status"] in ("not_started", "crashed"):
            # A run that never started gives its slot back and its item is queued again.
            self._scheduler.undispatch(order.group_id, order.work_item_id)
        else:
            # The Authority answered the run (submitted, checkpointed, blocked, failed, or
            # fenced): the slot is free now, not once that Event has come back through the log.
            self._scheduler.finish(order.group_id, order.work_item_id)
        _keep(
            self._outcomes,
            {"groupId": order.group_id, "workItemId": order.work_item_id, **record},
        )

    # --- signals -------------------------------------------------------------------------

    @workflow.signal(name=SIGNAL_DELIVER)
    def deliver(self, batch: Json) -> None:
        """One Group's next verified Events (slimmed by the inbox) and the Cursor after them,
        read after ``held``: a batch that does not continue this run's Cursor (read before a
        rollover, or redelivered) is ignored, and the inbox feeds this run from its own."""
        group_id = batch["groupId"]
        if batch.get("held") != self._cursors.get(group_id):
            return
        if group_id not in self._missions:
            if not batch["missionId"]:
                return  # the founding Event comes first; the inbox resends from the Cursor
            self._missions[group_id] = batch["missionId"]
            self._scheduler.join_group(group_id, batch["missionId"], self._policy(group_id))
        for event in batch["events"]:
            change = self._scheduler.apply(group_id, event)
            if (
                change is not None
                and change.after is Phase.OFFERED
                and event["kind"] == "work.offer.created"
            ):
                self._admissions.append((group_id, change.work_item_id))
        self._cursors[group_id] = batch["cursor"]
        if batch["events"]:
            self._touched.add(group_id)
        self._dirty = True

    @workflow.signal(name=SIGNAL_SESSION)
    def session(self, session_epoch: int) -> None:
        """The agent worker opened a new Session: later runs act under it."""
        self._session_epoch = max(self._session_epoch, session_epoch)
        self._dirty = True

    @workflow.signal(name=SIGNAL_PREEMPT)
    def preempt(self, group_id: str, work_item_id: str) -> None:
        """Ask a running item to stop at its next safe checkpoint."""
        if group_id in self._missions:
            self._scheduler.request_preemption(group_id, work_item_id)

    @workflow.signal(name=SIGNAL_SET_POLICY)
    def set_policy(self, group_id: str, weight: int, quota: int | None = None) -> None:
        """Organization priority (weight) or quota of a Group changed: queued work reorders at
        once; running work over a lowered quota is asked to preempt at its next checkpoint."""
        self._input.weights[group_id] = weight
        if quota is None:
            self._input.quotas.pop(group_id, None)
        else:
            self._input.quotas[group_id] = quota
        if group_id not in self._missions:
            return
        self._scheduler.set_policy(group_id, self._policy(group_id))
        queue = self._scheduler.queue(group_id)
        running = sorted(
            (e for e in queue.entries.values() if e.phase in (Phase.DISPATCHED, Phase.ACTIVE)),
            key=lambda e: (-e.key, e.work_item_id),  # the youngest work yields first
        )
        for entry in running[: max(0, len(running) - self._scheduler.quota(group_id))]:
            self._scheduler.request_preemption(group_id, entry.work_item_id)
        self._dirty = True

    def _policy(self, group_id: str) -> GroupPolicy:
        return GroupPolicy(
            weight=self._input.weights.get(group_id, 1), quota=self._input.quotas.get(group_id)
        )

    # --- queries -------------------------------------------------------------------------

    @workflow.query(name=QUERY_CURSORS)
    def cursors(self) -> dict[str, Json]:
        return self._cursors

    @workflow.query(name=QUERY_PREEMPTION_REQUESTED)
    def preemption_requested(self, group_id: str, work_item_id: str) -> bool:
        if group_id not in self._missions:
            return False
        slot = self._scheduler.slot_of(group_id, work_item_id)
        return slot is not None and slot.preemption_requested

    @workflow.query(name=QUERY_QUEUES)
    def queues(self) -> dict[str, Json]:
        """Every Group queue as comparable JSON (rebuild-by-replay yields the same)."""
        return {g: snapshot_json(self._scheduler.queue(g)) for g in self._scheduler.group_ids()}

    @workflow.query(name=QUERY_STATUS)
    def status(self) -> Json:
        s = self._scheduler
        return {
            "agentId": self._input.agent_id,
            "sessionEpoch": self._session_epoch,
            "slots": self._input.slots,
            "running": s.running_total(),
            "queued": s.queued_total(),
            "served": dict(s.served),
            "groups": len(self._missions),
            "draining": self._draining,
            "scheduleDisclosures": self.disclosures,
            "decisions": self._decisions,
            "outcomes": self._outcomes,
        }


def _keep(records: list[Json], record: Json) -> None:
    records.append(record)
    del records[:-KEPT_RECORDS]
