"""The agent runtime in gateway mode, through a real gateway (TLS 1.3, the session's dev
server): a runtime configured with only the gateway's address, its CA, its own Temporal
namespace and its own tool ledger folder (no Group log store, no authority namespace) is
offered a WorkItem, accepts it, runs it under a lease with checkpoints and publishes and
submits its result, every Command, Artifact and checkpoint going through the gateway."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from temporalio.service import RPCError

from mwp.agent import Agent
from mwp.agent.gateway_inbox import GroupFeed
from mwp.agent.gateway_link import GatewaySettings
from mwp.agent.signals import SchedulerSignals
from mwp.client import Identity, MwpClient, connect
from mwp.contracts.agent import PreemptionRequest, agent_workflow_id
from mwp.core.trust.registry import Principal
from mwp.dev.stack import BackgroundStack, ensure_namespace
from mwp.gateway.artifacts import group_marker
from mwp.gateway.tls import development_certificates
from mwp.log.delivery import ObjectCursorStore
from mwp.stores.objects import open_store
from mwp.workers.agent import AgentSession, ensure_registered, run_agent_worker
from tests.integration import runtime_agent
from tests.integration.conftest import Organization, stack_log_location
from tests.integration.missions_helper import MissionRig, WorkItemRef, eventually, new_mission
from tests.integration.test_gateway import running_gateway
from tests.integration.test_gateway_subscribe import OPTIONS

AGENTS_NAMESPACE = "mwp-agents-test"


@pytest.fixture
def effects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "external"
    root.mkdir()
    monkeypatch.setenv("MWP_TEST_TOOL_EFFECTS", str(root))
    return root


def stepper(rig: MissionRig) -> Agent:
    agent_id = f"urn:mwp:agent:gw-stepper-{uuid.uuid4().hex[:8]}"
    identity = Identity.generate(Principal("agent", agent_id))
    return runtime_agent.build(agent_id, identity, rig.crew.organization.organization_id)


@asynccontextmanager
async def gateway_with_artifacts(
    client: MwpClient, organization: Organization, folder: Path
) -> AsyncIterator[GatewaySettings]:
    """A real gateway (WebSocket and Artifact listeners) of ``organization``; the settings an
    agent needs to reach it: its two addresses and its CA, nothing else."""
    async with running_gateway(
        client, organization, folder, options=OPTIONS, artifact_port=0
    ) as running:
        address = running.gateway.artifact_address
        assert address is not None
        yield GatewaySettings(
            running.uri,
            development_certificates(folder).ca_cert,  # the CA the gateway was given
            artifacts_url=f"https://127.0.0.1:{address[1]}",
        )


@asynccontextmanager
async def gateway_runtime(
    agent: Agent, settings: GatewaySettings, address: str, ledger: Path
) -> AsyncIterator[AgentSession]:
    """``run_agent_worker`` in gateway mode, in the agents' namespace, until the block ends."""
    stop = asyncio.Event()
    ready: asyncio.Future[AgentSession] = asyncio.get_running_loop().create_future()
    running = asyncio.create_task(
        run_agent_worker(
            agent,
            address=address,
            namespace=AGENTS_NAMESPACE,
            state_dir=ledger / "no-state",  # never read in gateway mode
            tool_store=str(ledger),
            gateway=settings,
            scheduler_options={"lease_seconds": 6},
            on_ready=ready.set_result,
            stop=stop,
            report=lambda line: None,
        )
    )
    try:
        async with asyncio.timeout(30):
            done, _ = await asyncio.wait({running, ready}, return_when=asyncio.FIRST_COMPLETED)
        if running in done:
            running.result()  # raises what stopped it
        yield ready.result()
    finally:
        stop.set()
        await running
        client = await connect(address, AGENTS_NAMESPACE)
        handle = client.temporal.get_workflow_handle(agent_workflow_id(agent.agent_id))
        with contextlib.suppress(RPCError):  # a later runtime of the agent ended it already
            await handle.terminate("test over")


@dataclasses.dataclass
class Served:
    rig: MissionRig
    agent: Agent
    session: AgentSession
    ledger: Path
    settings: GatewaySettings


