"""The demo's scenes, each recording the named checks it proves (see `mwp.demo.run`): in order,
but for those that need neither the other's outcome nor a Group left quiet, which run beside
the main line (`mwp.demo.beside`) while it waits for the work."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle

from mwp.agent.signals import SchedulerSignals
from mwp.client import Identity, KeyStore, MwpClient, connect
from mwp.client.missions import MissionHandle
from mwp.client.state_dir import organization_id_of
from mwp.contracts.agent import (
    QUERY_CURSORS,
    QUERY_PREEMPTION_REQUESTED,
    QUERY_STATUS,
    PolicyChange,
    PreemptionRequest,
    agent_workflow_id,
)
from mwp.core.errors import MwpError
from mwp.core.group import OWNERSHIP_EXPIRED_KIND
from mwp.core.trust.registry import RegistryEvidence
from mwp.demo import cast, knowledge, proofs
from mwp.demo.beside import Aside, Beside
from mwp.demo.console_driver import ConsoleSession
from mwp.demo.groups import (
    GroupEvents,
    awaits_approval,
    mirrored,
    proof,
    read_log,
    settled_for_approval,
    verified,
)
from mwp.demo.human import DrivenOwner, Owner, PersonAtConsole
from mwp.demo.isolation import prove_credentials, prove_isolation
from mwp.demo.setup import (
    CHANGES,
    HOTFIX,
    LOG_POLL_SECONDS,
    DemoStoppedError,
    ProofOfConcept,
    in_state,
    logged_until,
    owned_by,
    until,
)
from mwp.dev.stack import DEFAULT_AGENTS_NAMESPACE as AGENTS_NAMESPACE
from mwp.workers.agent import release_sticky_queue

Json = dict[str, Any]
# The gateway is down this long, then forked again from the warm launcher (listening about
# 0.1 s later): the agents' reconnect tries (0.1, 0.25, 0.48 and 0.81 s after the loss,
# mwp.agent.reconnect) find it on the third or fourth.
DISCONNECTED_SECONDS = 0.3
STARTED = frozenset({"active", "submitted", "verified"})
CHILD_CREATED = "mission.child.created"
# How long a Mission awaiting Approval may take to show its Coordinator's last Context Package.
SETTLED_SECONDS = 3.0
# How long the restarted tester's Scheduler may take to reach the revocation of the dead
# runtime's lease before its status is read anyway (and its check then fails).
REBUILD_SECONDS = 30.0


async def play(poc: ProofOfConcept) -> None:
    check = poc.report.check
    client = await poc.start()
    full, small = await poc.missions(client)  # while the runtimes start
    await poc.ready()
    knowledge.allow_reuse(poc, small)  # the operators' Knowledge Reuse Policy

    async with Beside(poc) as beside:
        # The failures injected into the full Mission's runs, each at its moment: the
        # Coordinator dies once the implementation runs, the reviewer mid-review, and the
        # integration is preempted.
        expiring = beside.start(lambda p: _lease_expiry(p, full))
        replacing = beside.start(lambda p: _coordinator_failure(p, full))
        preempting = beside.start(lambda p: _preemption(p, full))

        # The Worker restart and the knowledge reuse (`_worker_restart`); the isolation and
        # credential checks, once what they ask about is there (they open Sessions through the
        # gateway: done before it goes down).
        restarting = beside.start(lambda p: _worker_restart(p, client, small, full))
        isolated = beside.start(lambda p: _isolation(p, client, small, full))
        replaced = await replacing.done()

        await logged_until(
            poc, "the full Mission to await Approval", lambda logged: awaits_approval(logged(full))
        )
        # Beside the console's reads and change request, until the small Mission's approval.
        failures = beside.start(lambda p: _protocol_failures(p, client, small, full, replaced))
        owner = KeyStore.in_state_dir(poc.state).load("human-ada")
        async with ConsoleSession(poc.console_url, owner) as console:
            await _console_reads(poc, console, owner, full)
            human = _owner(poc, console)
            asked = await human.decide(full, "request_changes", CHANGES)
            check(
                "human.change_request",
                asked.events == ["mission.changes_requested"] and asked.key_id == owner.key_id,
                "the owner's change request, signed with the owner's key in the console, is "
                "accepted",
                events=asked.events,
                **asked.proof,
            )
            # The same import sent unapproved into the full Mission's Group, now active again
            # and held there (its revision waits at its cue until the outage), so that the
            # Group refuses it for its approval, not for the Mission's state.
            restart = await restarting.done()
            hotfix, reused = restart.hotfix, restart.reused
            refusing = beside.start(lambda p: knowledge.refuse_unapproved(p, reused, full))
            # Beside the approvals below (the console needs no gateway): the outage, once the
            # isolation scene's Sessions through the gateway and those imports are done.
            outage = beside.start(lambda p: _outage(p, isolated, refusing))
            await logged_until(
                poc,
                "the small Mission and the hotfix to await Approval",
                lambda logged: awaits_approval(logged(small)) and awaits_approval(logged(hotfix)),
            )
            await _console_listing(poc, console, full, small, hotfix)
            await failures.done()
            approved_small = await human.decide(small, "approve")
            approved_hotfix = await human.decide(hotfix, "approve")
            check(
                "console.approval",
                approved_small.events == approved_hotfix.events == ["mission.approved"]
                and approved_small.key_id == approved_hotfix.key_id == owner.key_id,
                "the small Mission and the hotfix are approved from the console",
                events=[approved_small.events, approved_hotfix.events],
                decisions=[approved_small.proof, approved_hotfix.proof],
            )
            # Beside the revision and the outage, needing no gateway: the approved Missions'
            # logs, the small one's archived first (once the isolation scene read through it).
            closed = {"small": small, "hotfix": hotfix, "child": await isolated.done()}
            archived = beside.start(lambda p: _archive_and_verify(p, client, closed))
            revising, cut = await outage.done()
            reading = beside.start(lambda p: _reads_of_the_fix(p, reused, full))
            await logged_until(
                poc,
                "the revised Mission",
                lambda logged: (
                    awaits_approval(logged(full))
                    and bool(logged(full).of("mission.changes_requested"))
                ),
            )
            approved = await human.decide(full, "approve")
            check(
                "human.approves_revision",
                approved.events == ["mission.approved"] and approved.key_id == owner.key_id,
                "the owner approves the revised Mission in the console",
                events=approved.events,
                **approved.proof,
            )
        await refusing.done()
        logs = await archived.done()
        await reading.done()

        expired = await expiring.done()
        preempted = await preempting.done()

    injected = proofs.Injected(
        killed=restart.killed,
        killed_at=restart.killed_at,
        tester_status=restart.queues,
        tester_rebuilt_to=restart.rebuilt_to,
        replaced=replaced,
        expired=expired,
        preempted=preempted,
        offline=revising,
        disconnection=cut,
        arrived_at=restart.arrived_at,
    )
    await _prove_from_logs(poc, client, full, logs, injected)
    await until("", lambda: in_state(full, "approved"), 5)


@dataclass(frozen=True)
class Restart:
    """What the Worker restart did, for the proofs: the item the tester ran when it was
    killed, when, its rebuilt status and the sequence it had applied then, when the hotfix
    arrived, the hotfix, and the fix it reused."""

    killed: str
    killed_at: float
    queues: str
    rebuilt_to: int
    arrived_at: float
    hotfix: MissionHandle
    reused: knowledge.Reused


async def _worker_restart(
    poc: ProofOfConcept, client: MwpClient, small: MissionHandle, full: MissionHandle
) -> Restart:
    """A Worker restart: the shared tester dies mid-run, holding a backlog of the small
    Mission's tests, and comes back with --replace. While it is down (its backlog cannot
    drain, so the arrival is never raced) an urgent hotfix Mission arrives: the Organization
    gives the hotfix's Group weight 4 on the tester and caps the small Group at one slot, and
    the hotfix's test takes a slot ahead of the small tests taken before it. Then knowledge
    publication: the hotfix reuses the small Mission's fix, approved for it alone."""
    running = await until(
        "the tester to run a WorkItem while it holds a backlog of the small Mission's tests",
        lambda: _running_with_backlog(small, full, "tester", 3),
    )
    tester = poc.process("tester")
    killed = tester.kill()
    killed_at = time.time()
    poc.report.out(f"killed the tester (PID {killed}) while it ran {running[0]['workItemId']}")
    # The policy changes below are workflow tasks: off the dead runtime's sticky queue, they
    # wait for the new runtime, not for the sticky timeout first (as its queries do).
    await release_sticky_queue(await _agents(poc), cast.agent_id("tester"))
    arrived_at = time.time()
    hotfix = await poc.create_mission(client, HOTFIX)
    poc.report.out(f"the hotfix Mission {hotfix.mission_id} arrives")
    await _set_policy(poc, "tester", small.group_id, weight=1, quota=1)
    await _set_policy(poc, "tester", hotfix.group_id, weight=4)
    tester.argv = [*tester.argv, "--replace"]
    tester.start()
    await tester.wait_for("Task queue", 90)
    # Its rebuilt queues (meanwhile the hotfix test starts). Its backlog's runs wait at their
    # first checkpoint until the status is read, however short the demo's steps.
    (rebuilt_to, queues), _ = await asyncio.gather(
        _rebuilt_status(poc, small, running[0]["workItemId"]),
        until("the hotfix test to start", lambda: _started(hotfix)),
    )
    poc.release("backlog")
    reused = await knowledge.import_fix(poc, small, hotfix)
    await _set_policy(poc, "tester", small.group_id, weight=1)  # the cap lifted
    return Restart(
        running[0]["workItemId"], killed_at, queues, rebuilt_to, arrived_at, hotfix, reused
    )


