"""The proof of concept's agents, each loaded by its own process: `mwp agent run
mwp.demo.cast:tester` and `mwp coordinator run mwp.demo.cast:lead` (the demo starts them).

Keys and the Organization come from ``$MWP_STATE_DIR``, where the demo registered them. Each
Worker serves one stage of software development; the tester serves both Missions (the shared
Worker) with two execution slots, and checkpoints between its steps, where it can be preempted.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from mwp.agent import Agent, CapabilityContext, CardInfo, EvidenceItem, Progress, Submission
from mwp.client import KeyStore
from mwp.client.state_dir import organization_id_of
from mwp.coordinator import (
    ChangesContext,
    ChildMission,
    Coordinator,
    KnowledgeSource,
    Plan,
    PlannedItem,
    PlanningContext,
    ReuseContext,
    Review,
    ReviewContext,
)
from mwp.core.trust.registry import Principal

OWNER = "urn:mwp:human:ada"
VERSION = "1.0.0"
# Stage → (capability, the Worker that serves it).
STAGES: dict[str, tuple[str, str]] = {
    "requirements": ("mwp.demo.requirements", "analyst"),
    "implementation": ("mwp.demo.implementation", "developer"),
    "testing": ("mwp.demo.testing", "tester"),
    "code-review": ("mwp.demo.code-review", "reviewer"),
    "integration": ("mwp.demo.integration", "developer"),
}
# Stage → the stages it depends on: testing and code review both take the implementation, side
# by side, and the integration takes both.
DEPENDS: dict[str, tuple[str, ...]] = {
    "requirements": (),
    "implementation": ("requirements",),
    "testing": ("implementation",),
    "code-review": ("implementation",),
    "integration": ("testing", "code-review"),
}
WORKERS = ("analyst", "developer", "tester", "reviewer")
# Stage → who else takes it once its Worker lost it (the demo lets the reviewer's lease expire).
REASSIGN: dict[str, str] = {"code-review": "analyst"}
# Execution Lease seconds per Worker (`mwp agent run --lease-seconds`): the reviewer's is short,
# so that its expiry after the demo kills it comes soon. Renewed every 0.5 s, and its run's first
# checkpoint comes 0.1 to 0.2 s after its start (with one core kept busy by another process);
# should the lease run out before it anyway, the scene says so at once (`scenes._review_lost`).
LEASE_SECONDS: dict[str, int] = {"reviewer": 1}
OUTSIDER = "auditor"  # registered, never a member of a Group: the isolation checks' agent
# The Coordinators: the lead coordinates the Missions; the steward the child Mission the lead
# makes of the small Mission's release notes (a child's Coordinator is not its owner).
COORDINATORS = ("lead", "steward")
NOTES = "Release notes"  # the small Mission's child Mission, by its objective
SLOTS = {"tester": 2}
# Seconds each checkpointed step of a run takes. The scenes wait on cues, not on the steps'
# length (the restarted tester's backlog is held until its status is read), so it is short.
STEP_SECONDS = float(os.environ.get("MWP_DEMO_STEP_SECONDS", "0.02"))
STEPS = 3
# A full run checkpoints between its steps, not after the last one: the result follows at once.
CHECKPOINTS = STEPS - 1
SMALL_TESTS = 4  # the small Mission's tests: a backlog for the tester's two slots
ESTIMATE = "2030-01-01T00:00:00Z"  # each run's revised finish estimate, well ahead
# Cue → (Worker, goal prefix): that Worker's runs of those items wait after their first
# checkpoint while the cue's file is in the state folder. The demo creates the files and
# removes each once the scene that injects a failure into the run is set, so that no scene
# races the work it stops: a slower machine waits longer and sees the same runs.
CUES: dict[str, tuple[str, str]] = {
    # The small Mission's tests, until the restarted tester's rebuilt status is read.
    "backlog": ("tester", "Test "),
    "review": ("reviewer", "Code-Review"),  # until the reviewer is killed
    "integration": ("developer", "Integration"),  # until its preemption is requested
    "revision": ("developer", "Revise"),  # until the gateway is killed
}
CUE_POLL_SECONDS = 0.02  # between a held run's looks at its cue, and the scene's at the run


def agent_id(name: str) -> str:
    return f"urn:mwp:agent:{name}"


def goal_of(stage: str, objective: str) -> str:
    """The goal of the full Mission's ``stage``."""
    return f"{stage.title()}: {objective}"