@asynccontextmanager
async def served_by_gateway_agent(
    mwp_client: MwpClient, temporal_stack: BackgroundStack, tmp_path: Path, *, admit: bool = True
) -> AsyncIterator[Served]:
    """A Mission, and a runtime agent in gateway mode configured for its Group. The authority
    side registers the agent and (``admit``) admits it before any work is authorized: the
    runtime learns a contract from the work.authorized Event it is shown."""
    rig = await new_mission(mwp_client)
    agent = stepper(rig)
    card_version = await ensure_registered(rig.crew.organization.registry, agent)
    assert card_version == agent.card_info.card_version
    if admit:
        await admit_agent(rig, agent)
    await ensure_namespace(mwp_client.temporal.service_client, AGENTS_NAMESPACE)
    ledger = tmp_path / "agent-ledger"
    async with gateway_with_artifacts(
        mwp_client, rig.crew.organization, tmp_path / "tls"
    ) as reachable:
        settings = dataclasses.replace(reachable, groups=(rig.mission.group_id,))
        async with gateway_runtime(agent, settings, temporal_stack.address, ledger) as session:
            yield Served(rig, agent, session, ledger, settings)


async def admit_agent(rig: MissionRig, agent: Agent) -> None:
    await rig.coordinate(
        "membership.change", {"memberId": agent.agent_id, "role": "worker", "reason": "staffing"}
    )


async def reached(rig: MissionRig, item: WorkItemRef, state: str) -> None:
    async def there() -> bool:
        view = await rig.mission.work_item(item.work_item_id)
        return bool(view["state"] == state)

    await eventually(there, timeout=60)


async def test_a_gateway_mode_runtime_serves_an_offer_to_submitted(
    mwp_client: MwpClient, temporal_stack: BackgroundStack, effects: Path, tmp_path: Path
) -> None:
    async with served_by_gateway_agent(mwp_client, temporal_stack, tmp_path) as served:
        rig, agent, session = served.rig, served.agent, served.session
        # The HELLO opened the Session the runtime works under.
        epochs = await rig.crew.organization.registry.session_epochs()
        assert session.session_epoch == epochs[agent.agent_id]
        item = await rig.authorize("Write the summary")
        await rig.offer(item, agent.identity)
        await reached(rig, item, "submitted")

    group_id = rig.mission.group_id
    view = await rig.mission.work_item(item.work_item_id)
    assert view["owner"]["agentId"] == agent.agent_id
    events = await rig.mission.events_this_run()
    mine = [e for e in events if e.get("actor", {}).get("id") == agent.agent_id]
    kinds = [e["kind"] for e in mine]
    for kind in ("work.offer.accepted", "work.started", "work.progressed", "work.submitted"):
        assert kind in kinds
    # Every Command of the runtime carried the Session its HELLO opened.
    started = next(e for e in mine if e["kind"] == "work.started")
    assert started["payload"]["executionLease"]["sessionEpoch"] == session.session_epoch
    # Its checkpoints and its result are Artifacts of the Group, uploaded through the gateway.
    refs = [e["payload"]["checkpointRef"] for e in mine if "checkpointRef" in e["payload"]]
    assert refs
    store = open_store(stack_log_location())
    for ref in (refs[-1], *view["submission"]["artifactHashes"]):
        assert await asyncio.to_thread(store.exists, group_marker(group_id, ref))
    # Nothing of the runtime ran in the authority namespace.
    with pytest.raises(RPCError):
        await mwp_client.temporal.get_workflow_handle(agent_workflow_id(agent.agent_id)).describe()
    # The runtime's own folder holds its tool records only, no Group log, no Artifact.
    assert not (served.ledger / "groups").exists()
    assert not (served.ledger / "artifacts").exists()
    # Its ACKs are its Cursor, kept on the authority side.
    stored = await asyncio.to_thread(ObjectCursorStore(store).load, group_id, agent.agent_id)
    assert stored is not None and stored.sequence >= started["sequence"]


async def test_preempted_work_resumes_from_its_checkpoint_read_through_the_gateway(
    mwp_client: MwpClient, temporal_stack: BackgroundStack, effects: Path, tmp_path: Path
) -> None:
    (effects / "hold").touch()  # the run waits after each checkpoint while this exists
    async with served_by_gateway_agent(mwp_client, temporal_stack, tmp_path) as served:
        rig, agent = served.rig, served.agent
        item = await rig.authorize("Write the long report")
        await rig.offer(item, agent.identity)

        async def checkpointed() -> bool:
            return any(
                e["kind"] == "work.progressed" and "checkpointRef" in e["payload"]
                for e in await rig.mission.events_this_run()
            )

        await eventually(checkpointed, timeout=30)
        agents = await connect(temporal_stack.address, AGENTS_NAMESPACE)
        handle = agents.temporal.get_workflow_handle(agent_workflow_id(agent.agent_id))
        request = PreemptionRequest(rig.mission.group_id, item.work_item_id)
        await handle.signal(*SchedulerSignals(agent.identity).signal(request))
        (effects / "hold").unlink()
        await reached(rig, item, "submitted")

    kinds = [e["kind"] for e in await rig.mission.events_this_run()]
    assert kinds.count("work.started") == 2 and kinds.count("work.checkpointed") == 1
    # The second run resumed from the state the first stored through the gateway.
    assert [r["resumed"] for r in runtime_agent.runs(effects)] == [None, {"next": 2}]


