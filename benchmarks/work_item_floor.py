"""The floor under a WorkItem's whole life: the Temporal work this design prescribes for each
WorkItem of ``make bench-agents``, at its scale and concurrency, with no protocol work at all.

Run: ``make bench-work-item-floor`` (or ``.venv/bin/python -m benchmarks.work_item_floor``),
about half a minute. It starts the embedded stack (the dev server, the authority namespace and
an agents namespace) and runs ``--missions`` Groups of ``--items-per-mission`` WorkItems with
``--agents`` agents of ``--slots`` slots, as ``benchmarks/agent_runtime.py`` does, through
these hops, each doing nothing else (no signing, verification, JCS, decisions or models):

* a ``BenchGroupWorkflow`` per Mission (the MissionWorkflow's place) takes every Command as an
  Update and answers at once with the next sequence number. Beside the handlers it starts a
  ``BenchWorkItemWorkflow`` child per WorkItem at ``authorize`` and signals it each transition
  that changes what the child holds (offer, accept, start, checkpoint, submit, accept_result;
  not publish or usage, which move only the item's revision), at most one signal in flight per
  child carrying the newest state, as the Mission does; its outbox loop hands the new Events to
  a ``mirror`` activity in batches;
* each child upserts its state as a search attribute per signal, keeps the timer its state
  needs (offer expiry, start-by deadline, Execution Lease) and ends at ``accept_result``;
* the mirror writes one log object per Event (one folder fsync per batch) and hands the Events
  to the in-process "gateway", which pushes each agent its Events as one ``deliver`` signal per
  batch (one journal object per batch) to its ``BenchAgentWorkflow`` (the AgentWorkflow's
  place) in the agents namespace, and the ``submit`` Events to the Coordinator;
* the agent workflow accepts each offer with an ``accept`` activity (which sends the accept
  Update) and, once accepted, runs the item with a ``run`` activity on the agent's own task
  queue, at most ``--slots`` at a time; the run sends ``start``, stores a checkpoint and sends
  ``checkpoint`` (the renewal naming it), stores an Artifact and sends ``publish``, then
  ``usage`` and ``submit``, the Commands the product's run sends in ``bench-agents``;
* the Coordinator offers item ``n`` of the run to agent ``n mod --agents`` (each Mission's
  offers in order, Missions concurrently; ``--one-at-a-time``: each only once the one before is
  verified) and sends ``accept_result`` when it is handed the item's ``submit`` Event.

Before the clock: the workflows, Workers and ``authorize`` Updates (children started). Timed,
as in ``bench-agents``: from the first offer sent to the last ``accept_result`` answered; CPU
per WorkItem of this process and of the Temporal server over that window. "offer -> accepted"
comes from the Group workflow's own times (``workflow.now()`` in the two handlers), as the
product's Events' ``occurredAt``.

Left out because they are this implementation's choices, not the design's (so the result is a
lower bound): sealing each child signal in an activity, queries (the run's WorkItem view, the
capability token's two requests, the preemption check, the Context Package's reads), the
gateway waiting for an agent Command's Events to be mirrored before it answers, the gateway's
log reads, a ``deliver`` signal per Group and delivery of Events the agent does not need,
schedule disclosures, the tool ledger. ``--deliver`` chooses what the gateway pushes to an
agent: ``offers`` (default, the least: the offers naming it, under an attention filter),
``own`` (every Event of its own items) or ``all`` (every Event of every Group it is a member
of, as the product delivers). ``--no-writes`` leaves out the durable writes (log, journal,
checkpoint, Artifact). Two options strip the floor further, below what the product does:
``--mirror-delay`` makes the Group wait before each mirror call (fewer, larger batches, one
timer each) and ``--no-search-attributes`` drops the children's upserts. The report also
gives the cores this process and the server use idle (the Workers' polls) and the cores other
processes took during the window, to judge how shared the machine was. If a figure of this
floor misses a target, no implementation of this design reaches that target on this machine,
whatever its protocol code costs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from benchmarks.agent_runtime import add_workload_arguments, percentile
from benchmarks.group_commands import CpuMeter, versions
from mwp.contracts.mission import MIRROR_BATCH_LIMIT
from mwp.contracts.names import WORK_ITEM_STATE
from mwp.dev.stack import DevStack, ensure_namespace, free_port, stack_config
from mwp.stores.objects import FolderObjectStore

GROUP_TASK_QUEUE = "mwp-bench-work-item-group"
AGENT_TASK_QUEUE = "mwp-bench-work-item-agent"
AGENTS_NAMESPACE = "mwp-bench-agents"
# The Commands a run sends, in order: those of the product's run in ``bench-agents``.
RUN_COMMANDS = ("start", "checkpoint", "publish", "usage", "submit")
# The Commands whose Event changes what the item's child holds (state, timers), so the Group
# signals it; "authorize" starts it. Their timers: None, or the lease (seconds) if "lease".
CHILD_TIMERS: dict[str, float | str | None] = {
    "authorize": None,
    "offer": 3600.0,  # the offer's expiry
    "accept_offer": 3600.0,  # the start-by deadline
    "start": "lease",
    "checkpoint": "lease",  # the renewal moves the lease's expiry
    "submit": None,
    "accept_result": None,
}
FINAL = "accept_result"
OBJECT = b"{}" * 512  # about the size of a signed Event, a checkpoint, a small Artifact
TIMEOUT = timedelta(seconds=60)


@dataclass(frozen=True)
class Command:
    work_item: str
    kind: str
    agent: str  # the item's candidate (what the offer names)


@dataclass(frozen=True)
class Event:
    group: str  # the Group workflow's ID
    sequence: int
    work_item: str
    kind: str
    agent: str


@dataclass(frozen=True)
class Transition:
    state: str
    timer_seconds: float | None
    final: bool
    visible: bool  # upsert the state as a search attribute (the Temporal UI's WorkItem list)


@dataclass(frozen=True)
class GroupInput:
    lease_seconds: float
    mirror_delay: float  # 0: batch what accumulated while the last call ran, as the product
    visible: bool


@dataclass
class GroupReport:
    times: dict[str, dict[str, float]]  # WorkItem -> Command kind -> workflow time (epoch s)
    child_signals: int


@workflow.defn(name="BenchWorkItemWorkflow")
class BenchWorkItemWorkflow:
    """Holds its item's state as a search attribute and the timer the state needs."""

    @workflow.init
    def __init__(self, first: Transition) -> None:
        self._state = first
        self._changed = False

    @workflow.run
    async def run(self, first: Transition) -> str:
        self._publish()
        while not self._state.final:
            self._changed = False
            seconds = self._state.timer_seconds
            try:
                await workflow.wait_condition(
                    lambda: self._changed,
                    timeout=None if seconds is None else timedelta(seconds=seconds),
                )
            except TimeoutError:
                # The product reports a due timer to its Mission; none falls due here.
                await workflow.wait_condition(lambda: self._changed)
        return self._state.state

    @workflow.signal
    def transition(self, transition: Transition) -> None:
        self._state = transition
        self._changed = True
        self._publish()

    def _publish(self) -> None:
        if self._state.visible:
            workflow.upsert_search_attributes([WORK_ITEM_STATE.value_set(self._state.state)])


