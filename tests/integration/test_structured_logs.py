"""Structured logs: with ``--log-format json`` every line a process logs is one JSON object,
and a workflow's lines name the Mission they are about.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from temporalio import workflow

from mwp.client import MwpClient
from mwp.contracts.mission import SIGNAL_TIMER_FIRED
from mwp.contracts.work_item import work_item_workflow_id
from mwp.core.errors import ErrorCode, MwpError
from mwp.dev.stack import BackgroundStack
from mwp.workers.log_format import JsonLineFormatter, configure_logging, ids_of_workflow
from mwp.workers.observability import add_observability_args
from tests.integration.conftest import stack_log_location
from tests.integration.missions_helper import eventually, new_mission

KEYS = {"time", "level", "logger", "message"}


@pytest.fixture
def json_lines() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    configure_logging("json", "INFO", stream)
    try:
        yield stream
    finally:  # back to text (replacing the JSON handler), then without that handler either
        logging.getLogger().removeHandler(configure_logging("text", "WARNING"))
        assert workflow.logger.workflow_info_on_message


def parsed(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


async def test_a_workflows_log_line_is_json_and_names_its_mission(
    mwp_client: MwpClient, json_lines: io.StringIO
) -> None:
    rig = await new_mission(mwp_client)
    handle = mwp_client.temporal.get_workflow_handle(rig.workflow_id)
    await handle.signal(SIGNAL_TIMER_FIRED, {})  # malformed: refused, and logged

    async def logged() -> bool:
        return any("timer-fired" in line["message"] for line in parsed(json_lines))

    await eventually(logged, timeout=20)
    (line,) = [line for line in parsed(json_lines) if "timer-fired" in line["message"]]
    assert set(line) >= KEYS and line["level"] == "WARNING"
    assert line["logger"] == "temporalio.workflow"
    assert line["missionId"] == rig.mission.mission_id
    # The workflow's details are fields here, not appended to the message.
    assert rig.workflow_id not in line["message"]


def test_the_json_formatter_takes_mwp_fields_from_extra_and_from_an_mwp_error() -> None:
    formatter = JsonLineFormatter()
    record = logging.LogRecord("mwp.agent", logging.INFO, __file__, 1, "run %s", ("w1",), None)
    record.agentId = "urn:mwp:agent:writer"
    record.workItemId = "w1"
    line = json.loads(formatter.format(record))
    assert line["message"] == "run w1" and line["agentId"] == "urn:mwp:agent:writer"
    assert line["workItemId"] == "w1" and "code" not in line
    try:
        raise MwpError(ErrorCode.REVISION_CONFLICT, "stale")
    except MwpError:
        failed = logging.LogRecord("mwp", logging.ERROR, __file__, 1, "refused", (), sys.exc_info())
    line = json.loads(formatter.format(failed))
    assert line["code"] == "REVISION_CONFLICT" and "MwpError" in line["exception"]
    assert ids_of_workflow(work_item_workflow_id("urn:mwp:mission:m", "w2")) == {
        "missionId": "urn:mwp:mission:m",
        "workItemId": "w2",
    }


def test_log_format_defaults_to_text_and_refuses_other_formats() -> None:
    parser = argparse.ArgumentParser()
    add_observability_args(parser)
    assert parser.parse_args([]).log_format == "text"
    with pytest.raises(SystemExit):
        parser.parse_args(["--log-format", "yaml"])


def test_the_authority_worker_logs_json_lines(temporal_stack: BackgroundStack) -> None:
    # The session's own keys and log store: this second worker is interchangeable with the
    # session's, so whatever task it takes it handles the same way.
    state_dir = temporal_stack.stack.config.state_dir
    argv = [sys.executable, "-m", "mwp.workers.authority", "--address", temporal_stack.address]
    argv += ["--state-dir", str(state_dir), "--log-store", stack_log_location()]
    argv += ["--namespace", temporal_stack.namespace, "--log-format", "json"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    worker = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, env=env)
    lines: list[dict[str, Any]] = []
    try:
        assert worker.stderr is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            text = worker.stderr.readline()
            if not text:
                break
            lines.append(json.loads(text))  # every line is one JSON object
            if "authority worker polling" in lines[-1]["message"]:
                break
        worker.send_signal(signal.SIGTERM)
        _, rest = worker.communicate(timeout=30)
        lines += [json.loads(text) for text in rest.splitlines()]
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    assert worker.returncode == 0
    assert all(set(line) >= KEYS for line in lines)
    (polling,) = [line for line in lines if "authority worker polling" in line["message"]]
    assert polling["logger"] == "mwp.workers.authority" and polling["level"] == "INFO"
    assert any(line["logger"].startswith("temporalio.worker") for line in lines)  # shutdown
