"""Tool calls as activities with derived idempotency keys (MWP-WRK-031) and the agent worker
process, on the session's real dev server: one effect and one result per (Mission, WorkItem,
Ownership Epoch, op ID) across repeats, retries and a SIGKILLed worker; a new Ownership Epoch
gets a fresh key; `mwp agent run` registers the card, opens a session and exits 0 on SIGINT."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ActivityError, ApplicationError

from mwp.agent.ledger import ToolLedger
from mwp.cli import main
from mwp.client import KeyStore, MwpClient
from mwp.contracts.agent import ToolCall, agent_task_queue
from mwp.dev.stack import BackgroundStack
from mwp.stores.objects import open_store
from mwp.workers.agent import build_agent_worker
from tests.integration import tool_agent
from tests.integration.conftest import authority_worker_on, new_organization
from tests.integration.missions_helper import eventually
from tests.integration.tool_workflows import ToolCallsInput, ToolCallsProbe

MISSION = "urn:mwp:mission:tools"
ITEM = "urn:mwp:work-item:tools-1"


def _call(tool: str, name: str, *args: object, epoch: int = 1, op_id: str = "op-1") -> ToolCall:
    return ToolCall(MISSION, ITEM, epoch, op_id, tool, [name, *args])


@pytest.fixture
def effects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    root = tmp_path / "external"
    monkeypatch.setenv("MWP_TEST_TOOL_EFFECTS", str(root))
    yield root


@asynccontextmanager
async def _agent_worker(client: MwpClient, store: Path) -> AsyncIterator[str]:
    """The tool agent's worker in-process, on a private task queue."""
    queue = f"mwp-test-agent-{uuid.uuid4().hex[:8]}"
    ledger = ToolLedger(open_store(store))
    async with build_agent_worker(client.temporal, tool_agent.agent, ledger, task_queue=queue):
        yield queue


async def _run(
    client: MwpClient, agent_queue: str, *calls: ToolCall, heartbeat: float = 30
) -> list[object]:
    async with authority_worker_on(client, [ToolCallsProbe]) as queue:
        result: list[object] = await client.temporal.execute_workflow(
            ToolCallsProbe.run,
            ToolCallsInput(agent_queue, list(calls), heartbeat),
            id=f"mwp-test-tools-{uuid.uuid4().hex[:8]}",
            task_queue=queue,
        )
    return result


async def test_the_same_operation_twice_has_one_effect_and_returns_one_result(
    mwp_client: MwpClient, effects: Path, tmp_path: Path
) -> None:
    call = _call("effect", "same")
    async with _agent_worker(mwp_client, tmp_path / "ledger") as queue:
        first, second = await _run(mwp_client, queue, call, call)
    assert first == second  # the second is the recorded result (its nonce included)
    # One effect, named by the key derived from Mission, WorkItem, Ownership Epoch and op ID.
    assert tool_agent.effect_keys(effects, "same") == [call.key().removeprefix("sha256:")]
    assert tool_agent.call_count(effects, "same") == 1  # the ledger answered the repeat
    record = await ToolLedger(open_store(tmp_path / "ledger")).recorded(call.key())
    assert record is not None and record.result == first


async def test_a_new_ownership_epoch_or_op_id_gets_a_fresh_key_and_a_second_effect(
    mwp_client: MwpClient, effects: Path, tmp_path: Path
) -> None:
    epoch_1 = _call("effect", "fresh", epoch=1)
    epoch_2 = _call("effect", "fresh", epoch=2)
    other_op = _call("effect", "fresh", epoch=1, op_id="op-2")
    async with _agent_worker(mwp_client, tmp_path / "ledger") as queue:
        one, two, three = await _run(mwp_client, queue, epoch_1, epoch_2, other_op)
    assert len({epoch_1.key(), epoch_2.key(), other_op.key()}) == 3
    assert one != two and two != three
    assert tool_agent.effect_keys(effects, "fresh") == sorted(
        c.key().removeprefix("sha256:") for c in (epoch_1, epoch_2, other_op)
    )
    assert tool_agent.call_count(effects, "fresh") == 3