async def _reads_of_the_fix(
    poc: ProofOfConcept, reused: knowledge.Reused, full: MissionHandle
) -> None:
    """The tester's reads of the imported fix, once its last work (the revision's tests) is
    submitted: its HELLO here opens a new Session, which ends its runtime's."""

    def tested(logged: Callable[[MissionHandle], GroupEvents]) -> bool:
        events = logged(full).events
        asked = next(
            (e["sequence"] for e in events if e["kind"] == "mission.changes_requested"), None
        )
        return asked is not None and any(
            e["kind"] == "work.submitted"
            and e["actor"]["id"] == cast.agent_id("tester")
            and e["sequence"] > asked
            for e in events
        )

    await logged_until(poc, "the tester to submit the revision's tests", tested)
    await knowledge.prove_reuse(poc, reused, full)


async def _lease_expiry(poc: ProofOfConcept, full: MissionHandle) -> str:
    """The reviewer dies mid-review and stays down; its lease runs out and the Coordinator
    offers the review to the analyst, who resumes from the last checkpoint. The review."""
    expired = await poc.held(
        "review", "the reviewer to checkpoint the code review", lambda: _review_lost(poc, full)
    )
    poc.report.out(f"killed the reviewer (PID {poc.process('reviewer').kill()}) in {expired}")
    poc.release("review")
    return expired