def capabilities_of(name: str) -> list[str]:
    return sorted(
        {
            capability
            for stage, (capability, worker) in STAGES.items()
            if name in (worker, REASSIGN.get(stage))
        }
    )


def _state() -> Path:
    return Path(os.environ.get("MWP_STATE_DIR", ".mwp"))


def cue_file(state: Path, cue: str) -> Path:
    return state / "demo-cues" / cue


def held_file(state: Path, cue: str) -> Path:
    """Written by a run that holds at ``cue``: the WorkItem's ID."""
    return state / "demo-cues" / f"{cue}.held"


def _card(name: str) -> CardInfo:
    return CardInfo(organization_id_of(_state()), Principal("human", OWNER), name.title())


def _worker(name: str) -> Agent:
    identity = KeyStore.in_state_dir(_state()).load(f"agent-{name}")
    agent = Agent(agent_id(name), identity, card=_card(name), max_concurrency=SLOTS.get(name, 1))
    cues = [cue for cue, (worker, _) in CUES.items() if worker == name]

    async def stage_work(ctx: CapabilityContext) -> Submission:
        return await _stage_work(ctx, cues)

    for capability in capabilities_of(name):
        agent.capability(capability, VERSION)(stage_work)
    return agent


def steps_of(goal: str) -> int:
    """A run the demo injects a failure into (one a cue names) takes :data:`STEPS` steps; any
    other one step, with no checkpoint: nothing resumes it, and its Commands would only
    lengthen the Missions."""
    return STEPS if any(goal.startswith(prefix) for _, prefix in CUES.values()) else 1


async def _stage_work(ctx: CapabilityContext, cues: list[str]) -> Submission:
    """Work in steps with a checkpoint between each two (a safe point to preempt, and to
    resume after a restart), then publish the stage's result and Evidence covering every
    acceptance criterion."""
    goal = ctx.contract["goal"]
    steps = steps_of(goal)
    state = ctx.resume_state or {"done": 0}
    for step in range(state["done"], steps):
        await asyncio.sleep(STEP_SECONDS)
        state = {"done": step + 1}
        if step + 1 == steps:
            break  # the submission is the last step's record
        progress = Progress(
            "working", [f"step {step + 1} of {steps}"], "publish", revised_estimate=ESTIMATE
        )
        await ctx.checkpoint(progress, state)
        for cue in cues:
            if goal.startswith(CUES[cue][1]) and cue_file(_state(), cue).exists():
                # Said at once, in the state folder: the scene acts on the run it holds
                # without asking the Mission whether the checkpoint is recorded (it is).
                _say_held(held_file(_state(), cue), ctx.work_item_id)
                while cue_file(_state(), cue).exists():
                    await asyncio.sleep(CUE_POLL_SECONDS)
    text = f"{goal}\nDone in {steps} steps for WorkItem {ctx.work_item_id}.\n".encode()
    report = await ctx.publish(text, media_type="text/plain", schema_uri="urn:mwp:schema:text")
    criteria = [c["criterionId"] for c in ctx.contract["acceptanceCriteria"]]
    return Submission([report], [EvidenceItem(f"{ctx.work_item_id}:evidence", criteria)])


def _say_held(held: Path, work_item_id: str) -> None:
    written = held.with_suffix(".writing")
    written.write_text(work_item_id)
    written.replace(held)  # whole or not at all, for the scene reading it


