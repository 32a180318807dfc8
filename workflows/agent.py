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

Every signal is a message sealed with the agent's own key (:mod:`mwp.agent.signals`): anyone
who reaches the namespace can send a signal, so a forged, misaddressed, replayed or malformed
one is refused, logged (type and reason, never content) and counted in the details and the
``status`` query, and changes nothing. The trust anchor is fetched per run, see
:meth:`AgentWorkflow._fetch_anchor`.
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
    SIGNING_KEY,
    AgentInput,
    Delivery,
    ExecutionOrder,
    ExecutionOutcome,
    OfferAcceptance,
    PolicyChange,
    PreemptionRequest,
    ScheduleUpdate,
    SessionChange,
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
from mwp.core.scheduler.model import Entry
from mwp.core.trust.service_message import (
    FORMAT,
    MessageRefusedError,
    RefusalRecord,
    TrustedKey,
    open_sealed,
)
from mwp.core.wire.values import Instant, ValueRuleError, format_utc, parse_timestamp
from mwp.workflows import patches

Json = dict[str, Any]
Message = Delivery | SessionChange | PreemptionRequest | PolicyChange

# An owner Command (acceptance, disclosure) is one signed Update; a restarted worker retries it.
# An attempt made while the gateway is away fails at once: the next comes 0.2 s later, then
# twice as late each time, so that a gateway back within a second costs an acceptance no
# more than that (Temporal's first retry comes after 1 s: in the demo an acceptance attempted
# during the gateway's outage of half a second was made 5 s later). Like the timeout below, a
# retry policy is not part of what replay compares.
OWNER_COMMAND_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    maximum_interval=timedelta(seconds=5),
    maximum_attempts=20,
)
# An attempt takes one round trip (a lost gateway fails it at once), so an attempt the worker of
# a killed process held is given up on after this, not after a minute: the demo's tester, killed
# while it accepted an offer, took that offer 60 s later. A timeout is not part of what replay
# compares (the activity's type and ID are), so open runs take it with no patch.
OWNER_COMMAND_SECONDS = 10
# A run's own failures are handled inside it (the contract's retry budget, work.fail); Temporal
# retries only a run whose worker died, and that retry continues under the same lease only
# while the Session is unchanged.
RUN_RETRY = RetryPolicy(maximum_interval=timedelta(seconds=10), maximum_attempts=3)
KEPT_RECORDS = 200
# A preemption request older (or newer) than this, by the workflow's clock, is refused: a
# replayed one cannot stop the same item again later. Within it, each item's requests must
# come in ``sentAt`` order.
PREEMPT_WINDOW = timedelta(minutes=10)
# Messages kept while the trust anchor is fetched; more are refused (the inbox resends).
MAX_HELD = 1000


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
        self._refused = RefusalRecord.from_json(input.refused_signals)
        self._anchor: TrustedKey | None = None  # the agent's key, once this run has fetched it
        # Sealed messages that wait for the anchor to be fetched, in arrival order.
        self._held: list[tuple[type[Message], tuple[Any, ...]]] = []
        self._preempts: dict[tuple[str, str], Instant] = {}  # last request per item, this run

    # --- the loop ------------------------------------------------------------------------

    @workflow.run
    async def run(self, input: AgentInput) -> None:
        if self._sealed():
            await self._fetch_anchor()
        rounds = 0
        while True:
            await workflow.wait_condition(lambda: self._dirty)
            self._dirty = False
            if self._held:  # a message under a key this run does not know: ask again
                await self._fetch_anchor()
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
                if not self._in_flight_work() and not self._held:
                    self._input.session_epoch = self._session_epoch
                    self._input.mean_duration_seconds = self._scheduler.mean_duration
                    if self._refused.total:
                        self._input.refused_signals = self._refused.to_json()
                    workflow.continue_as_new(self._input)

    def _show(self) -> None:
        """What the Temporal UI shows at a glance: slots, queues, Groups."""
        s = self._scheduler
        details = (
            f"**{s.running_total()} of {self._input.slots} slots running** · "
            f"{s.queued_total()} queued · {len(self._missions)} Groups · "
            f"Session {self._session_epoch}"
        )
        if self._refused.total:
            details += f" · {self._refused.total} signals refused"
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
            decision = self._scheduler.admit(
                group_id, item_id, now, verified_is_known=self._verified_is_known(group_id, entry)
            )
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

    def _verified_is_known(self, group_id: str, entry: Entry) -> bool:
        """Whether a dependency known only as verified counts as known: it changes a decision
        only where one is so known, and only under the patch (before it, such an offer was
        declined as depending on an unknown item)."""
        queue = self._scheduler.queue(group_id)
        if not (entry.terms.dependencies & queue.verified) - queue.terms.keys():
            return False
        return workflow.patched(patches.AGENT_CITED_RESULTS.id)

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
                    start_to_close_timeout=timedelta(seconds=OWNER_COMMAND_SECONDS),
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
    # Each handler takes its arguments untyped (``*args``): a payload of any shape reaches
    # the handler to be refused and counted, instead of failing the task or being dropped by
    # the payload converter unseen.

    @workflow.signal(name=SIGNAL_DELIVER)
    def deliver(self, *args: Any) -> None:
        """One Group's next verified Events (slimmed by the inbox) and the Cursor after them,
        read after ``held``: a batch that does not continue this run's Cursor (read before a
        rollover, or redelivered) is ignored, and the inbox feeds this run from its own.
        Replayed, a batch applies only where its Events follow in the log: the same Events."""
        self._receive(Delivery, args)

    @workflow.signal(name=SIGNAL_SESSION)
    def session(self, *args: Any) -> None:
        """The agent worker opened a new Session: later runs act under it (monotonic, so a
        replayed older one changes nothing)."""
        self._receive(SessionChange, args)

    @workflow.signal(name=SIGNAL_PREEMPT)
    def preempt(self, *args: Any) -> None:
        """Ask a running item to stop at its next safe checkpoint."""
        self._receive(PreemptionRequest, args)

    @workflow.signal(name=SIGNAL_SET_POLICY)
    def set_policy(self, *args: Any) -> None:
        """Organization priority (weight) or quota of a Group changed: queued work reorders at
        once; running work over a lowered quota is asked to preempt at its next checkpoint."""
        self._receive(PolicyChange, args)

    def _sealed(self) -> bool:
        """Whether this run opens sealed signals (runs begun before the patch do not)."""
        return workflow.patched(patches.AGENT_SEALED_SIGNALS.id)

    async def _fetch_anchor(self) -> None:
        """Learn the agent's key from the worker hosting this run, then open what waited.

        The anchor is the binding of the key the agent worker process holds (the
        ``signing_key`` local activity runs in that process), not the start input or a
        signal, which anyone reaching the namespace can set. Every run fetches it anew (the
        input is carried across continue-as-new, the anchor is not), and so does a run that
        receives a message under a key it does not know, so a rotated key is trusted at once.
        """
        binding: Json = await workflow.execute_local_activity(
            SIGNING_KEY,
            self._input.agent_id,
            result_type=dict,
            start_to_close_timeout=timedelta(seconds=10),
            summary="the agent's signing key",
        )
        self._anchor = TrustedKey.from_binding(binding)
        held, self._held = self._held, []
        for message, args in held:
            self._open(message, args, may_ask_again=False)

    def _receive(self, message: type[Message], args: tuple[Any, ...]) -> None:
        if not self._sealed():
            if _sealed_form(args):
                # An upgraded sender: roll over, so that the next run opens its messages.
                self._draining = self._dirty = True
            self._guarded(message.MESSAGE, lambda: self._apply(_legacy(message, args)))
        elif self._anchor is None or self._held:
            self._hold(message, args)  # in arrival order, behind those already waiting
        else:
            self._open(message, args, may_ask_again=True)

    def _hold(self, message: type[Message], args: tuple[Any, ...]) -> None:
        if len(self._held) >= MAX_HELD:
            self._refuse(message.MESSAGE, "too-many-waiting")
            return
        self._held.append((message, args))
        self._dirty = True

    def _open(self, message: type[Message], args: tuple[Any, ...], *, may_ask_again: bool) -> None:
        """Open, check and apply one sealed message, or refuse it; never raise."""
        anchor = self._anchor
        assert anchor is not None
        try:
            if len(args) != 1:
                raise MessageRefusedError("unsealed")
            sealed = open_sealed(
                args[0],
                anchor,
                message_type=message.MESSAGE,
                recipient=workflow.info().workflow_id,
                senders=frozenset({self._input.agent_id}),
            )
            opened = message.from_body(sealed.body)
            self._check_order(opened, _instant_of(sealed.sent_at))
            if isinstance(opened, PolicyChange):
                self._input.policy_sent_at[opened.group_id] = sealed.sent_at
            self._apply(opened)
        except MessageRefusedError as refused:
            if refused.reason == "untrusted-key" and may_ask_again:
                self._hold(message, args)  # the agent's key may have been rotated: ask again
            else:
                self._refuse(message.MESSAGE, refused.reason)
        except Exception as exc:  # authentic and well-formed, not applicable: never fail the task
            workflow.logger.warning("%s signal raised %s", message.MESSAGE, type(exc).__name__)
            self._refuse(message.MESSAGE, "not-applicable")

    def _guarded(self, message_type: str, apply: Callable[[], None]) -> None:
        """A run begun before the patch applies a message as it did (unsealed, or a sealed one
        from an upgraded sender, unverified: its Session must reach the next run); one of the
        wrong shape is refused."""
        try:
            apply()
        except MessageRefusedError as refused:
            self._refuse(message_type, refused.reason)
        except (KeyError, TypeError, ValueError, AttributeError):
            self._refuse(message_type, "malformed")

    def _refuse(self, message_type: str, reason: str) -> None:
        workflow.logger.warning("refused %s signal: %s", message_type, reason)
        self._refused.add(message_type, reason, self._now())
        self._show()

    def _check_order(self, message: Message, sent_at: Instant) -> None:
        """Refuse a replayed preemption or policy change (anyone who can read this history
        can resend a sealed message). A replayed delivery applies only where its Events
        follow in the log, so it brings the same Events; a Session only ever rises."""
        if isinstance(message, PreemptionRequest):
            self._check_preemption(message, sent_at)
        elif isinstance(message, PolicyChange):
            # Later than the Group's last policy (kept across runs), or it would undo it.
            last = self._input.policy_sent_at.get(message.group_id)
            if last is not None and sent_at <= _instant_of(last):
                raise MessageRefusedError("replayed")

    def _check_preemption(self, request: PreemptionRequest, sent_at: Instant) -> None:
        """Fresh, and later than the item's last request in this run: a replay can stop an
        item again only within the window, and only once a run has rolled over."""
        now = workflow.now()
        oldest = _instant_of(format_utc(now - PREEMPT_WINDOW))
        if not oldest <= sent_at <= _instant_of(format_utc(now + PREEMPT_WINDOW)):
            raise MessageRefusedError("out-of-window")
        key = (request.group_id, request.work_item_id)
        last = self._preempts.get(key)
        if last is not None and sent_at <= last:
            raise MessageRefusedError("replayed")
        self._preempts = {k: t for k, t in self._preempts.items() if t >= oldest}
        self._preempts[key] = sent_at

    def _apply(self, message: Message) -> None:
        if isinstance(message, Delivery):
            self._deliver(message)
        elif isinstance(message, SessionChange):
            self._session_epoch = max(self._session_epoch, message.session_epoch)
            self._dirty = True
        elif isinstance(message, PreemptionRequest):
            if message.group_id in self._missions:
                self._scheduler.request_preemption(message.group_id, message.work_item_id)
        else:
            self._set_policy(message)

    def _deliver(self, batch: Delivery) -> None:
        group_id = batch.group_id
        if batch.held != self._cursors.get(group_id):
            return
        if group_id not in self._missions:
            if not batch.mission_id:
                return  # the founding Event comes first; the inbox resends from the Cursor
            self._missions[group_id] = batch.mission_id
            self._scheduler.join_group(group_id, batch.mission_id, self._policy(group_id))
        for event in batch.events:
            if (
                event.get("cited")
                and event["kind"] == "work.result.accepted"
                and not workflow.patched(patches.AGENT_CITED_RESULTS.id)
            ):
                continue  # as before the patch, when no inbox sent such an Event
            change = self._scheduler.apply(group_id, event)
            if (
                change is not None
                and change.after is Phase.OFFERED
                and event["kind"] == "work.offer.created"
            ):
                self._admissions.append((group_id, change.work_item_id))
        self._cursors[group_id] = batch.cursor
        if batch.events:
            self._touched.add(group_id)
        self._dirty = True

    def _set_policy(self, change: PolicyChange) -> None:
        group_id = change.group_id
        self._input.weights[group_id] = change.weight
        if change.quota is None:
            self._input.quotas.pop(group_id, None)
        else:
            self._input.quotas[group_id] = change.quota
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
            "refusedSignals": self._refused.to_json(),
        }


def _keep(records: list[Json], record: Json) -> None:
    records.append(record)
    del records[:-KEPT_RECORDS]


def _instant_of(text: str) -> Instant:
    try:
        return parse_timestamp(text).instant
    except ValueRuleError:
        raise MessageRefusedError("malformed") from None


def _sealed_form(args: tuple[Any, ...]) -> bool:
    return len(args) == 1 and isinstance(args[0], dict) and args[0].get("format") == FORMAT


def _legacy(message: type[Message], args: tuple[Any, ...]) -> Message:
    """The message of a signal as senders before the patch sent it (positional arguments),
    or the body of a sealed one from an upgraded sender, unverified as before."""
    if _sealed_form(args):
        return message.from_body(args[0]["body"])
    if message is Delivery:
        (batch,) = args
        return Delivery(
            batch["groupId"],
            batch.get("missionId", ""),
            batch.get("events", []),
            batch.get("held"),
            batch.get("cursor"),
        )
    if message is SessionChange:
        (epoch,) = args
        return SessionChange(int(epoch))
    if message is PreemptionRequest:
        group_id, work_item_id = args
        return PreemptionRequest(group_id, work_item_id)
    return PolicyChange(*args)