def _review_lost(poc: ProofOfConcept, full: MissionHandle) -> str | None:
    """Why the reviewer's run will never hold at its cue: its short lease ran out before its
    first checkpoint (a machine far slower than the demo allows for), or None."""
    if poc.logged(full).of(OWNERSHIP_EXPIRED_KIND):
        return "an ownership in the full Mission expired before the reviewer's first checkpoint"
    return None


async def _coordinator_failure(poc: ProofOfConcept, full: MissionHandle) -> Json:
    """The Coordinator dies once the full Mission's implementation has started (it restarts
    while the developer works, which waits on no Coordinator, and before the hotfix comes);
    the MissionOwner appoints it again and it restarts. The assignment."""
    await logged_until(
        poc,
        "the full Mission's implementation to start",
        lambda logged: _started_stage(logged(full), "implementation"),
    )
    lead = poc.process("lead")
    lead_killed = lead.kill()
    poc.report.out(f"killed the Coordinator (PID {lead_killed})")
    replaced = await _replace_coordinator(poc, full)
    lead.start()
    await lead.wait_for("Gateway", 90)
    return replaced


def _started_stage(events: GroupEvents, stage: str) -> bool:
    """Whether the full Mission's WorkItem of ``stage`` has started."""
    items = {
        e["workItemId"]
        for e in events.of("work.authorized")
        if e["payload"]["workItem"]["contract"]["goal"].startswith(cast.goal_of(stage, ""))
    }
    return any(e.get("workItemId") in items for e in events.of("work.started"))


async def _preemption(poc: ProofOfConcept, full: MissionHandle) -> str:
    """Safe checkpoint preemption: the developer's integration run is asked to stop at its
    next checkpoint, once it holds at its cue after the first (asked before that, it could
    stop at the first before the scene saw the request taken, and the scene waited forever).
    The integration."""
    preempted = await poc.held("integration", "the developer to checkpoint the integration")
    await _preempt(poc, "developer", full.group_id, preempted)
    await until(
        "the developer's runtime to take the preemption request",
        lambda: _preemption_requested(poc, "developer", full.group_id, preempted),
    )
    poc.release("integration")
    poc.report.out(f"asked the developer to stop {preempted} at its next checkpoint")
    return preempted


async def _console_reads(
    poc: ProofOfConcept,
    console: ConsoleSession,
    owner: Identity,
    full: MissionHandle,
) -> None:
    """What the MissionOwner sees in the console before deciding on the full Mission."""
    check = poc.report.check
    logged = await console.log_in()
    check(
        "console.login",
        logged["principal"]["id"] == owner.principal.id,
        "the MissionOwner logged in by signing the console's challenge",
        principal=logged["principal"],
        keyId=owner.key_id,
    )
    detail = await console.mission(full.mission_id)
    criteria = [c for item in detail["workItems"] for c in item["criteria"]]
    check(
        "console.evidence_per_criterion",
        len(detail["workItems"]) == 5
        and bool(criteria)
        and all(c.get("evidence") for c in criteria),
        "the Mission page shows every WorkItem with Evidence for each criterion",
        workItems=len(detail["workItems"]),
        criteria=len(criteria),
    )
    artifacts = detail["artifacts"]
    read = [await console.artifact(full.mission_id, a["contentHash"]) for a in artifacts]
    check(
        "console.artifacts_hash_checked",
        len(read) == 5 and all(ok for _, _, ok in read),
        "every Artifact opens in the console, its bytes matching its content hash",
        artifacts=[named for _, named, _ in read],
    )