def _planned(key: str, goal: str, stage: str, depends_on: tuple[str, ...] = ()) -> PlannedItem:
    capability, worker = STAGES[stage]
    return PlannedItem(
        key,
        goal,
        depends_on=depends_on,
        capability=(capability, VERSION),
        candidates=[agent_id(worker)],
        reassign_to=[agent_id(REASSIGN[stage])] if stage in REASSIGN else [],
    )


def _lead() -> Coordinator:
    identity = KeyStore.in_state_dir(_state()).load("agent-lead")
    lead = Coordinator(
        agent_id("lead"),
        identity,
        card=_card("lead"),
        workers=[agent_id(name) for name in WORKERS],
    )

    @lead.plan
    async def plan(ctx: PlanningContext) -> Plan:
        objective = ctx.objective
        if objective.startswith("Hotfix"):  # an urgent arrival: one test run
            return Plan([_planned("testing", f"Hotfix test: {objective}", "testing")])
        if objective.startswith("Fix"):  # a small Mission: the change, then tests in parallel
            change = _planned("implementation", f"Implement: {objective}", "implementation")
            tests = [
                _planned(f"testing-{n}", f"Test {n}: {objective}", "testing", ("implementation",))
                for n in range(1, SMALL_TESTS + 1)
            ]
            # ...and its release notes, a child Mission the steward coordinates.
            notes = PlannedItem(
                "release-notes",
                f"{NOTES}: {objective}",
                depends_on=("implementation",),
                child=ChildMission(f"{NOTES}: {objective}", agent_id("steward")),
            )
            return Plan([change, *tests, notes])
        return Plan(
            [_planned(stage, goal_of(stage, objective), stage, DEPENDS[stage]) for stage in STAGES]
        )

    @lead.reuse
    async def reuse(ctx: ReuseContext) -> list[KnowledgeSource]:
        # The hotfix reuses the small Missions' fix, if Organization policy approves it.
        if not ctx.mission.get("objective", "").startswith("Hotfix"):
            return []
        return [
            KnowledgeSource(group["groupId"], artifact["contentHash"])
            for group in ctx.catalog
            if group["objective"].startswith("Fix")
            for artifact in group["artifacts"]
            if artifact["goal"].startswith("Implement")
        ]

    lead.review(_review)

    @lead.on_changes_requested
    async def revise(ctx: ChangesContext) -> Plan:
        revision = f"revision-{len(ctx.work_items)}"  # unique per change request
        return Plan(
            [
                _planned(revision, f"Revise: {ctx.reason}", "implementation", ("integration",)),
                _planned(f"{revision}-tests", "Tests of the revision", "testing", (revision,)),
            ]
        )

    return lead


async def _review(ctx: ReviewContext) -> Review:
    text = b"".join([await ctx.artifact(digest) for digest in ctx.artifact_hashes])
    if ctx.evidence_covers_every_criterion and ctx.work_item["workItemId"].encode() in text:
        return Review.accept("Read the result; its Evidence covers every criterion.")
    return Review.reject("The result does not name its WorkItem, or Evidence is missing.")


def _steward() -> Coordinator:
    """Coordinates the child Missions: the release notes, written by the analyst."""
    identity = KeyStore.in_state_dir(_state()).load("agent-steward")
    steward = Coordinator(
        agent_id("steward"), identity, card=_card("steward"), workers=[agent_id("analyst")]
    )

    @steward.plan
    async def plan(ctx: PlanningContext) -> Plan:
        return Plan([_planned("notes", f"Write: {ctx.objective}", "requirements")])

    steward.review(_review)
    return steward


def __getattr__(name: str) -> object:
    """``mwp agent run mwp.demo.cast:NAME`` loads only the declaration it runs."""
    if name in WORKERS:
        return _worker(name)
    if name == "lead":
        return _lead()
    if name == "steward":
        return _steward()
    raise AttributeError(name)