async def test_a_tool_that_raises_once_is_retried_by_temporal_and_recorded_once(
    mwp_client: MwpClient, effects: Path, tmp_path: Path
) -> None:
    call = _call("flaky", "flaky")
    async with _agent_worker(mwp_client, tmp_path / "ledger") as queue:
        (result,) = await _run(mwp_client, queue, call)
        (again,) = await _run(mwp_client, queue, call)
    assert tool_agent.call_count(effects, "flaky") == 2  # the failure, then the retry
    assert again == result
    store = open_store(tmp_path / "ledger")
    assert len(store.list_keys("tools/")) == 1
    record = await ToolLedger(store).recorded(call.key())
    assert record is not None and record.result == result


@pytest.mark.parametrize(
    ("call", "error_type"),
    [
        (_call("no-such-tool", "x"), "UnknownTool"),
        (ToolCall(MISSION, ITEM, 0, "op-1", "effect", ["x"]), "InvalidToolCall"),
        (
            ToolCall(MISSION, ITEM, 1, "op-1", "effect", ["x"], {"idempotency_key": "k"}),
            "InvalidToolCall",
        ),
    ],
)
async def test_a_call_that_cannot_succeed_fails_at_once_without_calling_the_tool(
    mwp_client: MwpClient, effects: Path, tmp_path: Path, call: ToolCall, error_type: str
) -> None:
    async with _agent_worker(mwp_client, tmp_path / "ledger") as queue:
        with pytest.raises(WorkflowFailureError) as failure:
            await _run(mwp_client, queue, call)
    activity_error = failure.value.cause
    assert isinstance(activity_error, ActivityError)
    assert isinstance(activity_error.cause, ApplicationError)
    assert activity_error.cause.type == error_type
    assert tool_agent.call_count(effects, "x") == 0


# --- the agent worker process -----------------------------------------------------------------


class AgentProcess:
    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.output: list[str] = []

    async def ready(self, timeout: float = 60) -> str:
        """Read stdout until the task queue line; the lines read so far."""
        assert self.process.stdout is not None
        while True:
            line = await asyncio.wait_for(self.process.stdout.readline(), timeout)
            if not line:
                rc = await self.process.wait()
                pytest.fail(f"agent worker exited {rc} before it was ready: {self.output}")
            self.output.append(line.decode())
            if line.startswith(b"Task queue"):
                return "".join(self.output)