async def _console_listing(
    poc: ProofOfConcept,
    console: ConsoleSession,
    full: MissionHandle,
    small: MissionHandle,
    hotfix: MissionHandle,
) -> None:
    """The owner's Missions at a glance, once the small one and the hotfix await Approval (the
    full one is being revised, or awaits Approval again)."""
    listed = {m["missionId"]: m for m in await console.missions()}
    poc.report.check(
        "console.missions_at_a_glance",
        all(listed.get(m.mission_id, {}).get("awaitingApproval") for m in (small, hotfix))
        and bool(listed.get(full.mission_id, {}).get("state")),
        "the console lists the owner's Missions with their states: the small Mission and the "
        "hotfix as awaiting Approval, and the full one",
        missions={k: v["state"] for k, v in listed.items()},
    )


async def _isolation(
    poc: ProofOfConcept, client: MwpClient, small: MissionHandle, full: MissionHandle
) -> MissionHandle:
    """Context and credential isolation at the gateway (`mwp.demo.isolation`): the outsider's
    questions about the small Mission's Group once it holds an Artifact and a Context
    Package, the analyst's once its work is done (the child Mission's release notes and the
    code review verified: its HELLO here ends its runtime's Session). The child Mission the
    analyst worked in."""

    def asked_about(logged: Callable[[MissionHandle], GroupEvents]) -> bool:
        events = logged(small)
        return bool(events.of("artifact.published")) and any(
            e["kind"].endswith("context_package_published") for e in events.events
        )

    await logged_until(poc, "an Artifact and a Context Package of the small Mission", asked_about)
    await prove_isolation(poc, small)
    await logged_until(
        poc, "the small Mission's child", lambda logged: bool(logged(small).of(CHILD_CREATED))
    )
    child = await _child_of(client, small)
    await logged_until(
        poc,
        "the analyst's release notes and code review to be verified",
        lambda logged: verified(logged(child)) >= 1 and verified(logged(full)) >= 4,
    )
    await prove_credentials(poc, child, full, small)
    return child


async def _archive_and_verify(
    poc: ProofOfConcept, client: MwpClient, closed: dict[str, MissionHandle]
) -> dict[str, GroupEvents]:
    """The approved small Mission's Group archived, then the signed log of each approved
    Mission in ``closed`` verified; their Events, by name."""
    archived_at = await _archive(poc, closed["small"])
    evidence = await client.registry(organization_id_of(poc.state)).evidence()
    return {
        name: await _verified_log(
            poc, client, evidence, name, mission, archived_at if name == "small" else None
        )
        for name, mission in closed.items()
    }


def _owner(poc: ProofOfConcept, console: ConsoleSession) -> Owner:
    """Who decides in the console: the demo, or (``--interactive``) a person."""
    if not poc.interactive:
        return DrivenOwner(console)
    key_file = KeyStore.in_state_dir(poc.state).path("human-ada")
    return PersonAtConsole(poc.console_url, str(key_file.resolve()), poc.report.out)


async def _outage(
    poc: ProofOfConcept, isolated: Aside[MissionHandle], refusing: Aside[None]
) -> tuple[str, Json]:
    """The gateway dies while the developer's revision holds at its cue after its first
    checkpoint (cut off before it, the run has no checkpoint to buffer and fails instead of
    going on offline), once the isolation scene is done with it and the unapproved imports
    with the full Mission's revision held. The revision, the cut."""
    # Their checks join the report where the line awaits them.
    await asyncio.wait([isolated.task, refusing.task])
    revising = await poc.held("revision", "the developer to checkpoint the revision")
    return revising, await _disconnect(poc)


async def _disconnect(poc: ProofOfConcept) -> Json:
    """A temporary disconnection: the gateway process dies (every agent loses its Groups) and
    comes back a few seconds later; runs in flight go on offline and are reconciled."""
    gateway = poc.process("gateway")
    killed = gateway.kill()
    poc.report.out(f"killed the gateway (PID {killed}): every agent is cut off from its Groups")
    poc.release("revision")
    await asyncio.sleep(DISCONNECTED_SECONDS)
    gateway.start()
    await gateway.wait_for("Artifacts", 60)
    restarted = gateway.process.pid if gateway.process else None
    poc.report.out(f"the gateway serves again (PID {restarted})")
    return {"killed": killed, "restarted": restarted}


