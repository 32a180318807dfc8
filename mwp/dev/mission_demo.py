"""`mwp demo`: one Mission end to end on the embedded stack.

A human creates the Mission; its Coordinator authorizes a chain of dependent WorkItems and
offers each to a Worker; the Worker accepts, starts and submits with Evidence; the
Coordinator accepts each result and submits the Mission; the human approves. Every step is a
signed Command decided by the Mission's Group Authority (a Temporal workflow). The demo prints
the Group's Events in order and the UI address, checks that the signed Group Event log holds
exactly those Events and verifies, and succeeds only if the Mission ends ``approved``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mwp.client import Identity, KeyStore, MwpClient, new_id, utc_now
from mwp.client.missions import MissionClient, MissionHandle, in_seconds
from mwp.client.review import approve_payload, review_record, signed_approval
from mwp.contracts.messages import group_authority
from mwp.contracts.mission import QUERY_MIRRORED_THROUGH
from mwp.core.trust.registry import Principal, RegistryEvidence
from mwp.dev.scenario import (
    definition_of_done,
    evidence_for,
    mission_budget,
    result_manifest,
    selection_basis,
    work_contract,
)
from mwp.log.group_log import GroupEventLog
from mwp.log.keys import AuthorityKeyring, provision_group_authority
from mwp.stores.artifacts import ArtifactStore
from mwp.stores.objects import open_store

ORGANIZATION = "urn:mwp:organization:demo"
DEMO_NAMESPACE = "mwp-demo"  # the demo's namespace on an existing cluster
STAGES = ("Analyse the requirements", "Implement the change", "Test the change")


class DemoFailedError(RuntimeError):
    pass


async def run_mission_demo(
    client: MwpClient,
    registrar: Identity,
    out: Callable[[str], None] = print,
    *,
    keyring: AuthorityKeyring,
    log_location: str,
) -> bool:
    registry = await client.start_registry(ORGANIZATION, registrar)
    await provision_group_authority(registry, keyring, group_authority(ORGANIZATION))
    artifact_store = ArtifactStore(open_store(log_location))
    # Each run brings its own people and agents, so runs never collide in a kept stack.
    run = new_id().rsplit("-", 1)[-1]
    owner = Identity.generate(Principal("human", f"urn:mwp:human:owner-{run}"))
    coordinator = Identity.generate(Principal("agent", f"urn:mwp:agent:coordinator-{run}"))
    worker = Identity.generate(Principal("agent", f"urn:mwp:agent:worker-{run}"))
    await registry.register_binding(owner)
    for agent in (coordinator, worker):
        await registry.register_agent(agent, owner=owner.principal)
    sessions = {
        a.principal.id: await registry.open_session(a.principal.id) for a in (coordinator, worker)
    }
    out(f"Organization {ORGANIZATION}: owner, Coordinator and Worker registered, sessions open")

    events: list[dict[str, Any]] = []
    mission, created = await MissionClient(client, ORGANIZATION).create(
        owner,
        objective="Deliver a tested change, end to end",
        coordinator_agent_id=coordinator.principal.id,
        definition_of_done=definition_of_done("The change is implemented and tested."),
        budget=mission_budget(),
        deadline=in_seconds(7 * 86400),
    )
    events += created["events"]
    out(f"Mission {mission.mission_id} created (workflow {mission.workflow_id})")

    async def coordinate(kind: str, payload: dict[str, Any], **kw: Any) -> dict[str, Any]:
        result = await mission.send(
            coordinator, kind, payload, session_epoch=sessions[coordinator.principal.id], **kw
        )
        events.extend(result["events"])
        return result

    async def work(kind: str, payload: dict[str, Any], item: str) -> dict[str, Any]:
        result = await mission.send(
            worker, kind, payload, work_item_id=item, session_epoch=sessions[worker.principal.id]
        )
        events.extend(result["events"])
        return result

    artifacts: list[str] = []
    previous: list[str] = []
    for goal in STAGES:
        item = new_id()
        contract = work_contract(goal, deadline=in_seconds(6 * 86400), dependencies=previous)
        await coordinate("work.authorize", {"contract": contract}, work_item_id=item)
        offered = await coordinate(
            "work.offer",
            {
                "candidates": [
                    {
                        "agentId": worker.principal.id,
                        "selectionBasis": selection_basis(in_seconds(60)),
                    }
                ],
                "expiresAt": in_seconds(3600),
                # The item's signed Context Package: what a Worker new to the Group is handed.
                "contextPackage": await mission.offer_context_package(coordinator, item),
            },
            work_item_id=item,
        )
        offer = _event(offered, "work.offer.created")["payload"]["offers"][0]
        accepted = await work(
            "work.accept_offer",
            {"offerId": offer["offerId"], "contractVersion": contract["contractVersion"]},
            item,
        )
        epoch = _event(accepted, "work.offer.accepted")["payload"]["owner"]["ownershipEpoch"]
        started = await work("work.start", {"ownershipEpoch": epoch}, item)
        lease = _event(started, "work.started")["payload"]["executionLease"]["leaseId"]
        # The Worker stores its result in the Artifact store and publishes its signed manifest.
        manifest = result_manifest(
            worker,
            mission_id=mission.mission_id,
            group_id=mission.group_id,
            work_item_id=item,
            text=goal,
            created_at=utc_now(),
            store=artifact_store,
        )
        artifact = manifest["contentHash"]
        await work(
            "artifact.publish",
            {"ownershipEpoch": epoch, "leaseId": lease, "manifest": manifest},
            item,
        )
        await work(
            "work.submit",
            {
                "ownershipEpoch": epoch,
                "leaseId": lease,
                "artifactHashes": [artifact],
                "evidence": evidence_for(contract, item),
            },
            item,
        )
        review = review_record(await mission.work_item(item))  # every criterion's Evidence
        await coordinate(
            "work.accept_result",
            {"comments": "Evidence reviewed.", "review": review},
            work_item_id=item,
        )
        artifacts.append(artifact)
        previous = [item]
        out(f"WorkItem verified: {goal}")

    submitted = await coordinate("mission.submit_for_approval", {"artifactHashes": artifacts})
    assert _event(submitted, "mission.submitted_for_approval")["payload"]["missionRevision"]
    approval = signed_approval(await mission.view(), owner, comments="Approved.")
    approved = await mission.send(owner, "mission.approve", approve_payload(approval))
    events += approved["events"]

    out("\nThe Group's Events, in order:")
    for event in events:
        subject = event.get("workItemId", "")
        out(f"  {event['sequence']:>3}  {event['kind']:<34} {event['actor']['id']:<44} {subject}")
    _check_contiguous(events)
    await _check_log(client, mission, events, await registry.evidence(), log_location, out)
    state: str = (await mission.view())["state"]
    out(f"\nMission state: {state}")
    return state == "approved"


async def _check_log(
    client: MwpClient,
    mission: MissionHandle,
    events: list[dict[str, Any]],
    evidence: RegistryEvidence,
    log_location: str,
    out: Callable[[str], None],
) -> None:
    """The signed Group Event log holds exactly these Events, and verifies."""
    for _ in range(200):
        through: int = await client.query(mission.workflow_id, QUERY_MIRRORED_THROUGH)
        if through >= len(events):
            break
        await asyncio.sleep(0.05)
    log = GroupEventLog(open_store(log_location), mission.group_id)
    verdict = log.verify_all(evidence)
    if not verdict.ok or verdict.last_sequence != len(events):
        raise DemoFailedError(f"the Group Event log does not verify: {verdict.fault}")
    stored = [entry.event["eventId"] for entry in log.read(0, limit=len(events) + 1)]
    if stored != [e["eventId"] for e in events]:
        raise DemoFailedError("the Group Event log differs from the accepted Events")
    artifacts = ArtifactStore(open_store(log_location))
    for entry in log.read(0, limit=len(events) + 1):
        if entry.event["kind"] == "artifact.published":
            artifacts.get(entry.event["payload"]["manifest"]["contentHash"])  # hash-checked
    out(
        f"\nGroup Event log: {verdict.verified} Events signed by the Group Authority, "
        f"hash-chained and verified, in {log_location}; every published Artifact read back "
        "and its content hash checked"
    )


def _event(result: dict[str, Any], kind: str) -> dict[str, Any]:
    for event in result["events"]:
        if event["kind"] == kind:
            return dict(event)
    raise DemoFailedError(f"no {kind} Event in {json.dumps(result)[:500]}")


def _check_contiguous(events: list[dict[str, Any]]) -> None:
    sequences = [e["sequence"] for e in events]
    if sequences != list(range(1, len(sequences) + 1)):
        raise DemoFailedError(f"Group sequence is not contiguous: {sequences}")


async def demo_with_stack(
    state_dir: Path, temporal_address: str | None, out: Callable[[str], None] = print
) -> bool:
    from mwp.client import connect
    from mwp.dev.stack import DevStack, free_port, stack_config

    config = stack_config(
        state_dir,
        port=free_port() if temporal_address is None else None,
        ui_port=free_port() if temporal_address is None else None,
        temporal_address=temporal_address,
        # On a cluster others use (a running `mwp dev`), a namespace of the demo's own: its
        # worker is then the only one serving the demo Organization's workflows, whose keys
        # no other worker holds.
        namespace="default" if temporal_address is None else DEMO_NAMESPACE,
    )
    async with DevStack(config) as stack:
        where = f"namespace {config.namespace}"
        out(f"Temporal at {stack.address} ({where}); UI {stack.ui_url or '(existing cluster)'}")
        client = await connect(stack.address, config.namespace)
        ok = await run_mission_demo(
            client,
            _registrar(KeyStore.in_state_dir(state_dir)),
            out,
            keyring=AuthorityKeyring.in_state_dir(config.state_dir),
            log_location=config.log_location,
        )
        if stack.ui_url:
            out(
                f"The UI at {stack.ui_url} closes with this demo; to browse the Mission "
                "afterwards, run `mwp dev` and then `mwp demo --temporal-address 127.0.0.1:7233` "
                f"(its Missions are in namespace {DEMO_NAMESPACE} of that UI)."
            )
        return ok


def _registrar(keys: KeyStore) -> Identity:
    """The demo Organization's registry service key: its trust root, kept with the server."""
    if keys.exists("demo-registry"):
        return keys.load("demo-registry")
    registrar = Identity.generate(Principal("service", f"{ORGANIZATION}:service:registry"))
    keys.save("demo-registry", registrar)
    return registrar