@asynccontextmanager
async def agent_process(
    stack: BackgroundStack, state: Path, organization_id: str, env: dict[str, str]
) -> AsyncIterator[AgentProcess]:
    """`mwp agent run tests.integration.tool_agent:agent`, SIGKILLed on leaving if still up."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "mwp",
        "agent",
        "run",
        "tests.integration.tool_agent:agent",
        "--direct",  # the operators' mode: the runtime registers its card itself
        "--address",
        stack.address,
        "--state-dir",
        str(state),
        "--org",
        organization_id,
        "--tool-store",
        str(state / "ledger"),
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, **env},
    )
    try:
        yield AgentProcess(process)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def _agent_setup(client: MwpClient, tmp_path: Path) -> tuple[str, Path, dict[str, str], str]:
    organization = await new_organization(client)
    state = tmp_path / "state"
    KeyStore.in_state_dir(state).save("registry-service", organization.registrar)
    agent_id = f"urn:mwp:agent:tools-{uuid.uuid4().hex[:8]}"
    env = {
        "MWP_TEST_AGENT_ID": agent_id,
        "MWP_TEST_AGENT_ORG": organization.organization_id,
        "MWP_TEST_AGENT_KEY_DIR": str(tmp_path / "agent-keys"),
        "MWP_TEST_TOOL_EFFECTS": str(tmp_path / "external"),
    }
    return organization.organization_id, state, env, agent_id


async def test_mwp_agent_run_registers_the_card_opens_a_session_and_exits_0_on_sigint(
    mwp_client: MwpClient, temporal_stack: BackgroundStack, tmp_path: Path
) -> None:
    organization_id, state, env, agent_id = await _agent_setup(mwp_client, tmp_path)
    registry = mwp_client.registry(organization_id, None)
    assert await registry.agent_card(agent_id) is None

    for expected_epoch in (1, 2):
        async with agent_process(temporal_stack, state, organization_id, env) as agent:
            out = await agent.ready()
            assert f"Session Epoch {expected_epoch}" in out, out
            assert "Agent Card version 1" in out, out  # the same key and card: no new version
            assert agent_task_queue(agent_id) in out
            card = await registry.agent_card(agent_id)
            assert card is not None and card["cardVersion"] == 1
            assert [c["id"] for c in card["capabilities"]] == ["mwp.test.tools"]
            assert (await registry.session_epochs())[agent_id] == expected_epoch
            agent.process.send_signal(signal.SIGINT)
            assert await asyncio.wait_for(agent.process.wait(), 30) == 0


async def test_a_worker_killed_mid_tool_is_retried_on_another_and_the_effect_happens_once(
    mwp_client: MwpClient, temporal_stack: BackgroundStack, tmp_path: Path
) -> None:
    organization_id, state, env, agent_id = await _agent_setup(mwp_client, tmp_path)
    external = Path(env["MWP_TEST_TOOL_EFFECTS"])
    call = _call("slow-effect", "crash", 120.0)
    async with authority_worker_on(mwp_client, [ToolCallsProbe]) as queue:
        async with agent_process(temporal_stack, state, organization_id, env) as first:
            await first.ready()
            handle = await mwp_client.temporal.start_workflow(
                ToolCallsProbe.run,
                ToolCallsInput(agent_task_queue(agent_id), [call], heartbeat_seconds=2),
                id=f"mwp-test-tools-crash-{uuid.uuid4().hex[:8]}",
                task_queue=queue,
            )

            async def effect_made() -> bool:
                return len(tool_agent.effect_keys(external, "crash")) == 1

            await eventually(effect_made, timeout=60)
            first.process.kill()  # after the effect, before the result is recorded
            await first.process.wait()
        ledger = ToolLedger(open_store(state / "ledger"))
        assert await ledger.recorded(call.key()) is None

        async with agent_process(temporal_stack, state, organization_id, env) as second:
            await second.ready()
            (result,) = await asyncio.wait_for(handle.result(), 60)
            second.process.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(second.process.wait(), 30) == 0
    # The tool ran twice (the window was crossed); the external system saw one effect.
    assert tool_agent.call_count(external, "crash") == 2
    assert tool_agent.effect_keys(external, "crash") == [call.key().removeprefix("sha256:")]
    record = await ledger.recorded(call.key())
    assert record is not None and record.result == result


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("tests.integration.tool_agent", "expected MODULE:ATTR"),
        ("tests.integration.no_such_module:agent", "cannot import module"),
        ("tests.integration.tool_agent:missing", "has no attribute 'missing'"),
        ("tests.integration.tool_agent:AGENT_ID", "not an mwp.agent.Agent"),
    ],
)
def test_mwp_agent_run_on_a_bad_target_exits_non_zero_with_a_clear_message(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, target: str, message: str
) -> None:
    code = main(["agent", "run", target, "--state-dir", str(tmp_path), "--address", "127.0.0.1:1"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("mwp agent: ") and message in err, err


def test_mwp_agent_run_without_an_organization_says_how_to_name_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code = main(
        [
            "agent",
            "run",
            "tests.integration.tool_agent:agent",
            "--direct",
            "--state-dir",
            str(tmp_path),
        ]
    )
    assert code == 1
    assert "pass --org or run `mwp registry init`" in capsys.readouterr().err