async def test_a_restarted_runtime_fences_the_old_one_and_finishes_from_its_checkpoint(
    mwp_client: MwpClient, temporal_stack: BackgroundStack, effects: Path, tmp_path: Path
) -> None:
    """A second runtime of the agent says HELLO: its Session fences the first one's, the
    Group revokes the old lease, and the new runtime (knowing the WorkItem from its journal:
    the gateway resumes after the stored Cursor) completes it from the latest checkpoint."""
    (effects / "hold").touch()
    async with served_by_gateway_agent(mwp_client, temporal_stack, tmp_path) as served:
        rig, agent, first = served.rig, served.agent, served.session
        item = await rig.authorize("Write the long report")
        await rig.offer(item, agent.identity)

        async def checkpointed() -> bool:
            return any(
                e["kind"] == "work.progressed" and "checkpointRef" in e["payload"]
                for e in await rig.mission.events_this_run()
            )

        await eventually(checkpointed, timeout=30)
        async with gateway_runtime(
            agent, served.settings, temporal_stack.address, served.ledger
        ) as second:
            assert second.session_epoch > first.session_epoch
            (effects / "hold").unlink()
            await reached(rig, item, "submitted")

    events = await rig.mission.events_this_run()
    starts = [e for e in events if e["kind"] == "work.started"]
    assert [s["payload"]["executionLease"]["sessionEpoch"] for s in starts] == [
        first.session_epoch,
        second.session_epoch,
    ]
    resumed = [r["resumed"] for r in runtime_agent.runs(effects)]
    assert resumed[0] is None and resumed[-1] is not None


async def test_a_configured_group_is_served_once_the_agent_is_admitted(
    mwp_client: MwpClient, temporal_stack: BackgroundStack, effects: Path, tmp_path: Path
) -> None:
    """Started before its admission, the runtime's SUBSCRIBE is refused as for a Group that
    does not exist; it asks again, and serves the Group from its admission on."""
    async with served_by_gateway_agent(mwp_client, temporal_stack, tmp_path, admit=False) as served:
        rig, agent = served.rig, served.agent
        await asyncio.sleep(0.5)  # the first SUBSCRIBE is refused meanwhile
        await admit_agent(rig, agent)
        item = await rig.authorize("Write the summary")
        await rig.offer(item, agent.identity)
        await reached(rig, item, "submitted")


def event(sequence: int, cause: str) -> dict[str, Any]:
    return {
        "eventId": f"urn:uuid:event-{sequence}",
        "groupId": "urn:mwp:group:g",
        "sequence": sequence,
        "kind": "work.progressed",
        "cause": {"type": "command", "id": cause},
    }


def test_receipts_and_the_subscription_are_taken_once_in_group_order() -> None:
    """Pure: an Event of the runtime's own Command comes as a receipt (possibly ahead of the
    subscription) and by the subscription; the Scheduler gets each Event once, in order."""
    feed = GroupFeed("urn:mwp:group:g", None)
    own = {"urn:uuid:mine"}
    taken: list[int] = []

    def arrive(sequence: int, cause: str) -> None:
        taken.extend(e["sequence"] for e in feed.take(event(sequence, cause), own))

    arrive(3, "urn:uuid:mine")  # a receipt, before the subscription delivered 1 and 2
    assert taken == []
    arrive(1, "urn:uuid:other")
    arrive(2, "urn:uuid:other")  # 3 is next now
    arrive(3, "urn:uuid:mine")  # the subscription's copy: a duplicate
    arrive(4, "urn:uuid:mine")  # by the subscription first, next: taken at once
    arrive(4, "urn:uuid:mine")  # then its receipt
    arrive(7, "urn:uuid:mine")  # the subscription withheld 5 and 6 (no watermark)
    arrive(8, "urn:uuid:other")  # delivered after 7, so 7 was the subscription's
    arrive(7, "urn:uuid:mine")  # 7's receipt, late
    arrive(12, "urn:uuid:mine")  # a receipt ahead again
    for e in feed.watermark(11):  # nothing for this agent through 11
        taken.append(e["sequence"])
    arrive(2, "urn:uuid:other")  # at least once: a duplicate
    assert taken == [1, 2, 3, 4, 7, 8, 12]
    assert feed.position == 12 and feed.cursor is not None and feed.cursor["sequence"] == 12
    assert not feed.parked