async def _child_of(client: MwpClient, mission: MissionHandle) -> MissionHandle:
    """The child Mission the Coordinator made of one of ``mission``'s WorkItems."""
    created = next(e for e in await mission.events_this_run() if e["kind"] == CHILD_CREATED)
    child = created["payload"]["childMission"]
    return MissionHandle(client, child["missionId"], child["groupId"])


async def _rebuilt_status(
    poc: ProofOfConcept, backlog: MissionHandle, killed: str
) -> tuple[int, str]:
    """The restarted tester's Scheduler status (what `mwp agent status --json` prints), read
    as soon as it has taken the Group's revocation of the dead runtime's lease on ``killed``
    (serving is not enough: until the new Session's Events reach it, its status is what the
    dead runtime left), and the sequence of ``backlog``'s log it had applied then. Read in
    this process, not by starting one: its backlog drains meanwhile. Waited for within a
    bound, not for ever: a rebuild that never gets there is what ``scheduling.queues_rebuilt``
    fails."""
    rebuilt_to = await _within(
        REBUILD_SECONDS, lambda: _revocation_taken(poc, "tester", backlog, killed)
    )
    status = await (await _agent_workflow(poc, "tester")).query(QUERY_STATUS)
    return rebuilt_to, json.dumps(status, indent=2, sort_keys=True)


async def _within(seconds: float, probe: Callable[[], Awaitable[Any]]) -> Any:
    """``probe``'s first truthy answer within ``seconds``, else its last answer."""
    deadline = time.monotonic() + seconds
    while not (found := await probe()) and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    return found


async def _revocation_taken(
    poc: ProofOfConcept, name: str, mission: MissionHandle, work_item_id: str
) -> int:
    """The sequence ``name``'s Scheduler has applied ``mission``'s log to, once that is at or
    past the Group's revocation of the lease ``name`` held on ``work_item_id`` (else 0)."""
    revoked = next(
        (
            e
            for e in await mission.events_this_run()
            if e["kind"] == proofs.LEASE_REVOKED and e.get("workItemId") == work_item_id
        ),
        None,
    )
    if revoked is None:
        return 0
    handle = await _agent_workflow(poc, name)
    cursors: Json = await handle.query(QUERY_CURSORS)
    applied = int((cursors.get(mission.group_id) or {}).get("sequence") or 0)
    return applied if applied >= int(revoked["sequence"]) else 0


async def _started(mission: MissionHandle) -> bool:
    """Whether a WorkItem of ``mission`` has started (or is done since)."""
    view = await mission.view()
    return any(w.get("state") in STARTED for w in view.get("workItems") or [])


async def _preempt(poc: ProofOfConcept, name: str, group_id: str, work_item_id: str) -> None:
    """What `mwp agent preempt` sends: a request sealed with the agent's own key."""
    await _signal(poc, name, PreemptionRequest(group_id, work_item_id))


async def _set_policy(
    poc: ProofOfConcept, name: str, group_id: str, *, weight: int, quota: int | None = None
) -> None:
    """What `mwp agent weight` sends: a Group's weight and slot quota for the agent."""
    await _signal(poc, name, PolicyChange(group_id, weight, quota))


async def _signal(poc: ProofOfConcept, name: str, message: Any) -> None:
    identity = KeyStore.in_state_dir(poc.state).load(f"agent-{name}")
    handle = await _agent_workflow(poc, name)
    await handle.signal(*SchedulerSignals(identity).signal(message))


async def _preemption_requested(
    poc: ProofOfConcept, name: str, group_id: str, work_item_id: str
) -> bool:
    handle = await _agent_workflow(poc, name)
    requested: bool = await handle.query(QUERY_PREEMPTION_REQUESTED, args=[group_id, work_item_id])
    return requested


async def _agent_workflow(poc: ProofOfConcept, name: str) -> WorkflowHandle[Any, Any]:
    return (await _agents(poc)).get_workflow_handle(agent_workflow_id(cast.agent_id(name)))


async def _agents(poc: ProofOfConcept) -> Client:
    if poc.address not in _AGENTS:  # one connection to the agents namespace for the run
        _AGENTS[poc.address] = await connect(poc.address, AGENTS_NAMESPACE)
    return _AGENTS[poc.address].temporal


_AGENTS: dict[str, MwpClient] = {}


async def _running_with_backlog(
    backlog: MissionHandle, other: MissionHandle, agent: str, count: int
) -> list[Json]:
    """The items ``agent`` runs, once it holds at least ``count`` of ``backlog``'s items
    (running or queued) and runs at least one item of either Mission."""
    active = await owned_by(backlog, agent, "active")
    held = len(active) + len(await owned_by(backlog, agent, "queued"))
    if held < count:
        return []
    return active or await owned_by(other, agent, "active")