@workflow.defn(name="BenchGroupWorkflow")
class BenchGroupWorkflow:
    """Answers every Command at once; syncs the children and mirrors beside the handlers."""

    @workflow.init
    def __init__(self, input: GroupInput) -> None:
        self._input = input
        self._sequence = 0
        self._outbox: list[Event] = []
        self._newest: dict[str, Transition] = {}
        self._children: dict[str, workflow.ChildWorkflowHandle[Any, str]] = {}
        self._syncing: set[str] = set()
        self._resync: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._report = GroupReport({}, 0)
        self._finished = False

    @workflow.run
    async def run(self, input: GroupInput) -> GroupReport:
        mirror = asyncio.create_task(self._mirror())
        await workflow.wait_condition(
            lambda: self._finished and workflow.all_handlers_finished() and not self._syncing
        )
        await mirror
        return self._report

    @workflow.update
    def command(self, command: Command) -> int:
        self._sequence += 1
        item, kind = command.work_item, command.kind
        self._report.times.setdefault(item, {})[kind] = workflow.now().timestamp()
        group = workflow.info().workflow_id
        self._outbox.append(Event(group, self._sequence, item, kind, command.agent))
        if kind in CHILD_TIMERS:
            timer = CHILD_TIMERS[kind]
            seconds = self._input.lease_seconds if timer == "lease" else timer
            assert seconds is None or isinstance(seconds, float)
            self._newest[item] = Transition(kind, seconds, kind == FINAL, self._input.visible)
            self._sync(item)
        return self._sequence

    @workflow.query
    def settled(self) -> bool:
        return not (self._syncing or self._outbox)

    @workflow.signal
    def finish(self) -> None:
        self._finished = True

    def _sync(self, item: str) -> None:
        if item in self._syncing:
            self._resync.add(item)  # the signal in flight is followed by the newest state
            return
        self._syncing.add(item)
        task = asyncio.create_task(self._follow(item))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _follow(self, item: str) -> None:
        try:
            while True:
                self._resync.discard(item)
                await self._send(item, self._newest[item])
                if item not in self._resync:
                    break
            if self._newest[item].final:
                await self._children.pop(item)  # its completion is reported to this run
        finally:
            self._syncing.discard(item)

    async def _send(self, item: str, transition: Transition) -> None:
        child = self._children.get(item)
        if child is None:
            self._children[item] = await workflow.start_child_workflow(
                BenchWorkItemWorkflow.run,
                transition,
                id=f"{workflow.info().workflow_id}/{item}",
                task_queue=GROUP_TASK_QUEUE,
                parent_close_policy=workflow.ParentClosePolicy.ABANDON,
            )
            return
        self._report.child_signals += 1
        await child.signal(BenchWorkItemWorkflow.transition, transition)

    async def _mirror(self) -> None:
        while True:
            await workflow.wait_condition(lambda: bool(self._outbox) or self._finished)
            if not self._outbox:
                return
            if self._input.mirror_delay:
                await workflow.sleep(self._input.mirror_delay)  # a larger batch, for a timer
            batch = self._outbox[:MIRROR_BATCH_LIMIT]
            await workflow.execute_activity(
                "mirror", batch, start_to_close_timeout=timedelta(seconds=20)
            )
            del self._outbox[: len(batch)]


