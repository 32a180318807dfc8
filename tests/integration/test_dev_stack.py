"""The embedded stack: `mwp dev` start/stop/restart with persistence, PID-exact shutdown,
startup failures that explain themselves, and the existing-cluster mode."""

from __future__ import annotations

import asyncio
import fcntl
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.client import WorkflowExecutionStatus

from mwp.client import Identity, connect
from mwp.contracts.organization import organization_workflow_id
from mwp.core.trust.registry import Principal
from mwp.dev.stack import (
    BackgroundStack,
    DevStack,
    StackConfig,
    StackError,
    TemporalDevServer,
    ensure_search_attributes,
    free_port,
    temporal_binary,
    terminate_process,
)

REPO = Path(__file__).resolve().parents[2]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


class MwpDev:
    """`python -m mwp dev` as a child process, with its output read until it is ready."""

    def __init__(self, state_dir: Path, port: int, ui_port: int, *extra: str) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mwp",
                "dev",
                "--state-dir",
                str(state_dir),
                "--port",
                str(port),
                "--ui-port",
                str(ui_port),
                "--no-gateway",  # its default ports may be taken on a shared machine
                "--no-console",
                *extra,
            ],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.address = f"127.0.0.1:{port}"
        self.output: list[str] = []
        self.server_pid = 0
        assert self.process.stdout is not None
        deadline = time.monotonic() + 60
        for line in self.process.stdout:
            self.output.append(line)
            if match := re.search(r"Server PID (\d+)", line):
                self.server_pid = int(match[1])
            if line.startswith("Ready"):
                break
            assert time.monotonic() < deadline, "".join(self.output)
        assert self.server_pid, "".join(self.output)

    def interrupt(self) -> int:
        """Ctrl-C, as a terminal would send it; the exit code."""
        self.process.send_signal(signal.SIGINT)
        remaining, _ = self.process.communicate(timeout=30)
        self.output.append(remaining)
        return self.process.returncode

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def decoy() -> Iterator[subprocess.Popen[bytes]]:
    """A process whose command line looks like a dev server: stopping by name would hit it."""
    process = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)", "temporal", "server", "start-dev"]
    )
    yield process
    process.kill()
    process.wait()


async def test_mwp_dev_restarts_on_the_same_folder_and_finds_earlier_workflows(
    tmp_path: Path, decoy: subprocess.Popen[bytes]
) -> None:
    state = tmp_path / ".mwp"
    port, ui_port = free_port(), free_port()
    # The server suggests continue-as-new early: proves --dynamic-config reaches it, and that
    # the registry follows the server's suggestion (no threshold of its own here).
    lowered = "limit.historyCount.suggestContinueAsNew=20"
    # Killed at once when it stops (as the demo's throwaway stack is): the restart below
    # proves a killed server's SQLite file still holds every workflow.
    hasty = "--server-stop-seconds=0.01"
    first = MwpDev(state, port, ui_port, "--dynamic-config", lowered, hasty)
    try:
        assert (state / "temporal.sqlite").exists()
        client = await connect(f"127.0.0.1:{port}")
        organization_id = "urn:mwp:organization:persistent"
        registrar = Identity.generate(Principal("service", "urn:mwp:service:registry"))
        registry = await client.start_registry(organization_id, registrar)
        first_run = (await registry.view())["runId"]
        for i in range(6):
            human = Identity.generate(Principal("human", f"urn:mwp:human:h{i}"))
            await registry.register_binding(human)
        assert (await registry.view())["runId"] != first_run

        # A second stack on the same folder is refused while the first runs.
        with pytest.raises(StackError, match="already used by a running dev stack"):
            await DevStack(StackConfig(state_dir=state, port=free_port(), ui_port=None)).start()
    finally:
        code = first.interrupt() if first.process.poll() is None else first.process.returncode
    assert code == 0, "".join(first.output)
    assert "Stopped (the dev server killed after 0.01 s)." in "".join(first.output)
    assert not _alive(first.server_pid)  # its own server is gone...
    assert decoy.poll() is None  # ...and nothing else was touched

    second = MwpDev(state, free_port(), free_port())
    try:
        client = await connect(second.address)
        workflow_id = organization_workflow_id(organization_id)
        query = f"WorkflowId = '{workflow_id}'"
        runs = [w async for w in client.temporal.list_workflows(query)]
        # Every run of the first stack is listed: the closed ones and the running one.
        assert {w.id for w in runs} == {workflow_id} and len(runs) >= 2
        assert [w.status for w in runs].count(WorkflowExecutionStatus.RUNNING) == 1
        # The same workflow, still running, served by the new worker with all its state.
        assert await client.registry(organization_id).revision() == 7
    finally:
        code = second.interrupt() if second.process.poll() is None else second.process.returncode
        second.kill()
    assert code == 0, "".join(second.output)
    assert "Stopped." in "".join(second.output)  # given its time, the server stops by itself
    assert not _alive(second.server_pid)


