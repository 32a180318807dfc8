"""The proof of concept's cast on stage: its processes, its Organization and its Missions,
and the waits the scenes share (`mwp.demo.run` runs it all).

`mwp dev` (Temporal, the authority worker, the Group gateway, the console) runs as one process;
four Workers and the Coordinator each run as their own process through the gateway
(`mwp.demo.cast`). Two software-development Missions run at once in one Organization, sharing
the tester and the developer. While they run the demo kills the shared tester and restarts it
(its queues are rebuilt), kills the Coordinator and restarts it (it renews its lease under a new
Session and plans nothing twice); the MissionOwner requests changes in the console, and
approves the revised Mission there. Then it sends what a hostile or confused client would
(replays, Action ID collisions, stale epochs) and reads every Group's signed log as proof.
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp

from mwp.client import KeyStore, MwpClient, connect
from mwp.client.missions import MissionClient, MissionHandle, in_seconds
from mwp.client.state_dir import organization_id_of
from mwp.demo import cast
from mwp.demo.groups import GroupEvents, LogFollower
from mwp.demo.head_start import HeadStart, gateway_argv
from mwp.demo.report import Report
from mwp.dev.registration import Organization, add_agent, add_human, init_organization
from mwp.dev.scenario import definition_of_done, mission_budget
from mwp.dev.stack import stack_config
from mwp.stores.objects import open_store

Json = dict[str, Any]
FULL = "Add CSV export to the reports service"
SMALL = "Fix the date parser's time-zone bug"
HOTFIX = "Hotfix the login outage"
CHANGES = "Also export the totals row."
SETTLE_SECONDS = 240.0
POLL_SECONDS = 0.1  # between the looks of `until` (each a query or two of a Mission)
LOG_POLL_SECONDS = 0.02  # between the looks of `logged_until` (a few files of the store)
AUDIT = "mwp.demo.audit@1.0.0"
COORDINATION = "mwp.coordination@1.0.0"


class DemoStoppedError(RuntimeError):
    """A step of the demo could not go on (the report so far says where)."""


async def until(
    what: str,
    probe: Callable[[], Awaitable[Any]],
    timeout: float = SETTLE_SECONDS,
    *,
    poll: float = POLL_SECONDS,
) -> Any:
    """Poll ``probe`` every ``poll`` seconds until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = await probe()
        if found:
            return found
        await asyncio.sleep(poll)
    raise DemoStoppedError(f"timed out after {timeout:.0f} s waiting for {what}")


