"""The Worker-owned Scheduler of one Agent: per-Group queues, admission, weighted-fair choice
across Groups, execution slots, preemption requests and schedule disclosure. Pure: every
method takes ``now`` (a protocol timestamp) and returns data; the AgentWorkflow does the I/O."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mwp.core.scheduler.admission import (
    AdmissionDecision,
    Admitted,
    AgentProfile,
    Declined,
    DeclineReason,
    GroupPolicy,
    check_static,
)
from mwp.core.scheduler.clock import seconds
from mwp.core.scheduler.disclosure import (
    Load,
    ScheduleDisclosure,
    estimate,
    material,
    recorded,
)
from mwp.core.scheduler.fairness import StrideFairness
from mwp.core.scheduler.group_queue import Change, GroupQueue
from mwp.core.scheduler.model import Entry, Phase
from mwp.core.scheduler.slots import ExecutionSlot, SlotContext, SlotTable, slot_context

CLAUSES: tuple[str, ...] = (
    "MWP-MSN-012",
    "MWP-WRK-005",
    "MWP-WRK-010",
    "MWP-WRK-012",
    "MWP-WRK-015",
)

Json = dict[str, Any]

_RUNNING = (Phase.DISPATCHED, Phase.ACTIVE)


@dataclass(frozen=True, slots=True)
class Dispatch:
    """Start this item in this slot (the shell then sends ``work.start`` under the owner)."""

    slot_index: int
    context: SlotContext
    resume_from: str | None  # the checkpoint to resume from, if any


@dataclass(slots=True)
class _Group:
    mission_id: str
    policy: GroupPolicy
    queue: GroupQueue
    running: int = 0


class Scheduler:
    def __init__(self, profile: AgentProfile) -> None:
        self.profile = profile
        self.slots = SlotTable(profile.slots)
        self.usable_slots = profile.slots  # Presence: may drop while draining
        self._groups: dict[str, _Group] = {}
        self._fair = StrideFairness()
        self._published: dict[tuple[str, str], ScheduleDisclosure] = {}
        self.served: dict[str, int] = {}  # dispatches per Group, for observability and tests
        # The Agent's mean run time over all Groups (an aggregate): the declared value until
        # runs are observed, then a moving average of them.
        self.mean_duration = profile.mean_duration

    # --- Groups ---------------------------------------------------------------------------

    def join_group(self, group_id: str, mission_id: str, policy: GroupPolicy | None = None) -> None:
        self._groups[group_id] = _Group(
            mission_id, policy or GroupPolicy(), GroupQueue(group_id, self.profile.agent_id)
        )
        self._fair.set_weight(group_id, self._groups[group_id].policy.weight)

    def set_policy(self, group_id: str, policy: GroupPolicy) -> None:
        """Organization priority class or quota changed (policy / MissionOwner escalation)."""
        group = self._groups[group_id]
        group.policy = policy
        self._fair.set_weight(group_id, policy.weight)
        self._fair.wake(group_id)

    def queue(self, group_id: str) -> GroupQueue:
        return self._groups[group_id].queue

    def group_ids(self) -> list[str]:
        return list(self._groups)

    def quota(self, group_id: str) -> int:
        q = self._groups[group_id].policy.quota
        return self.profile.slots if q is None else q

    # --- Events ---------------------------------------------------------------------------

    def apply(self, group_id: str, event: Json) -> Change | None:
        """Apply one accepted Event of ``group_id``'s log and keep slots in step with it."""
        group = self._groups[group_id]
        change = group.queue.apply(event)
        if change is None:
            return None
        was, now_ = change.before in _RUNNING, change.after in _RUNNING
        if was and not now_ and self.slots.find(group_id, change.work_item_id) is not None:
            self.slots.release(group_id, change.work_item_id)  # unless finish() freed it
            group.running -= 1
        elif now_ and not was:  # replay: started without a local dispatch
            entry = group.queue.entries[change.work_item_id]
            if self.slots.occupy(self._context(group_id, group, entry)) is not None:
                group.running += 1
        self._fair.wake(group_id)
        return change

    # --- admission ------------------------------------------------------------------------

    def admit(
        self, group_id: str, work_item_id: str, now: str, *, verified_is_known: bool = False
    ) -> AdmissionDecision:
        """Decide on this Agent's pending offer for ``work_item_id``. A dependency this Agent
        knows only as verified (authorized before its visibility start) is declined as unknown
        unless ``verified_is_known``."""
        group = self._groups[group_id]
        queue = group.queue
        entry = queue.entries.get(work_item_id)
        if entry is None or entry.phase is not Phase.OFFERED or entry.offer is None:
            raise KeyError(f"no pending offer for {work_item_id}")
        t = seconds(now)
        static = check_static(self.profile, group_id, entry)
        if static is not None:
            return static
        terms = entry.terms
        unmet = sorted(terms.dependencies & queue.dead)
        known = queue.terms.keys() | queue.verified if verified_is_known else queue.terms.keys()
        unknown = sorted(terms.dependencies - known)
        if unmet or unknown:
            return Declined(DeclineReason.DEPENDENCY, {"failed": unmet, "unknown": unknown})
        quota = self.quota(group_id)
        if self.usable_slots < 1 or quota < 1:
            return Declined(
                DeclineReason.CONCURRENCY, {"usableSlots": self.usable_slots, "groupQuota": quota}
            )
        queued = queue.queued_count()
        if queued >= group.policy.queue_bound:
            return Declined(DeclineReason.CAPACITY, {"bound": "group_queue"})
        if self.queued_total() >= self.profile.queue_bound:
            return Declined(DeclineReason.CAPACITY, {"bound": "agent_queue"})
        key = t - terms.urgency.credit_seconds
        ahead = sum(
            1 for e in queue.ready_entries() if (e.key, e.work_item_id) < (key, work_item_id)
        )
        disclosure = self._estimate(group_id, entry, t, ahead, queue.waiting_on(entry))
        latest = seconds(disclosure.latest_start)
        start_by = t + entry.offer.start_within
        if latest > start_by:
            return Declined(
                DeclineReason.DEADLINE,
                {"limit": "start_by", "estimatedStart": disclosure.latest_start},
            )
        if latest + terms.duration > terms.deadline:
            return Declined(
                DeclineReason.DEADLINE,
                {
                    "limit": "contract_deadline",
                    "estimatedCompletion": disclosure.estimated_completion,
                },
            )
        self._published[(group_id, work_item_id)] = disclosure
        return Admitted(disclosure)

    # --- choosing the next item -----------------------------------------------------------

    def _runnable(self, group_id: str) -> bool:
        group = self._groups[group_id]
        return group.running < self.quota(group_id) and group.queue.peek() is not None

    def next_start(self) -> Dispatch | None:
        """The next item to start: the fairest Group, then that Group's most urgent-with-age
        item. ``None`` when no slot is free or nothing is eligible."""
        if self.slots.free_count == 0 or self.running_total() >= self.usable_slots:
            return None
        group_id = self._fair.choose(self._runnable)
        if group_id is None:
            return None
        group = self._groups[group_id]
        entry = group.queue.peek()
        assert entry is not None
        context = self._context(group_id, group, entry)
        slot = self.slots.occupy(context)
        assert slot is not None
        group.queue.take(entry)
        group.running += 1
        self._fair.charge(group_id)
        self.served[group_id] = self.served.get(group_id, 0) + 1
        return Dispatch(slot.index, context, entry.checkpoint_ref)

    def undispatch(self, group_id: str, work_item_id: str) -> bool:
        """Free the slot of a dispatched item that did not start; True if one was freed.

        Only a ``dispatched`` item is affected: once its ``work.started`` Event arrived, the
        Events (checkpoint, block, submission, expiry) release the slot instead."""
        group = self._groups[group_id]
        entry = group.queue.entries.get(work_item_id)
        if entry is None or entry.phase is not Phase.DISPATCHED:
            return False
        group.queue.untake(entry)
        self.slots.release(group_id, work_item_id)
        group.running -= 1
        self._fair.wake(group_id)
        return True

    def observe_run(self, seconds: float) -> None:
        """A run took ``seconds``: estimates follow the Agent's real pace (a moving average
        weighting each new run by a fifth), not only its declared mean."""
        self.mean_duration = max(1, round(0.8 * self.mean_duration + 0.2 * max(0.0, seconds)))

    def finish(self, group_id: str, work_item_id: str) -> bool:
        """Free the slot of a run the Authority has answered (its submission, checkpoint,
        block or failure was accepted, or it was fenced) before that Event comes back through
        the Group log; the Event then moves the item without releasing the slot again. True if
        a slot was freed."""
        if self.slots.find(group_id, work_item_id) is None:
            return False
        group = self._groups[group_id]
        self.slots.release(group_id, work_item_id)
        group.running -= 1
        self._fair.wake(group_id)
        return True

    def _context(self, group_id: str, group: _Group, entry: Entry) -> SlotContext:
        return slot_context(
            group_id=group_id,
            mission_id=group.mission_id,
            work_item_id=entry.work_item_id,
            ownership_epoch=entry.ownership_epoch or 0,
            checkpoint_ref=entry.checkpoint_ref,
            budget=entry.terms.budget,
        )

    def running_total(self) -> int:
        return len(self.slots.slots) - self.slots.free_count

    def queued_total(self) -> int:
        return sum(g.queue.queued_count() for g in self._groups.values())

    # --- preemption -----------------------------------------------------------------------

    def request_preemption(self, group_id: str, work_item_id: str) -> bool:
        """Ask running work to stop at its next safe checkpoint (never at once). The item's
        ``work.checkpointed`` Event later frees the slot and re-queues it."""
        slot = self.slots.find(group_id, work_item_id)
        if slot is None:
            return False
        slot.preemption_requested = True
        self._groups[group_id].queue.entries[work_item_id].preemption_requested = True
        return True

    def slot_of(self, group_id: str, work_item_id: str) -> ExecutionSlot | None:
        return self.slots.find(group_id, work_item_id)

    # --- disclosure -----------------------------------------------------------------------

    def disclose(self, group_id: str, work_item_id: str, now: str) -> ScheduleDisclosure:
        queue = self._groups[group_id].queue
        entry = queue.entries[work_item_id]
        ahead = sum(
            1 for e in queue.ready_entries() if (e.key, e.work_item_id) < (entry.key, work_item_id)
        )
        return self._estimate(group_id, entry, seconds(now), ahead, queue.waiting_on(entry))

    def material_changes(self, group_id: str, now: str) -> list[ScheduleDisclosure]:
        """Disclosures of this Group's queued or blocked items whose estimate moved materially
        since last published; they are recorded as published."""
        t = seconds(now)
        out = []
        queue = self._groups[group_id].queue
        for item_id in sorted(queue.entries):
            if queue.entries[item_id].phase not in (Phase.QUEUED, Phase.BLOCKED):
                continue
            current = self.disclose(group_id, item_id, now)
            previous = self._published.get((group_id, item_id)) or recorded(
                group_id, item_id, queue.entries[item_id].disclosed
            )
            if material(previous, current, t):
                self._published[(group_id, item_id)] = current
                out.append(current)
        return out

    def _estimate(
        self, group_id: str, entry: Entry, now: int, ahead: int, waiting_on: str | None
    ) -> ScheduleDisclosure:
        group = self._groups[group_id]
        runnable_weight = sum(
            g.policy.weight for gid, g in self._groups.items() if gid == group_id or g.queue.peek()
        )
        load = Load(
            slots=max(1, min(self.usable_slots, self.profile.slots)),
            free_slots=min(self.slots.free_count, max(0, self.usable_slots - self.running_total())),
            runnable_weight=runnable_weight,
            queued_total=self.queued_total(),
            queue_bound=self.profile.queue_bound,
            mean_duration=self.mean_duration,
        )
        return estimate(
            group_id=group_id,
            work_item_id=entry.work_item_id,
            now=now,
            ahead=ahead,
            duration=entry.terms.duration,
            weight=group.policy.weight,
            quota=max(1, self.quota(group_id)),
            running=group.running,
            waiting_on=waiting_on,
            load=load,
        )