@workflow.defn(name="BenchAgentWorkflow")
class BenchAgentWorkflow:
    """Accepts each offer it is delivered; runs accepted items, at most ``slots`` at once."""

    @workflow.init
    def __init__(self, agent: str, slots: int) -> None:
        self._agent = agent
        self._slots = slots
        self._offers: list[Event] = []
        self._ready: list[Event] = []
        self._running = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._finished = False

    @workflow.run
    async def run(self, agent: str, slots: int) -> None:
        while True:
            await workflow.wait_condition(
                lambda: bool(self._offers) or self._can_start() or self._done()
            )
            if self._done():
                return
            offers, self._offers = self._offers, []
            for offer in offers:
                self._spawn(self._accept(offer))
            while self._can_start():
                self._running += 1
                self._spawn(self._run(self._ready.pop(0)))

    @workflow.signal
    def deliver(self, events: list[Event]) -> None:
        self._offers += [e for e in events if e.kind == "offer" and e.agent == self._agent]

    @workflow.signal
    def finish(self) -> None:
        self._finished = True

    def _can_start(self) -> bool:
        return bool(self._ready) and self._running < self._slots

    def _done(self) -> bool:
        return self._finished and not (self._tasks or self._offers or self._ready)

    def _spawn(self, coroutine: Any) -> None:
        task: asyncio.Task[None] = asyncio.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _accept(self, offer: Event) -> None:
        await workflow.execute_activity("accept", offer, start_to_close_timeout=TIMEOUT)
        self._ready.append(offer)

    async def _run(self, item: Event) -> None:
        try:
            await workflow.execute_activity(
                "run",
                item,
                start_to_close_timeout=timedelta(minutes=10),
                heartbeat_timeout=TIMEOUT,  # the lease's heartbeats (none in a run this short)
            )
        finally:
            self._running -= 1