async def _archive(poc: ProofOfConcept, mission: MissionHandle) -> int:
    """Signed archival of the approved small Mission: `mwp log archive` writes the Group's
    signed final snapshot and records it; the Group then takes no Command. The sequence of
    its archive Event, read from its log (each query of the closed Group costs a replay of its
    whole history: one is left, the proof that the refused Command appended nothing)."""
    owner = KeyStore.in_state_dir(poc.state).load("human-ada")
    epochs = await mission.epochs(owner.principal.id)  # while it is open
    answer = json.loads(await poc.processes.run("log", "archive", mission.group_id, "--json"))
    archived = answer.get("archived") or {}
    before = int(archived.get("sequence") or 0)
    logged = await _logged_through(poc, mission, before)
    recorded = [e["kind"] for e in logged if e["sequence"] >= before - 1]
    poc.report.check(
        "archival.signed_snapshot",
        recorded == ["group.snapshot.created", "group.archived"],
        "the approved small Mission's Group is archived: its signed final snapshot is "
        "stored and the Group records group.snapshot.created and group.archived",
        snapshot=answer.get("snapshot"),
        archived=archived,
        events=recorded,
    )
    code = await _refusal(mission.send(owner, "message.post", _TEXT, epochs=epochs))
    poc.report.check(
        "archival.refuses_commands",
        code not in ("accepted", "INTERNAL_ERROR") and await _last_sequence(poc, mission) == before,
        "the archived Group refuses every Command, typed, and appends nothing",
        code=code,
    )
    return before


async def _last_sequence(poc: ProofOfConcept, mission: MissionHandle) -> int:
    """The Group's last sequence: its workflow's, while it runs; once it has closed (an
    archived Group winds down once its log holds every Event, and appends nothing more), its
    log's, for a query of a closed workflow replays its whole history (2 s on a busy worker)."""
    handle = mission.client.temporal.get_workflow_handle(mission.workflow_id)
    if (await handle.describe()).status is WorkflowExecutionStatus.RUNNING:
        return await mission.sequence()
    events = await _logged_through(poc, mission, 0)
    return int(events[-1]["sequence"]) if events else 0


async def _logged_through(
    poc: ProofOfConcept, mission: MissionHandle, sequence: int, timeout: float = 30.0
) -> list[Json]:
    """The Group's Events in its log in the store, once it holds ``sequence`` (read on from
    where the scenes' waits left it, not again from the start)."""
    deadline = time.monotonic() + timeout
    while True:
        events = poc.logged(mission).events
        if (events and events[-1]["sequence"] >= sequence) or time.monotonic() > deadline:
            return list(events)
        await asyncio.sleep(LOG_POLL_SECONDS)


_TEXT: Json = {"content": [{"type": "text", "text": "After the archive."}]}


def _message(identity: Identity, mission: MissionHandle, text: str, **epochs: Any) -> Json:
    """A signed ``message.post`` of ``text`` in the Mission's Group, under ``epochs``."""
    content = {"content": [{"type": "text", "text": text}]}
    command: Json = identity.command("message.post", content, group_id=mission.group_id, **epochs)
    return command


def _refused(error: BaseException | None) -> str:
    return error.code.value if isinstance(error, MwpError) else repr(error)


async def _refusal(send: Any) -> str:
    try:
        await send
    except MwpError as error:
        return _refused(error)
    return "accepted"


async def _replace_coordinator(poc: ProofOfConcept, mission: MissionHandle) -> Json:
    """While the Coordinator is down the MissionOwner appoints it again: a new Coordinator
    Epoch and lease (spec 7.2), which the restarted Coordinator must work under."""
    owner = KeyStore.in_state_dir(poc.state).load("human-ada")
    answer = await mission.send(
        owner, "mission.assign_coordinator", {"agentId": cast.agent_id("lead")}
    )
    assigned: Json = next(
        e for e in answer["events"] if e["kind"] == "mission.coordinator.assigned"
    )
    payload = assigned["payload"]
    poc.report.check(
        "coordinator.epoch_replacement",
        payload["coordinator"]["coordinatorEpoch"]
        == payload["previousCoordinator"]["coordinatorEpoch"] + 1,
        "with the Coordinator killed, the MissionOwner's mission.assign_coordinator starts a "
        "new Coordinator Epoch and lease",
        event=proof([assigned])[0],
        coordinator=payload["coordinator"],
        previous=payload["previousCoordinator"],
    )
    return assigned


