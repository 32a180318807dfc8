"""The agent runtime in gateway mode, through a real gateway (TLS 1.3, the session's dev
server): a runtime configured with only the gateway's address, its CA, its own Temporal
namespace and its own tool ledger folder (no Group log store, no authority namespace) is
offered a WorkItem, accepts it, runs it under a lease with checkpoints and publishes and
submits its result, every Command, Artifact and checkpoint going through the gateway."""

from __future__ import annotations

import asyncio
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
from mwp.agent.gateway_link import GatewaySettings, GatewayUnavailableError
from mwp.agent.signals import SchedulerSignals
from mwp.cli import main
from mwp.client import Identity, MwpClient, connect
from mwp.contracts.agent import PreemptionRequest, agent_workflow_id
from mwp.core.trust.registry import Principal
from mwp.dev.stack import BackgroundStack, ensure_namespace, free_port
from mwp.gateway.artifacts import group_marker
from mwp.log.delivery import ObjectCursorStore
from mwp.stores.objects import open_store
from mwp.workers.agent import AgentSession, ensure_registered
from tests.integration import runtime_agent
from tests.integration.conftest import stack_log_location
from tests.integration.gateway_agents import (
    AGENTS_NAMESPACE,
    agent_gateway,
    gateway_runtime,
    gateway_with_artifacts,
)
from tests.integration.missions_helper import MissionRig, WorkItemRef, eventually, new_mission


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


@dataclasses.dataclass
class Served:
    rig: MissionRig
    agent: Agent
    session: AgentSession
    ledger: Path
    settings: GatewaySettings


@asynccontextmanager
async def served_by_gateway_agent(
    mwp_client: MwpClient, temporal_stack: BackgroundStack, tmp_path: Path, *, admit: bool = False
) -> AsyncIterator[Served]:
    """A Mission, and a runtime agent in gateway mode, configured with no Group: the gateway
    attaches the Mission's Group once the agent is offered work there (or, ``admit``, admitted
    before any work is authorized). The authority side registers the agent's card; a late
    joiner learns the contract it is offered from the Events its Context Package cites."""
    rig = await new_mission(mwp_client)
    agent = stepper(rig)
    card_version = await ensure_registered(rig.crew.organization.registry, agent)
    assert card_version == agent.card_info.card_version
    if admit:
        await admit_agent(rig, agent)
    await ensure_namespace(mwp_client.temporal.service_client, AGENTS_NAMESPACE)
    ledger = tmp_path / "agent-ledger"
    async with (
        gateway_with_artifacts(mwp_client, rig.crew.organization, tmp_path / "tls") as reachable,
        gateway_runtime(agent, reachable, temporal_stack.address, ledger) as session,
    ):
        yield Served(rig, agent, session, ledger, reachable)


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


async def test_a_group_is_served_from_the_admission_of_a_runtime_started_before_it(
    mwp_client: MwpClient, temporal_stack: BackgroundStack, effects: Path, tmp_path: Path
) -> None:
    """Started before its admission, the runtime receives nothing of the Group; admitted,
    it is attached by the gateway and serves the Group from its admission on."""
    async with served_by_gateway_agent(mwp_client, temporal_stack, tmp_path, admit=False) as served:
        rig, agent = served.rig, served.agent
        await asyncio.sleep(0.5)  # not a member yet: nothing is delivered meanwhile
        await admit_agent(rig, agent)
        item = await rig.authorize("Write the summary")
        await rig.offer(item, agent.identity)
        await reached(rig, item, "submitted")


async def test_a_dropped_connection_is_reconnected_and_the_work_finishes_from_its_checkpoint(
    mwp_client: MwpClient, temporal_stack: BackgroundStack, effects: Path, tmp_path: Path
) -> None:
    """The gateway's side of the socket is cut mid-run: the runtime reconnects by itself, its
    new HELLO opens a new Session (the Group revokes the old lease), and the work finishes
    from the latest checkpoint under the new Session."""
    (effects / "hold").touch()
    rig = await new_mission(mwp_client)
    agent = stepper(rig)
    await ensure_registered(rig.crew.organization.registry, agent)
    await ensure_namespace(mwp_client.temporal.service_client, AGENTS_NAMESPACE)
    async with (
        agent_gateway(mwp_client, rig.crew.organization, tmp_path / "tls") as (gateway, settings),
        gateway_runtime(agent, settings, temporal_stack.address, tmp_path / "ledger") as first,
    ):
        item = await rig.authorize("Write the long report")
        await rig.offer(item, agent.identity)

        async def checkpointed() -> bool:
            return any(
                e["kind"] == "work.progressed" and "checkpointRef" in e["payload"]
                for e in await rig.mission.events_this_run()
            )

        await eventually(checkpointed, timeout=30)
        [connection] = gateway.open_connections
        connection.websocket.transport.abort()  # the network drops it

        async def reconnected() -> bool:
            return any(c is not connection for c in gateway.open_connections)

        await eventually(reconnected, timeout=30)
        (effects / "hold").unlink()
        await reached(rig, item, "submitted")
    starts = [e for e in await rig.mission.events_this_run() if e["kind"] == "work.started"]
    epochs = [s["payload"]["executionLease"]["sessionEpoch"] for s in starts]
    assert epochs[0] == first.session_epoch and epochs[-1] > first.session_epoch
    resumed = [r["resumed"] for r in runtime_agent.runs(effects)]
    assert resumed[0] is None and resumed[-1] is not None


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


def test_mwp_agent_run_says_when_no_gateway_answers(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, temporal_stack: BackgroundStack
) -> None:
    """The default mode needs the gateway: none listening is one clear line and status 1."""
    code = main(
        [
            "agent",
            "run",
            "tests.integration.tool_agent:agent",
            "--state-dir",
            str(tmp_path),
            "--gateway",
            f"wss://127.0.0.1:{free_port()}",
            "--address",
            temporal_stack.address,
            "--namespace",
            AGENTS_NAMESPACE,
        ]
    )
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("mwp agent: cannot reach the Group gateway"), err


async def test_a_runtime_of_an_unregistered_agent_is_refused_at_its_hello(
    mwp_client: MwpClient, temporal_stack: BackgroundStack, tmp_path: Path
) -> None:
    rig = await new_mission(mwp_client)
    agent = stepper(rig)  # its card was never registered
    async with gateway_with_artifacts(mwp_client, rig.crew.organization, tmp_path) as settings:
        with pytest.raises(GatewayUnavailableError, match="mwp registry add-agent"):
            async with gateway_runtime(agent, settings, temporal_stack.address, tmp_path):
                pass