class ProofOfConcept:
    def __init__(self, head: HeadStart, report: Report, *, interactive: bool = False) -> None:
        self.folder = head.folder
        self.state = head.state
        self.report = report
        self.interactive = interactive
        self.dev = head.dev
        ports = head.ports
        self.gateway_argv = gateway_argv(ports)
        self.address = f"127.0.0.1:{ports['temporal']}"
        self.ui_url = f"http://127.0.0.1:{ports['ui']}"
        self.console_url = f"http://127.0.0.1:{ports['console']}/"
        self.gateway_url = f"wss://127.0.0.1:{ports['gw']}"
        self.artifacts_url = f"https://127.0.0.1:{ports['art']}"
        self.processes = head.processes
        self.store = open_store(stack_config(self.state).log_location)
        self.followers: dict[str, LogFollower] = {}  # shared by the scenes run beside

    # --- the parts ------------------------------------------------------------------------

    async def start(self) -> MwpClient:
        """The stack, the Organization and its cast, the gateway, and every runtime started
        (:meth:`ready` waits for them)."""
        out = self.report.out
        await self.dev.wait_for("Ready in", 120)  # started by the head start
        out(f"Temporal UI {self.ui_url}   console {self.console_url}")
        self.report.facts.update(temporalUi=self.ui_url, console=self.console_url)
        client = await connect(self.address, "default")
        organization = await init_organization(client, self.state)
        # The gateway needs only the Organization: it starts while the cast registers.
        gateway = self.processes.start("gateway", *self.gateway_argv, service=True, warm=True)
        await self.register_cast(organization)
        await gateway.wait_for("Artifacts", 60)
        await self.check_cards(organization)
        for cue in cast.CUES:
            cue_file = cast.cue_file(self.state, cue)
            cue_file.parent.mkdir(parents=True, exist_ok=True)
            cue_file.touch()
            cast.held_file(self.state, cue).unlink(missing_ok=True)
        # The Coordinators first: the Missions' first work is theirs, and each runtime's HELLO
        # waits its turn at the Registry, which tells every Group of each new Session.
        for name in cast.COORDINATORS:
            self.processes.start(name, "coordinator", "run", f"mwp.demo.cast:{name}", warm=True)
        for name in cast.WORKERS:
            lease = (
                [f"--lease-seconds={cast.LEASE_SECONDS[name]}"]
                if name in cast.LEASE_SECONDS
                else []
            )
            self.processes.start(name, "agent", "run", f"mwp.demo.cast:{name}", *lease, warm=True)
        return client

    async def ready(self) -> None:
        """Wait for every runtime to serve (the Missions may be created meanwhile: a runtime
        that connects later takes its Groups from the gateway then), and check the parts."""
        check = self.report.check
        for process in self.processes.started[2:]:
            coordinates = process.name in cast.COORDINATORS
            await process.wait_for("Gateway" if coordinates else "Task queue", 90)
        pids = {p.name: p.process.pid for p in self.processes.started if p.process}
        check(
            "agents.own_processes",
            len(set(pids.values())) == len(pids) == 8
            and all(p.alive() for p in self.processes.started),
            "the stack, the gateway, four Workers and two Coordinators are eight live processes",
            pids=pids,
        )
        async with aiohttp.ClientSession() as http:
            async with http.get(self.ui_url) as answer:
                check(
                    "stack.temporal_ui",
                    answer.status == 200,
                    "the Temporal UI answers",
                    status=answer.status,
                )
            async with http.get(self.console_url) as answer:
                page = await answer.text()
                check(
                    "stack.console",
                    answer.status == 200 and "<html" in page.lower(),
                    "the console serves its page",
                    status=answer.status,
                )
        lines = {n: self.process(n).this_run() for n in cast.WORKERS}
        check(
            "agents.through_gateway",
            all("wss://" in text for text in lines.values()),
            "every Worker runtime reached its Groups through the gateway (wss://)",
            said={n: [ln for ln in t.splitlines() if "wss://" in ln][:1] for n, t in lines.items()},
        )

    async def register_cast(self, organization: Organization) -> None:
        """The owner ``ada`` and every agent, with their keys in the state folder's KeyStore
        where `mwp agent run` loads them: as `mwp registry add-human` and `add-agent` do, over
        this process's connection (a process per principal costs a Python start each)."""
        registry, keys = organization.registry, organization.keys
        await add_human(registry, keys, "ada")
        declared = {name: [COORDINATION] for name in cast.COORDINATORS}
        for name in cast.WORKERS:
            declared[name] = [f"{c}@{cast.VERSION}" for c in cast.capabilities_of(name)]
        # Registered in the Organization, a member of no Group: what it can see is the proof.
        declared[cast.OUTSIDER] = [AUDIT]
        await asyncio.gather(
            *(
                add_agent(registry, keys, name, owner="ada", capabilities=capabilities)
                for name, capabilities in declared.items()
            )
        )
        self.report.out(f"registered the Organization, ada and {len(declared)} agents")

    async def check_cards(self, organization: Organization) -> None:
        """The Registry's Agent Cards: each declares the agent's capabilities and binds the key
        in the key file its runtime loads."""
        names = (*cast.WORKERS, *cast.COORDINATORS)
        cards = {n: await organization.registry.agent_card(cast.agent_id(n)) for n in names}
        keys = {n: organization.keys.load(f"agent-{n}").key_id for n in names}
        self.report.check(
            "organization.agent_cards",
            all(
                card is not None
                and keys[name] in {k["keyId"] for k in card["publicKeys"]}
                and (
                    name in cast.COORDINATORS
                    or sorted(c["id"] for c in card["capabilities"]) == cast.capabilities_of(name)
                )
                for name, card in cards.items()
            ),
            "every agent is registered with an Agent Card declaring its stage's capability "
            "and binding the key its runtime loads",
            cards={n: c and c["cardVersion"] for n, c in cards.items()},
            keys=keys,
        )

    def reporting_to(self, report: Report) -> ProofOfConcept:
        """The same processes and Missions, checks recorded in ``report`` (`mwp.demo.beside`)."""
        apart = copy.copy(self)
        apart.report = report
        return apart

    def logged(self, mission: MissionHandle) -> GroupEvents:
        """The Mission's Group log so far, unverified: for the scenes' waits."""
        follower = self.followers.get(mission.group_id)
        if follower is None:
            follower = self.followers[mission.group_id] = LogFollower(self.store, mission.group_id)
        return follower.read()

    async def held(self, cue: str, what: str, lost: Callable[[], str | None] = lambda: None) -> str:
        """The WorkItem ID of the run holding at ``cue`` (see `cast.CUES`), once one holds;
        :class:`DemoStoppedError` as soon as ``lost`` says why none ever will."""
        held = cast.held_file(self.state, cue)
        deadline = time.monotonic() + SETTLE_SECONDS
        while not held.exists():
            if (why := lost()) is not None:
                raise DemoStoppedError(f"no run will hold for {what}: {why}")
            if time.monotonic() > deadline:
                raise DemoStoppedError(f"timed out after {SETTLE_SECONDS:.0f} s waiting for {what}")
            await asyncio.sleep(cast.CUE_POLL_SECONDS)
        return held.read_text()

    def release(self, cue: str) -> None:
        """Let the runs waiting at ``cue`` go on (see `cast.CUES`)."""
        cast.cue_file(self.state, cue).unlink(missing_ok=True)

    def process(self, name: str) -> Any:
        return next(p for p in self.processes.started if p.name == name)

    async def create_mission(self, client: MwpClient, objective: str) -> MissionHandle:
        """A Mission of the owner ``ada``, coordinated by ``lead``."""
        owner = KeyStore.in_state_dir(self.state).load("human-ada")
        mission, _ = await MissionClient(client, organization_id_of(self.state)).create(
            owner,
            objective=objective,
            coordinator_agent_id=cast.agent_id("lead"),
            definition_of_done=definition_of_done(f"{objective}: delivered and tested."),
            budget=mission_budget(),
            deadline=in_seconds(7 * 86400),
        )
        return mission

    async def missions(self, client: MwpClient) -> tuple[MissionHandle, MissionHandle]:
        full, small = await asyncio.gather(
            self.create_mission(client, FULL), self.create_mission(client, SMALL)
        )
        self.report.out(f"Missions {full.mission_id} and {small.mission_id} created")
        return full, small


async def owned_by(mission: MissionHandle, agent: str, state: str) -> list[Json]:
    view = await mission.view()
    found = []
    for listed in view.get("workItems") or []:
        if listed.get("state") != state:
            continue
        item = await mission.work_item(listed["workItemId"])
        if (item.get("owner") or {}).get("agentId") == cast.agent_id(agent):
            found.append(item)
    return found


async def logged_until(
    poc: ProofOfConcept, what: str, probe: Callable[[Callable[[MissionHandle], GroupEvents]], bool]
) -> None:
    """Wait until ``probe``, asked with :meth:`ProofOfConcept.logged`, holds."""

    async def look() -> bool:
        return probe(poc.logged)

    await until(what, look, poll=LOG_POLL_SECONDS)


async def in_state(mission: MissionHandle, state: str) -> Json | None:
    view = await mission.view()
    return view if view.get("state") == state else None