async def _protocol_failures(
    poc: ProofOfConcept,
    client: MwpClient,
    mission: MissionHandle,
    full: MissionHandle,
    replaced: Json,
) -> None:
    """What a confused or hostile client sends, each refused typed and changing nothing, once
    ``mission`` awaits Approval and its Coordinator's last Context Package is in (its Group
    quiet: "nothing appended" is then its sequence unmoved); ``full`` had its Coordinator
    replaced by ``replaced``."""
    await logged_until(
        poc, "the small Mission to await Approval", lambda logged: awaits_approval(logged(mission))
    )
    with contextlib.suppress(DemoStoppedError):  # a Coordinator that publishes none: go on
        await until(
            "the small Mission's Coordinator to publish its Context Package",
            lambda: _settled(poc, mission),
            SETTLED_SECONDS,
            poll=LOG_POLL_SECONDS,
        )
    check = poc.report.check
    keys = KeyStore.in_state_dir(poc.state)
    owner = keys.load("human-ada")
    before = await mission.sequence()
    epochs = await mission.epochs(owner.principal.id)
    note = _message(owner, mission, "Thanks, all.", membership_epoch=epochs["membershipEpoch"])
    posted = await mission.send_signed(note)
    again = await mission.send_signed(note)
    after = await mission.sequence()
    check(
        "failure.duplicate_delivery",
        again["receipt"] == posted["receipt"] and after == before + 1,
        "the same signed Command delivered twice is accepted once: the second gets the "
        "first's receipt and appends no Event",
        receipt=posted["receipt"]["signingHash"],
        sequence=[before, after],
    )
    collision = _message(
        owner,
        mission,
        "Something else.",
        membership_epoch=epochs["membershipEpoch"],
        action_id=note["actionId"],
    )
    code = await _refusal(mission.send_signed(collision))
    check(
        "failure.action_id_collision",
        code == "ACTION_ID_COLLISION" and await mission.sequence() == after,
        "other content under an Action ID already used is refused, typed, changing nothing",
        code=code,
        actionId=note["actionId"],
    )

    registry = client.registry(organization_id_of(poc.state))
    sessions = await registry.session_epochs()
    tester = keys.load("agent-tester")
    old = await mission.epochs(tester.principal.id)
    # The owner changes the tester's scopes: a new Membership Epoch; the old one is stale.
    changed = await mission.send(
        owner,
        "membership.change",
        {
            "memberId": tester.principal.id,
            "role": "worker",
            "scopes": ["work.execute", "mwp.demo.audited"],
        },
    )
    after = await mission.sequence()
    stale_membership = _message(
        tester,
        mission,
        "From an old Membership.",
        session_epoch=sessions[tester.principal.id],
        membership_epoch=old["membershipEpoch"],
    )
    code = await _refusal(mission.send_signed(stale_membership))
    new = (await mission.epochs(tester.principal.id))["membershipEpoch"]
    check(
        "failure.stale_membership_epoch",
        code == "MEMBERSHIP_STALE" and new == old["membershipEpoch"] + 1,
        "after the owner changed the tester's Membership, a Command under its earlier "
        "Membership Epoch is refused",
        code=code,
        epochs=[old["membershipEpoch"], new],
        change=proof(changed["events"]),
    )
    stale_session = _message(
        tester,
        mission,
        "From a dead Session.",
        session_epoch=sessions[tester.principal.id] - 1,
        membership_epoch=new,
    )
    code = await _refusal(mission.send_signed(stale_session))
    check(
        "failure.stale_session_epoch",
        code == "AUTH_STALE_SESSION",
        "the killed tester's old Session is fenced: its Commands are refused",
        code=code,
        current=sessions[tester.principal.id],
    )
    item = next(w for w in (await mission.view())["workItems"] if w.get("state") == "verified")
    stale_ownership = tester.command(
        "work.checkpoint",
        {
            "ownershipEpoch": 0,
            "leaseId": "urn:uuid:00000000-0000-4000-8000-000000000000",
            "progress": {},
        },
        group_id=mission.group_id,
        session_epoch=sessions[tester.principal.id],
        membership_epoch=new,
        work_item_id=item["workItemId"],
    )
    code = await _refusal(mission.send_signed(stale_ownership))
    check(
        "failure.stale_ownership_epoch",
        code not in ("accepted", "INTERNAL_ERROR") and await mission.sequence() == after,
        "work under an ownership it no longer holds is refused",
        code=code,
    )

    lead = keys.load("agent-lead")
    lead_epochs = await full.epochs(lead.principal.id)
    stale_coordinator = _message(
        lead,
        full,
        "As the Coordinator before the replacement.",
        session_epoch=sessions[lead.principal.id],
        membership_epoch=lead_epochs["membershipEpoch"],
        coordinator_epoch=replaced["payload"]["previousCoordinator"]["coordinatorEpoch"],
    )
    code = await _refusal(full.send_signed(stale_coordinator))
    check(
        "failure.stale_coordinator_epoch",
        code == "AUTH_STALE_COORDINATOR",
        "a Command under the Coordinator Epoch before the replacement is refused",
        code=code,
    )


