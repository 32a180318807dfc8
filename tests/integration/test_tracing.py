"""Tracing: a Command's Update, the MissionWorkflow's handling of it and the mirror activity
form one trace, exported through :mod:`mwp.workers.tracing` by the OpenTelemetry SDK's own
in-memory exporter.

The Mission runs on a private task queue of a worker built like the product's; its mirror on
another queue. Both workers' client is untraced: they trace through MwpPlugin, as ``mwp dev``'s
worker does.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import re
import sys
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.client import Client
from temporalio.worker import Worker

from mwp.activities.mirror import Mirror
from mwp.cli import main
from mwp.client import MwpClient
from mwp.contracts.mission import (
    MIRROR_EVENTS,
    MISSION_WORKFLOW_TYPE,
    QUERY_MIRRORED_THROUGH,
    UPDATE_COMMAND,
)
from mwp.dev.stack import BackgroundStack
from mwp.stores.objects import open_store
from mwp.workers import tracing
from mwp.workers.authority import build_authority_worker
from mwp.workers.log_format import configure_logging
from mwp.workers.observability import add_observability_args, configure_observability
from mwp.workers.plugin import MwpPlugin
from tests.integration.conftest import stack_keyring, stack_log_location
from tests.integration.missions_helper import eventually, new_mission


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    tracing.enable_tracing(service_name="mwp-test", exporter=exporter)
    try:
        yield exporter
    finally:
        tracing.disable_tracing()


def named(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def links_to(span: ReadableSpan, target: ReadableSpan) -> bool:
    return any(link.context.span_id == target.context.span_id for link in span.links)


def parent_of(span: ReadableSpan, spans: Sequence[ReadableSpan]) -> ReadableSpan:
    assert span.parent is not None, f"{span.name} has no parent"
    (parent,) = [s for s in spans if s.context.span_id == span.parent.span_id]
    return parent


async def test_a_command_update_the_mission_workflow_and_the_mirror_are_one_trace(
    temporal_stack: BackgroundStack, spans: InMemorySpanExporter
) -> None:
    (interceptor,) = tracing.active_interceptors()
    # The sender's client is traced; the workers' client is not: like `mwp dev`, they trace
    # through MwpPlugin alone.
    temporal = await Client.connect(
        temporal_stack.address, namespace=temporal_stack.namespace, interceptors=[interceptor]
    )
    workers = await Client.connect(temporal_stack.address, namespace=temporal_stack.namespace)
    queue, mirror_queue = (f"mwp-tracing-{uuid.uuid4().hex[:8]}" for _ in range(2))
    mirror = Mirror(open_store(stack_log_location()), stack_keyring())
    with ThreadPoolExecutor(max_workers=1) as executor:
        async with (
            build_authority_worker(workers, task_queue=queue, keyring=stack_keyring()),
            Worker(
                workers,
                task_queue=mirror_queue,
                activities=[mirror.mirror_events, mirror.archive_group],
                activity_executor=executor,
                plugins=[MwpPlugin()],
            ),
        ):
            rig = await new_mission(
                MwpClient(temporal, task_queue=queue), mirror_task_queue=mirror_queue
            )
            await rig.post(rig.crew.owner, "hello")
            sequence = await rig.mission.sequence()
            handle = temporal.get_workflow_handle(rig.workflow_id)

            async def mirrored() -> bool:
                await asyncio.sleep(0)
                through: int = await handle.query(QUERY_MIRRORED_THROUGH)
                return through == sequence and bool(named(_finished(spans), _RUN_MIRROR))

            await eventually(mirrored, timeout=20)

    finished = _finished(spans)
    # The Mission's trace starts at the client's update-with-start that created it.
    (created,) = named(finished, f"StartUpdateWithStartWorkflow:{MISSION_WORKFLOW_TYPE}")
    mission_trace = created.context.trace_id
    # The Command: the client's Update span, and the workflow's validation and handling of it,
    # which the contrib interceptor places in the Mission's trace with a link to the Update.
    (update,) = named(finished, f"StartWorkflowUpdate:{UPDATE_COMMAND}")
    for step in ("ValidateUpdate", "HandleUpdate"):
        (handled,) = [s for s in named(finished, f"{step}:{UPDATE_COMMAND}") if links_to(s, update)]
        assert parent_of(handled, finished) is created
        assert handled.attributes is not None
        assert handled.attributes["temporalWorkflowID"] == rig.workflow_id
    # The mirror: scheduled by the workflow, run by the mirror worker, in the Mission's trace.
    runs = named(finished, _RUN_MIRROR)
    assert runs
    for run in runs:
        scheduled = parent_of(run, finished)
        assert scheduled.name == f"StartActivity:{MIRROR_EVENTS}"
        assert parent_of(scheduled, finished) is created
        assert run.context.trace_id == mission_trace
    # Every span the worker process made carries the configured service name.
    assert {s.resource.attributes["service.name"] for s in finished} == {"mwp-test"}


_RUN_MIRROR = f"RunActivity:{MIRROR_EVENTS}"


def _finished(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return list(exporter.get_finished_spans())


def test_tracing_is_off_unless_an_endpoint_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(tracing.OTLP_ENDPOINT_ENV, raising=False)
    parser = argparse.ArgumentParser()
    add_observability_args(parser)
    off = configure_observability(parser.parse_args([]), service_name="mwp-test")
    assert off.interceptors == [] and tracing.active_interceptors() == []
    assert MwpPlugin().interceptors is None
    monkeypatch.setenv(tracing.OTLP_ENDPOINT_ENV, "http://127.0.0.1:4317")
    on: Any = configure_observability(parser.parse_args([]), service_name="mwp-test")
    try:
        assert on.interceptors == tracing.active_interceptors() != []
        assert MwpPlugin().interceptors == on.interceptors
    finally:
        on.shutdown()
    assert tracing.active_interceptors() == []


def test_tracing_without_the_otel_extra_stops_with_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # What an installation without the extra sees: the SDK's package cannot be imported.
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)
    with pytest.raises(tracing.TracingUnavailableError, match=re.escape(tracing.INSTALL_HINT)):
        tracing.enable_tracing(service_name="mwp-test", endpoint="http://127.0.0.1:4317")
    try:
        code = main(["dev", "--headless", "--otel-endpoint", "http://127.0.0.1:4317"])
    finally:
        logging.getLogger().removeHandler(configure_logging("text", "WARNING"))
    assert code == 2  # before anything started
    assert tracing.INSTALL_HINT in capsys.readouterr().err
    assert tracing.active_interceptors() == []
