"""Upgrading to sealed messages never leaves a Group without its Registry notices.

A registry run that started before the upgrade keeps taking messages as it did (its history
says so); the first sealed message it receives makes it continue as new, and the new run seals
its notices. Here the first run is made to behave as such a run (``workflow.patched`` answers
False for it), on a real dev server.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from temporalio import workflow

from mwp.client import Identity, MwpClient
from mwp.core.trust.registry import Principal
from mwp.workflows.organization import OrganizationRegistryWorkflow
from mwp.workflows.patches import REGISTRY_SEALED_MESSAGES
from tests.integration.missions_helper import eventually
from tests.integration.probe_workflows import RegistrySubscriberProbe


async def test_a_registry_run_from_before_sealing_rolls_over_for_its_first_sealed_subscriber(
    mwp_client: MwpClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = workflow.patched

    def patched(patch_id: str) -> bool:
        if patch_id == REGISTRY_SEALED_MESSAGES.id and workflow.info().continued_run_id is None:
            return False  # the first run: as if it started before the upgrade
        return real(patch_id)

    monkeypatch.setattr(workflow, "patched", patched)
    from tests.integration.conftest import authority_worker_on

    organization_id = f"urn:mwp:organization:test-{uuid.uuid4().hex[:12]}"
    registrar = Identity.generate(Principal("service", "urn:mwp:service:registry"))
    workflows = [OrganizationRegistryWorkflow, RegistrySubscriberProbe]
    async with authority_worker_on(mwp_client, workflows) as queue:
        client = MwpClient(mwp_client.temporal, task_queue=queue)
        registry = await client.start_registry(organization_id, registrar)
        first_run = (await registry.view())["runId"]
        probe = await mwp_client.temporal.start_workflow(
            RegistrySubscriberProbe.run,
            organization_id,
            id=f"probe-{uuid.uuid4()}",
            task_queue=queue,
        )

        async def probe_opened_a_notice() -> bool:
            seen: dict[str, Any] = await probe.query(RegistrySubscriberProbe.seen)
            return seen["revision"] >= 1

        await eventually(probe_opened_a_notice, timeout=20)
        seen = await probe.query(RegistrySubscriberProbe.seen)
        assert seen["refused"] == 0
        view = await registry.view()
        assert view["runId"] != first_run, "the old run rolled over to a sealing one"
        assert probe.id in view["subscribers"]
        # Later notices reach it sealed too.
        await registry.register_binding(Identity.generate(Principal("human", "urn:mwp:human:x")))

        async def probe_sees_revision_2() -> bool:
            seen = await probe.query(RegistrySubscriberProbe.seen)
            return bool(seen["revision"] >= 2)

        await eventually(probe_sees_revision_2, timeout=20)
        await probe.signal(RegistrySubscriberProbe.finish)
        await probe.result()