def test_terminate_escalates_to_sigkill_for_a_process_that_ignores_sigterm() -> None:
    stubborn = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print('ready', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
    )
    assert stubborn.stdout is not None and stubborn.stdout.readline() == b"ready\n"
    started = time.monotonic()
    assert terminate_process(stubborn, timeout=0.5) == "killed"
    assert time.monotonic() - started < 5
    assert stubborn.returncode == -signal.SIGKILL
    assert terminate_process(stubborn, timeout=0.5) == "already-exited"


async def test_a_server_that_cannot_start_is_reported_with_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "temporal"
    broken.write_text("#!/bin/sh\necho 'boom: cannot open the database' >&2\nexit 3\n")
    broken.chmod(0o755)
    monkeypatch.setenv("MWP_TEMPORAL_BIN", str(broken))
    stack = DevStack(StackConfig(state_dir=tmp_path / "state", port=free_port(), ui_port=None))
    with pytest.raises(StackError) as info:
        await stack.start()
    message = str(info.value)
    assert "exited with code 3" in message
    assert "boom: cannot open the database" in message
    # The state folder's lock was released: a later stack may use it.
    with (tmp_path / "state" / "dev-stack.lock").open() as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    monkeypatch.delenv("MWP_TEMPORAL_BIN")
    assert temporal_binary().name == "temporal"


async def test_an_in_memory_stack_serves_and_writes_no_database(tmp_path: Path) -> None:
    dev = MwpDev(tmp_path, free_port(), free_port(), "--in-memory")
    try:
        assert "Temporal's state in memory" in "".join(dev.output)
        client = await connect(dev.address)
        registrar = Identity.generate(Principal("service", "urn:mwp:service:registry"))
        registry = await client.start_registry("urn:mwp:organization:in-memory", registrar)
        assert (await registry.view())["runId"]
        assert not list(tmp_path.glob("temporal.sqlite*"))
    finally:
        code = dev.interrupt() if dev.process.poll() is None else dev.process.returncode
        dev.kill()
    assert code == 0, "".join(dev.output)
    assert not _alive(dev.server_pid)


async def test_a_port_in_use_is_refused_before_anything_starts(tmp_path: Path) -> None:
    import socket

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        busy = holder.getsockname()[1]
        stack = DevStack(StackConfig(state_dir=tmp_path, port=busy, ui_port=None))
        with pytest.raises(StackError, match=f"port {busy} on 127.0.0.1 is already in use"):
            await stack.start()
    assert stack.server is not None and stack.server.pid is None


async def test_an_existing_cluster_is_used_without_starting_a_server(
    temporal_stack: BackgroundStack, tmp_path: Path
) -> None:
    config = StackConfig(
        state_dir=tmp_path, temporal_address=temporal_stack.address, run_worker=False
    )
    async with DevStack(config) as stack:
        assert stack.server is None and stack.server_pid is None
        assert stack.ui_url is None
        assert await ensure_search_attributes(stack.client, config.namespace) == []
    assert not (tmp_path / "temporal.sqlite").exists()


def test_the_embedded_server_runs_sqlite_in_wal_mode_with_a_larger_history_suggestion(
    tmp_path: Path,
) -> None:
    config = StackConfig(state_dir=tmp_path, port=free_port(), ui_port=None)
    argv = TemporalDevServer(config).command()
    pairs = {(argv[i], argv[i + 1]) for i in range(len(argv) - 1)}
    assert ("--sqlite-pragma", "journal_mode=wal") in pairs
    assert ("--sqlite-pragma", "synchronous=normal") in pairs
    assert ("--dynamic-config-value", "limit.historySize.suggestContinueAsNew=16777216") in pairs
    assert ("--dynamic-config-value", "limit.historyCount.suggestContinueAsNew=8000") in pairs
    # A caller's setting wins over the embedded default.
    override = {"limit.historySize.suggestContinueAsNew": 1024}
    lowered = TemporalDevServer(
        StackConfig(state_dir=tmp_path, port=free_port(), dynamic_config=override)
    ).command()
    assert "limit.historySize.suggestContinueAsNew=1024" in lowered
    assert "limit.historySize.suggestContinueAsNew=16777216" not in lowered


async def test_the_demo_on_a_cluster_that_another_authority_worker_serves_runs_apart(
    temporal_stack: BackgroundStack, tmp_path: Path
) -> None:
    """`mwp demo --temporal-address` next to a running `mwp dev`: that stack's worker holds
    other keys, so on a shared namespace it would take the demo's tasks and refuse them."""
    from mwp.dev.mission_demo import DEMO_NAMESPACE, demo_with_stack

    lines: list[str] = []
    # On a shared namespace the demo would wait forever on tasks the other worker refuses.
    demo = demo_with_stack(tmp_path, temporal_stack.address, lines.append)
    assert await asyncio.wait_for(demo, timeout=120)
    assert f"(namespace {DEMO_NAMESPACE})" in lines[0]
    assert "Mission state: approved" in lines[-1]
    client = await connect(temporal_stack.address, DEMO_NAMESPACE)
    demo_runs = [w async for w in client.temporal.list_workflows("WorkflowType='MissionWorkflow'")]
    assert demo_runs, "the demo's Mission runs in its own namespace"