@dataclass
class Counts:
    """Temporal operations this process asked for, for the per-WorkItem summary."""

    updates: int = 0
    mirror_batches: int = 0
    deliveries: int = 0
    delivered: int = 0
    accepts: int = 0
    runs: int = 0


class Floor:
    """The activities, the in-process gateway and the Group side's Commands."""

    def __init__(self, authority: Client, folder: Path | None, deliver: str) -> None:
        self.authority = authority
        self.store = FolderObjectStore(folder) if folder is not None else None
        self.deliver = deliver
        self.members: dict[str, set[str]] = {}  # Group -> agents with an item in it
        self.queues: dict[str, asyncio.Queue[Event]] = {}  # agent -> Events to push
        self.submitted: asyncio.Queue[Event] = asyncio.Queue()  # for the Coordinator
        self.pushing = 0  # deliveries being journaled or signalled
        self.counts = Counts()

    async def send(self, item: Event, kind: str) -> None:
        handle = self.authority.get_workflow_handle(item.group)
        self.counts.updates += 1
        await handle.execute_update(
            BenchGroupWorkflow.command, Command(item.work_item, kind, item.agent)
        )

    async def write(self, key: str, size: int = 1) -> None:
        if self.store is not None:
            await asyncio.to_thread(self.store.put_if_absent, key, OBJECT * size)

    @activity.defn(name="mirror")
    async def mirror(self, batch: list[Event]) -> None:
        self.counts.mirror_batches += 1
        if self.store is not None:
            objects = [(f"log/{e.group}/{e.sequence:012d}", OBJECT) for e in batch]
            await asyncio.to_thread(self.store.put_many_if_absent, objects)
        self.publish(batch)  # the mirror's hint; the gateway has the Events at hand

    @activity.defn(name="accept")
    async def accept(self, offer: Event) -> None:
        self.counts.accepts += 1
        await self.send(offer, "accept_offer")

    @activity.defn(name="run")
    async def run(self, item: Event) -> None:
        self.counts.runs += 1
        await self.send(item, "start")
        lookup(item.work_item)  # the capability's one tool call, inside the run as in the product
        await self.write(f"checkpoints/{item.group}/{item.work_item}")
        await self.send(item, "checkpoint")
        await self.write(f"artifacts/{item.group}/{item.work_item}")
        for kind in RUN_COMMANDS[2:]:
            await self.send(item, kind)

    def publish(self, events: Sequence[Event]) -> None:
        for event in events:
            for agent in self.recipients(event):
                self.queues[agent].put_nowait(event)
            if event.kind == "submit":
                self.submitted.put_nowait(event)

    def recipients(self, event: Event) -> set[str]:
        if self.deliver == "all":
            return self.members[event.group]
        if self.deliver == "own" and event.kind != "authorize":
            return {event.agent}
        return {event.agent} if event.kind == "offer" else set()

    async def push(self, agents: Client, agent: str, workflow_id: str) -> None:
        """The gateway's delivery to one agent: what queued meanwhile goes as one signal."""
        handle = agents.get_workflow_handle(workflow_id)
        queue = self.queues[agent]
        while True:
            batch = [await queue.get()]
            while not queue.empty():
                batch.append(queue.get_nowait())
            self.pushing += 1
            try:
                journal = f"journal/{agent}/{batch[0].group}-{batch[0].sequence}"
                await self.write(journal, len(batch))
                await handle.signal(BenchAgentWorkflow.deliver, batch)
            finally:
                self.pushing -= 1
            self.counts.deliveries += 1
            self.counts.delivered += len(batch)

    def idle(self) -> bool:
        return self.pushing == 0 and all(q.empty() for q in self.queues.values())


def lookup(goal: str) -> dict[str, str]:
    return {"goal": goal}


@dataclass
class Item:
    group: str
    work_item: str
    agent: str
    offered_at: float = 0.0  # wall clock just before the offer was sent
    verified_at: float = 0.0  # wall clock when accept_result was answered
    verified: asyncio.Event = field(default_factory=asyncio.Event)