async def _settled(poc: ProofOfConcept, mission: MissionHandle) -> bool:
    return settled_for_approval(poc.logged(mission))


async def _verified_log(
    poc: ProofOfConcept,
    client: MwpClient,
    evidence: RegistryEvidence,
    name: str,
    mission: MissionHandle,
    archived_at: int | None = None,
) -> GroupEvents:
    """The Mission's Group Event log, once it holds every Event the Group accepted (through
    ``archived_at``, its last, for an archived Group), verified."""
    through = archived_at if archived_at is not None else await mirrored(client, mission)
    log, events = read_log(poc.store, mission.group_id)
    verdict = log.verify_all(evidence)
    poc.report.check(
        f"log.{name}.verifies",
        verdict.ok and verdict.last_sequence == through,
        f"the {name} Mission's Group Event log is signed, hash-chained and verifies",
        verified=verdict.verified,
        fault=str(verdict.fault or ""),
    )
    return events


async def _prove_from_logs(
    poc: ProofOfConcept,
    client: MwpClient,
    full: MissionHandle,
    closed: dict[str, GroupEvents],
    injected: proofs.Injected,
) -> None:
    """The checks read from the Groups' logs: the full Mission's, verified here, and those of
    the Missions approved before it (``closed``, verified beside the outage)."""
    check = poc.report.check
    evidence = await client.registry(organization_id_of(poc.state)).evidence()
    logs = {"full": await _verified_log(poc, client, evidence, "full", full), **closed}
    _stages(poc, logs["full"])
    lead = cast.agent_id("lead")
    after = [
        e
        for e in logs["full"].by(lead, ["work.result.accepted", "mission.submitted_for_approval"])
        if e["sequence"] > injected.replaced["sequence"]
    ]
    check(
        "coordinator.works_under_new_epoch",
        {e["kind"] for e in after} == {"work.result.accepted", "mission.submitted_for_approval"},
        "the restarted Coordinator reviewed results and submitted the Mission under the new "
        "Coordinator Epoch (the Authority refuses coordination under any other)",
        replacedAt=injected.replaced["sequence"],
        events=proof(after[:4]),
    )
    a, b = logs["full"], logs["small"]
    tester, developer = cast.agent_id("tester"), cast.agent_id("developer")
    proofs.prove(poc.report, logs, evidence, injected)
    check(
        "scheduling.shared_worker",
        all(g.by(a_id, ["work.started"]) for g in (a, b) for a_id in (tester, developer)),
        "the tester and the developer work in both Groups",
        started={n: len(g.by(tester, ["work.started"])) for n, g in logs.items()},
    )
    poc.report.facts.update(
        testerStatus=injected.tester_status[:2000],
        injected={
            "testerKilledIn": injected.killed,
            "reviewerKilledIn": injected.expired,
            "developerPreemptedIn": injected.preempted,
            "developerCutOffIn": injected.offline,
            "gateway": injected.disconnection,
        },
    )


def _stages(poc: ProofOfConcept, events: GroupEvents) -> None:
    check = poc.report.check
    items: dict[str, str] = {}
    for authorized in events.of("work.authorized"):
        goal = authorized["payload"]["workItem"]["contract"]["goal"]
        items.setdefault(goal.split(":", 1)[0].lower().replace(" ", "-"), authorized["workItemId"])
    verified: dict[str, Json | None] = {}
    for stage, (capability, worker) in cast.STAGES.items():
        item = items.get(stage)
        chain = [
            events.first(kind, item)
            for kind in (
                "work.authorized",
                "work.offer.created",
                "work.offer.accepted",
                "work.started",
                "work.submitted",
                "work.result.accepted",
            )
        ]
        accepted, started = chain[2], chain[3]
        before = [verified.get(d) for d in cast.DEPENDS[stage]]
        ok = (
            item is not None
            and all(chain)
            and accepted is not None
            and accepted["actor"]["id"] == cast.agent_id(worker)
            and chain[5] is not None
            and chain[5]["actor"]["id"] == cast.agent_id("lead")
            and started is not None
            and all(b is not None and started["sequence"] > b["sequence"] for b in before)
        )
        after = " and ".join(cast.DEPENDS[stage]) or "nothing"
        check(
            f"stage.{stage}",
            ok,
            f"{stage}: authorized with its Work Contract, offered, taken by the {worker}, "
            "started under a lease, submitted with Evidence, accepted by the Coordinator's "
            f"review, and started only after the stages it depends on were verified ({after})",
            workItemId=item,
            capability=capability,
            events=proof(chain),
        )
        verified[stage] = chain[5]
