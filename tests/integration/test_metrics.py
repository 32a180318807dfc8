"""The authority worker's Prometheus endpoint shows the product's counters moving.

A worker whose client has a metrics runtime serves a Mission on a private task queue; the
Group's mirror runs on another queue, served only once the test starts a mirror worker there,
so the mirror lag is first the Group's whole log, then nothing.
"""

from __future__ import annotations

import asyncio
import re
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.worker import Worker

from mwp.activities.mirror import Mirror
from mwp.cli import build_parser
from mwp.client import MwpClient
from mwp.contracts.metrics import (
    COMMANDS_ACCEPTED,
    COMMANDS_REFUSED,
    DECISION_LATENCY,
    DEFAULT_METRICS_PORT,
    GATEWAY_CONNECTIONS,
    MIRROR_LAG,
)
from mwp.contracts.mission import MISSION_WORKFLOW_TYPE, QUERY_MIRRORED_THROUGH
from mwp.contracts.organization import REGISTRY_WORKFLOW_TYPE
from mwp.core.errors import ErrorCode, MwpError
from mwp.dev.stack import (
    BackgroundStack,
    DevStack,
    StackConfig,
    StackError,
    free_port,
    stack_config,
)
from mwp.stores.objects import open_store
from mwp.workers.authority import build_authority_worker, metrics_runtime
from tests.integration.conftest import stack_keyring, stack_log_location
from tests.integration.missions_helper import eventually, new_mission

SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][\w:]*)(?:\{(?P<labels>.*)\})? (?P<value>\S+)$")
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def scrape(port: int) -> list[tuple[str, dict[str, str], float]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text: str = response.read().decode()
    samples = []
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if match and not line.startswith("#"):
            labels = dict(LABEL.findall(match["labels"] or ""))
            samples.append((match["name"], labels, float(match["value"])))
    return samples


def value(port: int, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples carrying ``labels`` (0 if none)."""
    return sum(
        v
        for n, have, v in scrape(port)
        if n == name and all(have.get(k) == want for k, want in labels.items())
    )


async def test_the_metrics_endpoint_counts_commands_by_outcome_and_shows_mirror_lag(
    temporal_stack: BackgroundStack,
) -> None:
    port = free_port()
    temporal = await Client.connect(
        temporal_stack.address,
        namespace=temporal_stack.namespace,
        runtime=metrics_runtime(port),
    )
    queue, mirror_queue = (f"mwp-metrics-{uuid.uuid4().hex[:8]}" for _ in range(2))
    mission = {"task_queue": queue, "workflow_type": MISSION_WORKFLOW_TYPE}
    async with build_authority_worker(temporal, task_queue=queue, keyring=stack_keyring()):
        rig = await new_mission(
            MwpClient(temporal, task_queue=queue), mirror_task_queue=mirror_queue
        )
        await rig.post(rig.crew.owner, "hello")
        await rig.assert_refused(
            lambda: rig.post(rig.crew.owner, "late", expected_revision=2**40),
            ErrorCode.REVISION_CONFLICT,
        )
        with pytest.raises(MwpError) as unknown:
            await rig.crew.organization.registry.open_session("urn:mwp:agent:nobody")
        accepted, refused = f"{COMMANDS_ACCEPTED}_total", f"{COMMANDS_REFUSED}_total"
        assert value(port, accepted, duplicate="false", **mission) == 2  # create and post
        assert value(port, refused, code="REVISION_CONFLICT", **mission) == 1
        assert value(port, refused, **mission) == 1
        registry = {"task_queue": queue, "workflow_type": REGISTRY_WORKFLOW_TYPE}
        assert value(port, accepted, duplicate="false", **registry) > 0  # the crew's bindings
        assert value(port, refused, code=unknown.value.code.value, **registry) == 1
        # Temporal's own metrics are there too, among them the decision latency.
        assert value(port, f"{DECISION_LATENCY}_count", workflow_type=MISSION_WORKFLOW_TYPE) > 0
        assert value(port, "temporal_worker_task_slots_available", task_queue=queue) > 0

        group = {"group_id": rig.mission.group_id, **mission}
        sequence = await rig.mission.sequence()
        assert value(port, MIRROR_LAG, **group) == sequence  # no mirror yet: all of it
        mirror = Mirror(open_store(stack_log_location()), stack_keyring())
        with ThreadPoolExecutor(max_workers=1) as executor:
            async with Worker(
                temporal,
                task_queue=mirror_queue,
                activities=[mirror.mirror_events, mirror.archive_group],
                activity_executor=executor,
            ):

                async def caught_up() -> bool:
                    await asyncio.sleep(0)
                    return value(port, MIRROR_LAG, **group) == 0

                await eventually(caught_up, timeout=20)
        handle = temporal.get_workflow_handle(rig.workflow_id)
        assert await handle.query(QUERY_MIRRORED_THROUGH) == sequence


async def test_the_dev_stack_serves_its_clients_metrics_only_when_asked(
    temporal_stack: BackgroundStack, tmp_path: Path
) -> None:
    port = free_port()
    existing = {"temporal_address": temporal_stack.address, "run_worker": False}
    async with DevStack(StackConfig(state_dir=tmp_path, metrics_port=port, **existing)) as stack:
        await stack.client.count_workflows()
        assert f"Metrics    http://127.0.0.1:{port}/metrics" in stack.describe()
        assert value(port, "temporal_request_total", operation="CountWorkflowExecutions") > 0
        with pytest.raises(StackError, match=f"cannot serve metrics on 127.0.0.1:{port}"):
            await DevStack(StackConfig(state_dir=tmp_path, metrics_port=port, **existing)).start()
    off = StackConfig(state_dir=tmp_path, **existing)
    assert off.metrics_url is None and not any(
        "Metrics" in line for line in DevStack(off).describe()
    )


def test_metrics_port_alone_binds_the_default_port_and_zero_or_nothing_turns_them_off() -> None:
    parser = build_parser()
    ports = [
        stack_config(metrics_port=parser.parse_args(["dev", *flags]).metrics_port).metrics_port
        for flags in (["--metrics-port"], ["--metrics-port", "9999"], ["--metrics-port", "0"], [])
    ]
    assert ports == [DEFAULT_METRICS_PORT, 9999, None, None]


async def test_the_gateway_counts_its_connections_with_and_without_a_session(
    mwp_client: MwpClient, tmp_path: Path
) -> None:
    from mwp.gateway.server import GatewayOptions
    from tests.integration.missions_helper import new_crew
    from tests.integration.test_gateway import running_gateway

    port = free_port()
    runtime = metrics_runtime(port)  # kept: the exporter lives as long as its runtime
    crew = await new_crew(mwp_client, workers=1)

    def connections(authenticated: str) -> float:
        return value(port, GATEWAY_CONNECTIONS, authenticated=authenticated)

    options = GatewayOptions(metric_meter=runtime.metric_meter)
    async with running_gateway(mwp_client, crew.organization, tmp_path, options=options) as gw:
        async with gw.client() as client:
            await eventually(lambda: _true(connections("false") == 1), timeout=10)
            await client.hello(crew.workers[0])
            await eventually(lambda: _true(connections("true") == 1), timeout=10)
            assert connections("false") == 0
        await eventually(lambda: _true(connections("true") == 0), timeout=10)


async def _true(condition: bool) -> bool:
    return condition