class Coordinator:
    """Offers every item; accepts each result when the gateway hands it the submission."""

    def __init__(self, floor: Floor, items: Sequence[Item]) -> None:
        self.floor = floor
        self.items = {item.work_item: item for item in items}

    async def authorize(self, items: Sequence[Item]) -> None:
        for item in items:
            await self.floor.send(self._event(item), "authorize")

    async def offer(self, items: Sequence[Item], *, one_at_a_time: bool) -> None:
        for item in items:
            item.offered_at = time.time()
            await self.floor.send(self._event(item), "offer")
            if one_at_a_time:
                await item.verified.wait()

    async def follow(self) -> None:
        pending: set[asyncio.Task[None]] = set()
        while True:
            event = await self.floor.submitted.get()
            task = asyncio.create_task(self._accept_result(self.items[event.work_item]))
            pending.add(task)
            task.add_done_callback(pending.discard)

    async def _accept_result(self, item: Item) -> None:
        await self.floor.send(self._event(item), "accept_result")
        item.verified_at = time.time()
        item.verified.set()

    @staticmethod
    def _event(item: Item) -> Event:
        return Event(item.group, 0, item.work_item, "", item.agent)


@dataclass
class Outcome:
    items: list[Item]
    seconds: float
    process_cpu: float
    server_cpu: float
    reports: list[GroupReport]
    counts: Counts
    load: tuple[float, float]  # the 1-minute load average before and after
    machine_cpu: float  # CPU seconds every process of the machine used in the window
    idle: tuple[float, float] = (0.0, 0.0)  # cores of this process and the server, idle

    @property
    def verified(self) -> int:
        return sum(1 for item in self.items if item.verified_at)


async def run(args: argparse.Namespace, state_dir: Path) -> Outcome:
    config = stack_config(state_dir, port=free_port(), headless=True)
    meter = CpuMeter(None)
    async with DevStack(config) as stack, AsyncExitStack() as workers:
        meter.server_pid = stack.server_pid
        await ensure_namespace(stack.client.service_client, AGENTS_NAMESPACE)
        agents = await Client.connect(stack.address, namespace=AGENTS_NAMESPACE)
        folder = None if args.no_writes else state_dir / "objects"
        floor = Floor(stack.client, folder, args.deliver)
        await workers.enter_async_context(
            Worker(
                stack.client,
                task_queue=GROUP_TASK_QUEUE,
                workflows=[BenchGroupWorkflow, BenchWorkItemWorkflow],
                activities=[floor.mirror],
                workflow_runner=UnsandboxedWorkflowRunner(),
                graceful_shutdown_timeout=timedelta(seconds=2),
            )
        )
        agent_ids = [f"bench-agent-{n}" for n in range(args.agents)]
        workflow_ids = {a: f"bench-agent/{a}/{uuid.uuid4()}" for a in agent_ids}
        for n, agent in enumerate(agent_ids):  # each agent's own task queue and Worker
            await workers.enter_async_context(
                Worker(
                    agents,
                    task_queue=f"{AGENT_TASK_QUEUE}-{n}",
                    workflows=[BenchAgentWorkflow],
                    activities=[floor.accept, floor.run],
                    workflow_runner=UnsandboxedWorkflowRunner(),
                    graceful_shutdown_timeout=timedelta(seconds=2),
                )
            )
            floor.queues[agent] = asyncio.Queue()
            await agents.start_workflow(
                BenchAgentWorkflow.run,
                args=[agent, args.slots],
                id=workflow_ids[agent],
                task_queue=f"{AGENT_TASK_QUEUE}-{n}",
            )
        groups = [f"bench-group/{uuid.uuid4()}" for _ in range(args.missions)]
        for group in groups:
            await stack.client.start_workflow(
                BenchGroupWorkflow.run,
                GroupInput(
                    float(args.lease_seconds), args.mirror_delay, not args.no_search_attributes
                ),
                id=group,
                task_queue=GROUP_TASK_QUEUE,
            )
        per = args.items_per_mission
        missions = [
            [
                Item(group, f"item-{m}-{k}", agent_ids[(m * per + k) % args.agents])
                for k in range(per)
            ]
            for m, group in enumerate(groups)
        ]
        for mission in missions:
            floor.members[mission[0].group] = {item.agent for item in mission}
        items = [item for mission in missions for item in mission]
        coordinator = Coordinator(floor, items)
        background = [
            asyncio.create_task(floor.push(agents, a, workflow_ids[a])) for a in agent_ids
        ]
        background.append(asyncio.create_task(coordinator.follow()))
        try:
            await asyncio.gather(*(coordinator.authorize(m) for m in missions))
            await settle(stack.client, groups, floor)
            idle = await idle_cores(meter, args.idle_seconds)
            outcome = await timed(args, meter, coordinator, missions, floor)
            outcome.idle = idle
            for group in groups:
                await stack.client.get_workflow_handle(group).signal(BenchGroupWorkflow.finish)
            for workflow_id in workflow_ids.values():
                await agents.get_workflow_handle(workflow_id).signal(BenchAgentWorkflow.finish)
            async with asyncio.timeout(60):
                for group in groups:
                    handle = stack.client.get_workflow_handle_for(BenchGroupWorkflow.run, group)
                    outcome.reports.append(await handle.result())
        finally:
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
    return outcome


async def settle(client: Client, groups: Sequence[str], floor: Floor) -> None:
    """Wait until every child is started and every authorize Event mirrored and pushed."""
    async with asyncio.timeout(60):
        while True:
            answers = [
                await client.get_workflow_handle(g).query(BenchGroupWorkflow.settled)
                for g in groups
            ]
            if all(answers) and floor.idle():
                return
            await asyncio.sleep(0.1)


async def idle_cores(meter: CpuMeter, seconds: float) -> tuple[float, float]:
    """Cores this process and the server use with every workflow waiting (the Workers' polls,
    the server's own housekeeping): the part of the timed CPU that is not per WorkItem."""
    process, server = meter.read()
    await asyncio.sleep(seconds)
    process_after, server_after = meter.read()
    return (process_after - process) / seconds, (server_after - server) / seconds


async def timed(
    args: argparse.Namespace,
    meter: CpuMeter,
    coordinator: Coordinator,
    missions: Sequence[Sequence[Item]],
    floor: Floor,
) -> Outcome:
    floor.counts = Counts()
    load = os.getloadavg()[0]
    machine = machine_busy()
    process, server = meter.read()
    started = time.perf_counter()
    try:
        async with asyncio.timeout(args.timeout):
            if args.one_at_a_time:
                for mission in missions:
                    await coordinator.offer(mission, one_at_a_time=True)
            else:
                await asyncio.gather(*(coordinator.offer(m, one_at_a_time=False) for m in missions))
            await asyncio.gather(*(item.verified.wait() for m in missions for item in m))
    except TimeoutError:
        print(f"TIMEOUT after {args.timeout} s", flush=True)
    seconds = time.perf_counter() - started
    process_after, server_after = meter.read()
    machine = machine_busy() - machine
    items = [item for mission in missions for item in mission]
    verified = [item for item in items if item.verified_at]
    if len(verified) == len(items):
        seconds = max(i.verified_at for i in items) - min(i.offered_at for i in items)
    return Outcome(
        items,
        seconds,
        process_after - process,
        server_after - server,
        [],
        floor.counts,
        (load, os.getloadavg()[0]),
        machine,
    )


def machine_busy() -> float:
    """CPU seconds the whole machine has been busy (Linux ``/proc/stat``): what other work
    took beside this benchmark shows how shared the machine was."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def stages(outcome: Outcome) -> dict[str, list[float]]:
    """Milliseconds per verified item: the Group workflow's times, and the wall clock."""
    times: dict[str, dict[str, float]] = {}
    for report in outcome.reports:
        times |= report.times
    found: dict[str, list[float]] = {
        "offer -> accepted (workflow times)": [],
        "accepted -> started": [],
        "started -> submitted": [],
        "submitted -> verified (answered)": [],
        "offer sent -> verified (wall clock)": [],
    }
    for item in outcome.items:
        t = times.get(item.work_item, {})
        if not item.verified_at or not {"offer", "accept_offer", "start", "submit"} <= t.keys():
            continue
        values = (
            t["accept_offer"] - t["offer"],
            t["start"] - t["accept_offer"],
            t["submit"] - t["start"],
            item.verified_at - t["submit"],
            item.verified_at - item.offered_at,
        )
        for name, value in zip(found, values, strict=True):
            found[name].append(1000 * value)
    return found


def report(args: argparse.Namespace, outcome: Outcome) -> None:
    verified = outcome.verified
    per = 1000 / max(1, verified)
    process, server = outcome.process_cpu * per, outcome.server_cpu * per
    writes = "without" if args.no_writes else "with"
    mode = "one at a time" if args.one_at_a_time else "Missions concurrently"
    print(f"{versions()}; {os.cpu_count()} cores")
    print(
        f"{args.missions} Missions x {args.items_per_mission} WorkItems, {args.agents} agents x "
        f"{args.slots} slots, {mode}; deliver {args.deliver}, {writes} the durable writes; "
        f"load average {outcome.load[0]:.2f} at the start, {outcome.load[1]:.2f} at the end"
    )
    rate = verified / outcome.seconds if outcome.seconds else 0.0
    print(
        f"verified {verified}/{len(outcome.items)} WorkItems in {outcome.seconds:.1f} s: "
        f"{rate:.2f} WorkItems/s"
    )
    print(
        f"CPU ms per WorkItem: process {process:.0f}, Temporal server {server:.0f}, "
        f"in all {process + server:.0f}"
    )
    ours = outcome.process_cpu + outcome.server_cpu
    others = max(0.0, outcome.machine_cpu - ours)
    print(
        f"cores busy in the window: this benchmark {ours / outcome.seconds:.2f}, "
        f"other processes {others / outcome.seconds:.2f}; idle before it: process "
        f"{outcome.idle[0]:.3f}, server {outcome.idle[1]:.3f}"
    )
    print(f"{'per item, ms':<40} {'p50':>7} {'p95':>7} {'max':>7}")
    for name, values in stages(outcome).items():
        print(
            f"{name:<40} {percentile(values, 0.5):>7.1f} {percentile(values, 0.95):>7.1f} "
            f"{max(values, default=float('nan')):>7.1f}"
        )
    c, n = outcome.counts, max(1, verified)
    signals = sum(r.child_signals for r in outcome.reports)
    print(
        f"per WorkItem (timed): {c.updates / n:.1f} Updates, {signals / n:.1f} child signals "
        f"(besides the start), {c.mirror_batches / n:.2f} mirror batches, "
        f"{c.deliveries / n:.2f} deliver signals ({c.delivered / n:.1f} Events), "
        f"{c.accepts / n:.1f} accept and {c.runs / n:.1f} run activities"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_workload_arguments(parser)
    parser.add_argument(
        "--one-at-a-time",
        action="store_true",
        help="offer each WorkItem only once the one before is verified (latency, no queueing)",
    )
    parser.add_argument(
        "--deliver",
        choices=("offers", "own", "all"),
        default="offers",
        help="what the gateway pushes to an agent (see the module docstring)",
    )
    parser.add_argument(
        "--no-writes", action="store_true", help="no folder writes (log, journal, checkpoint...)"
    )
    parser.add_argument(
        "--mirror-delay",
        type=float,
        default=0.0,
        help="seconds the Group waits before each mirror call, for larger batches (0: none)",
    )
    parser.add_argument(
        "--no-search-attributes",
        action="store_true",
        help="the children upsert no search attribute (the WorkItems not listed in the UI)",
    )
    parser.add_argument(
        "--idle-seconds", type=float, default=3.0, help="idle CPU measured before the clock"
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds until failure")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mwp-bench-work-item-floor-") as state_dir:
        outcome = asyncio.run(run(args, Path(state_dir)))
    report(args, outcome)
    complete = outcome.verified == len(outcome.items)
    if not complete:
        print(f"FAILED: {outcome.verified}/{len(outcome.items)} WorkItems verified")
    sys.stdout.flush()
    os._exit(0 if complete else 1)  # the Temporal SDK can crash at interpreter exit (DESIGN.md §5)


if __name__ == "__main__":
    main()
