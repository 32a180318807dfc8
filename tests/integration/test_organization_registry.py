"""The Organization registry workflow on a real dev server: bindings, validity, Agent Cards,
Session Epochs, idempotency, continue-as-new and subscriptions."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from mwp.client import Identity, MwpClient, wire_text
from mwp.contracts.errors import RemoteMwpError, from_temporal_failure, raising_mwp_errors
from mwp.contracts.organization import (
    REGISTRY_WORKFLOW_TYPE,
    UPDATE_FOR_KIND,
    OrganizationRegistryInput,
    organization_workflow_id,
)
from mwp.core.errors import ErrorCode, MwpError
from mwp.core.models import validate_document
from mwp.core.organization.service import (
    KEY_BINDING_REGISTER,
    SESSION_OPEN,
    SESSION_OPENED,
    RegistrySubscription,
)
from mwp.core.trust.registry import Principal
from mwp.core.trust.signed_document import signing_hash, verify
from mwp.core.wire.values import format_utc
from tests.integration.conftest import Organization, authority_worker_on, new_organization
from tests.integration.probe_workflows import RegistrySubscriberProbe


async def _refused(call: Awaitable[Any]) -> MwpError:
    with pytest.raises(MwpError) as info:
        await call
    assert isinstance(info.value, RemoteMwpError)  # decided remotely, wire object attached
    assert info.value.wire["code"] == info.value.code.value
    return info.value


async def _eventually(check: Callable[[], Awaitable[bool]], timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.05)


def _mission_create(owner: Identity) -> dict[str, Any]:
    group = f"urn:mwp:group:{uuid.uuid4()}"
    return owner.command(
        "mission.create",
        {
            "missionId": f"urn:mwp:mission:{uuid.uuid4()}",
            "groupId": group,
            "coordinatorAgentId": "urn:mwp:agent:coordinator",
        },
        group_id=group,
    )


async def test_registered_bindings_are_evidence_that_verifies_a_signed_command(
    organization: Organization,
) -> None:
    registry = organization.registry
    ada = organization.identity("human", "ada")
    assert await registry.revision() == 1
    result = await registry.register_binding(ada)
    assert result["revision"] == 2 and result["keyId"] == ada.key_id

    evidence = await registry.evidence()
    assert evidence.organization_id == organization.organization_id
    assert set(evidence.bindings) == {organization.registrar.key_id, ada.key_id}
    command = _mission_create(ada)
    verified = verify(wire_text(command).encode(), "command", evidence)
    assert verified.principal == ada.principal

    # A key the registry never bound resolves to nothing: stage 4 fails closed.
    stranger = organization.identity("human", "mallory")
    with pytest.raises(MwpError) as info:
        verify(wire_text(_mission_create(stranger)).encode(), "command", evidence)
    assert info.value.code is ErrorCode.AUTH_INVALID_SIGNATURE


async def test_registering_the_identical_binding_again_changes_nothing(
    organization: Organization,
) -> None:
    ada = organization.identity("human", "ada")
    first = await organization.registry.register_binding(ada)
    again = await organization.registry.register_binding(ada)  # a new Command, same binding
    assert again["revision"] == first["revision"]
    assert await organization.registry.revision() == first["revision"]


async def test_key_id_reuse_is_refused_with_a_typed_error(organization: Organization) -> None:
    registry = organization.registry
    ada = organization.identity("human", "ada")
    await registry.register_binding(ada)
    before = await registry.evidence_json()

    impostor = Identity.generate(ada.principal, key_id=ada.key_id)  # same key ID, new key
    error = await _refused(registry.register_binding(impostor))
    assert error.code is ErrorCode.INVALID_COMMAND
    assert error.details == {"reason": "key-id-reuse"}
    assert error.action_id is not None
    assert await registry.evidence_json() == before

    other_principal = {**ada.binding(), "principal": {"type": "human", "id": "urn:mwp:human:x"}}
    error = await _refused(registry.register_binding(other_principal))
    assert error.details == {"reason": "key-id-reuse"}


async def test_public_key_alias_is_refused(organization: Organization) -> None:
    registry = organization.registry
    ada = organization.identity("human", "ada")
    await registry.register_binding(ada)
    revision = await registry.revision()

    alias = {**ada.binding(), "keyId": f"{ada.key_id}-alias"}  # same key, another key ID
    error = await _refused(registry.register_binding(alias))
    assert (error.code, error.details) == (
        ErrorCode.INVALID_COMMAND,
        {"reason": "public-key-alias"},
    )

    stolen = {**alias, "principal": {"type": "agent", "id": "urn:mwp:agent:thief"}}
    error = await _refused(registry.register_binding(stolen))
    assert error.details == {"reason": "public-key-alias"}
    assert await registry.revision() == revision


async def test_weak_public_keys_are_refused(organization: Organization) -> None:
    ada = organization.identity("human", "ada")
    identity_point = "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
    error = await _refused(
        organization.registry.register_binding({**ada.binding(), "publicKey": identity_point})
    )
    assert error.details == {"reason": "public-key-point"}


async def test_validity_boundaries_only_move_earlier(organization: Organization) -> None:
    registry = organization.registry
    ada = organization.identity("human", "ada")
    await registry.register_binding(ada)

    await registry.change_key_validity(ada.key_id, valid_until="2099-01-01T00:00:00Z")
    await registry.change_key_validity(ada.key_id, valid_until="2098-01-01T00:00:00Z")
    revision = await registry.revision()
    error = await _refused(
        registry.change_key_validity(ada.key_id, valid_until="2098-06-01T00:00:00Z")
    )
    assert error.details == {"reason": "validity-boundary-moved-later"}
    await registry.change_key_validity(ada.key_id, revoked_at="2097-01-01T00:00:00Z")
    assert await registry.revision() == revision + 1

    evidence = await registry.evidence()
    binding = evidence.resolve(ada.key_id)
    assert [s.sequence for s in binding.history] == [1, 2, 3]  # append-only, nothing rewritten
    validity = binding.validity()
    assert validity.valid_until is not None and validity.valid_until.text == "2098-01-01T00:00:00Z"
    assert validity.revoked_at is not None and validity.revoked_at.text == "2097-01-01T00:00:00Z"

    error = await _refused(
        registry.change_key_validity("urn:mwp:key:nobody", revoked_at="2097-01-01T00:00:00Z")
    )
    assert error.details == {"reason": "unknown-key"}


async def test_a_revoked_key_no_longer_signs(organization: Organization) -> None:
    registry = organization.registry
    ada = organization.identity("human", "ada")
    await registry.register_binding(ada)
    command = _mission_create(ada)  # issued now, before the revocation below
    await registry.change_key_validity(ada.key_id, revoked_at=command["issuedAt"])
    with pytest.raises(MwpError) as info:
        verify(wire_text(command).encode(), "command", await registry.evidence())
    assert info.value.code is ErrorCode.AUTH_INVALID_SIGNATURE


async def test_only_the_registry_service_may_change_the_registry(
    mwp_client: MwpClient, organization: Organization
) -> None:
    billing = organization.identity("service", "billing")
    await organization.registry.register_binding(billing)
    # The billing service's signature verifies, but it is not the registry service.
    as_billing = mwp_client.registry(organization.organization_id, billing)
    error = await _refused(as_billing.register_binding(organization.identity("human", "eve")))
    assert error.code is ErrorCode.AUTH_FORBIDDEN
    assert error.details is None  # the protected diagnostic never crosses the wire

    # Humans never issue Organization-scoped Commands: the Command schema refuses it.
    ada = organization.identity("human", "ada")
    await organization.registry.register_binding(ada)
    as_ada = mwp_client.registry(organization.organization_id, ada)
    error = await _refused(as_ada.register_binding(organization.identity("human", "eve")))
    assert error.code is ErrorCode.SCHEMA_VALIDATION_FAILED

    # An unregistered key fails signature verification at stage 4.
    unknown = Identity.generate(organization.registrar.principal)
    as_unknown = mwp_client.registry(organization.organization_id, unknown)
    error = await _refused(as_unknown.register_binding(organization.identity("human", "eve")))
    assert error.code is ErrorCode.AUTH_INVALID_SIGNATURE
    assert error.message == "The signed document could not be verified."


async def test_tampered_and_stale_commands_are_refused(
    mwp_client: MwpClient, organization: Organization
) -> None:
    registry = organization.registry
    ada = organization.identity("human", "ada")
    command = organization.registrar.command(KEY_BINDING_REGISTER, {"binding": ada.binding()})
    tampered = {**command, "payload": {"binding": {**ada.binding(), "keyId": "urn:mwp:key:x"}}}
    update = UPDATE_FOR_KIND[KEY_BINDING_REGISTER]
    error = await _refused(mwp_client.send_command(registry.workflow_id, update, tampered))
    assert error.code is ErrorCode.AUTH_INVALID_SIGNATURE

    # Freshness: the registrar's key is valid since 2020, but a Command must be recent.
    now = datetime.now(UTC).replace(microsecond=0)
    for issued in (now - timedelta(minutes=10), now + timedelta(minutes=10)):
        stale = organization.registrar.command(
            KEY_BINDING_REGISTER, {"binding": ada.binding()}, issued_at=format_utc(issued)
        )
        error = await _refused(mwp_client.send_command(registry.workflow_id, update, stale))
        assert error.code is ErrorCode.AUTH_INVALID_SIGNATURE

    wrong_update = UPDATE_FOR_KIND[SESSION_OPEN]
    error = await _refused(mwp_client.send_command(registry.workflow_id, wrong_update, command))
    assert error.details == {"reason": "kind-not-for-this-update"}
    assert await registry.revision() == 1


async def test_retries_are_idempotent_and_action_id_reuse_collides(
    mwp_client: MwpClient, organization: Organization
) -> None:
    registry = organization.registry
    ada, bob = organization.identity("human", "ada"), organization.identity("human", "bob")
    command = organization.registrar.command(KEY_BINDING_REGISTER, {"binding": ada.binding()})
    update = UPDATE_FOR_KIND[KEY_BINDING_REGISTER]
    first = await mwp_client.send_command(registry.workflow_id, update, command)
    assert first["duplicate"] is False

    # The same bytes under another Update ID reach the registry's own (actor, actionId) table.
    handle = registry.handle()
    with raising_mwp_errors():
        again = await handle.execute_update(
            update, wire_text(command), id=f"retry-{uuid.uuid4()}", result_type=dict
        )
    assert again == {**first, "duplicate": True}
    assert await registry.revision() == first["revision"]

    collision = organization.registrar.command(
        KEY_BINDING_REGISTER, {"binding": bob.binding()}, action_id=command["actionId"]
    )
    assert signing_hash(collision) != signing_hash(command)
    error = await _refused(mwp_client.send_command(registry.workflow_id, update, collision))
    assert error.code is ErrorCode.ACTION_ID_COLLISION
    assert error.action_id == command["actionId"]


async def test_expected_revision_is_enforced(organization: Organization) -> None:
    registry = organization.registry
    ada, bob = organization.identity("human", "ada"), organization.identity("human", "bob")
    await registry.register_binding(ada, expected_revision=1)
    error = await _refused(registry.register_binding(bob, expected_revision=1))
    assert error.code is ErrorCode.REVISION_CONFLICT
    assert (error.expected_revision, error.current_revision) == (1, 2)


async def test_agent_cards_register_their_keys_and_only_move_forward(
    organization: Organization,
) -> None:
    registry = organization.registry
    builder = organization.identity("agent", "builder")
    owner = organization.identity("human", "owner").principal
    result = await registry.register_agent(builder, owner=owner)
    assert result["cardVersion"] == 1
    assert result["event"]["kind"] == "ext.missionweaveprotocol.registry.agent_card_registered"
    card = await registry.agent_card(builder.principal.id)
    assert card is not None and card["signature"]["keyId"] == organization.registrar.key_id
    assert (await registry.evidence()).resolve(builder.key_id).principal == builder.principal

    error = await _refused(registry.register_agent(builder, owner=owner, display_name="Other"))
    assert error.details == {"reason": "card-version-not-newer"}
    second = await registry.register_agent(builder, owner=owner, card_version=2)
    assert second["cardVersion"] == 2

    # A card re-binding the agent's key ID to other material is key-ID reuse.
    twin = Identity.generate(builder.principal, key_id=builder.key_id)
    error = await _refused(registry.register_agent(twin, owner=owner, card_version=3))
    assert error.details == {"reason": "key-id-reuse"}


async def test_agent_cards_must_be_issued_by_the_registry_service(
    mwp_client: MwpClient, organization: Organization
) -> None:
    other_service = organization.identity("service", "other")
    await organization.registry.register_binding(other_service)
    builder = organization.identity("agent", "builder")
    from mwp.client import agent_card, dev_capability

    card = agent_card(
        builder,
        organization_id=organization.organization_id,
        owner=other_service.principal,
        display_name="Builder",
        capabilities=[dev_capability("mwp.dev.general")],
    )
    signed = other_service.sign(card, "agent-card")
    error = await _refused(organization.registry.register_agent_card(signed))
    assert error.code is ErrorCode.AUTH_FORBIDDEN


async def test_session_open_increments_the_epoch_and_fences_older_sessions(
    organization: Organization,
) -> None:
    registry = organization.registry
    builder = organization.identity("agent", "builder")
    await registry.register_agent(builder, owner=organization.registrar.principal)
    assert await registry.open_session(builder.principal.id) == 1
    assert await registry.open_session(builder.principal.id) == 2
    assert await registry.session_epochs() == {builder.principal.id: 2}

    subscription = RegistrySubscription(organization.organization_id)
    assert subscription.offer(await registry.client.query(registry.workflow_id, "registry_notice"))
    subscription.check_session(builder.principal.id, 2)
    with pytest.raises(MwpError) as info:
        subscription.check_session(builder.principal.id, 1)  # the older session is fenced
    assert info.value.code is ErrorCode.AUTH_STALE_SESSION

    result = await registry.submit(SESSION_OPEN, {"agentId": builder.principal.id})
    event = result["event"]
    assert (event["kind"], event["payload"]) == (
        SESSION_OPENED,
        {"agentId": builder.principal.id, "sessionEpoch": 3},
    )
    assert event["cause"] == {"type": "command", "id": result["actionId"]}
    placeholder = {
        "algorithm": "Ed25519",
        "keyId": organization.registrar.key_id,
        "createdAt": event["occurredAt"],
        "value": "AA",
    }
    validate_document("event.schema.json", {**event, "signature": placeholder})


async def test_session_open_needs_a_registered_agent_and_a_session_authority(
    mwp_client: MwpClient, organization: Organization
) -> None:
    registry = organization.registry
    error = await _refused(registry.open_session("urn:mwp:agent:ghost"))
    assert error.details == {"reason": "agent-has-no-valid-key"}

    builder = organization.identity("agent", "builder")
    await registry.register_binding(builder)  # a bare binding is enough for a session
    identity_service = organization.identity("service", "identity")
    await registry.register_binding(identity_service)
    as_identity = mwp_client.registry(organization.organization_id, identity_service)
    error = await _refused(as_identity.open_session(builder.principal.id))
    assert error.code is ErrorCode.AUTH_FORBIDDEN
    assert await registry.open_session(builder.principal.id) == 1


async def test_a_listed_session_authority_may_open_sessions(mwp_client: MwpClient) -> None:
    identity_service = Identity.generate(Principal("service", "urn:mwp:service:identity-authority"))
    org = await new_organization(
        mwp_client, session_authorities=[identity_service.principal.id], provision_authority=False
    )
    builder = org.identity("agent", "builder")
    await org.registry.register_binding(builder)
    await org.registry.register_binding(identity_service)
    as_identity = mwp_client.registry(org.organization_id, identity_service)
    assert await as_identity.open_session(builder.principal.id) == 1


async def test_continue_as_new_keeps_the_whole_state(mwp_client: MwpClient) -> None:
    org = await new_organization(
        mwp_client, continue_as_new_after_events=30, provision_authority=False
    )
    registry = org.registry
    first_run = (await registry.view())["runId"]
    builder = org.identity("agent", "builder")
    first_command = org.registrar.command(KEY_BINDING_REGISTER, {"binding": builder.binding()})
    update = UPDATE_FOR_KIND[KEY_BINDING_REGISTER]
    accepted = await mwp_client.send_command(registry.workflow_id, update, first_command)

    humans = [org.identity("human", f"h{i}") for i in range(8)]
    for human in humans:
        await registry.register_binding(human)
    for _ in range(6):
        await registry.open_session(builder.principal.id)
    await registry.change_key_validity(humans[0].key_id, revoked_at="2099-01-01T00:00:00Z")

    view = await registry.view()
    assert view["runId"] != first_run  # at least one continue-as-new happened
    assert view["revision"] == 1 + 1 + len(humans) + 6 + 1
    evidence = await registry.evidence()
    assert set(evidence.bindings) == {
        org.registrar.key_id,
        builder.key_id,
        *(h.key_id for h in humans),
    }
    assert evidence.resolve(humans[0].key_id).history[0].revoked_at is not None
    assert await registry.session_epochs() == {builder.principal.id: 6}

    # A byte-equal retry of a Command accepted in the first run returns its original result.
    with raising_mwp_errors():
        again = await registry.handle().execute_update(
            update, wire_text(first_command), id=f"retry-{uuid.uuid4()}", result_type=dict
        )
    assert again == {**accepted, "duplicate": True}


async def test_subscribers_get_notices_of_every_change(mwp_client: MwpClient) -> None:
    org = await new_organization(
        mwp_client, continue_as_new_after_events=40, provision_authority=False
    )
    registry = org.registry
    builder = org.identity("agent", "builder")
    async with authority_worker_on(mwp_client, [RegistrySubscriberProbe]) as queue:
        probe = await mwp_client.temporal.start_workflow(
            RegistrySubscriberProbe.run,
            org.organization_id,
            id=f"probe-{uuid.uuid4()}",
            task_queue=queue,
        )

        async def probe_sees(revision: int) -> bool:
            seen: dict[str, Any] = await probe.query(RegistrySubscriberProbe.seen)
            return bool(seen["revision"] == revision)

        await _eventually(lambda: probe_sees(1))  # the current notice, right on subscribing
        await registry.register_binding(builder)
        await registry.open_session(builder.principal.id)
        await _eventually(lambda: probe_sees(3))
        seen = await probe.query(RegistrySubscriberProbe.seen)
        assert seen["sessionEpochs"] == {builder.principal.id: 1}
        assert builder.key_id in seen["keyIds"]

        # Many changes: across continue-as-new, the subscriber still converges on the newest.
        for _ in range(12):
            await registry.open_session(builder.principal.id)
        await _eventually(lambda: probe_sees(15))
        assert (await probe.query(RegistrySubscriberProbe.seen))["sessionEpochs"] == {
            builder.principal.id: 13
        }
        assert list((await registry.view())["subscribers"]) == [probe.id]

        await probe.signal(RegistrySubscriberProbe.finish)
        received = await probe.result()
        assert received >= 3

        async def unsubscribed() -> bool:
            return not (await registry.view())["subscribers"]

        await _eventually(unsubscribed)


async def test_a_vanished_subscriber_is_dropped(mwp_client: MwpClient) -> None:
    org = await new_organization(mwp_client, provision_authority=False)
    async with authority_worker_on(mwp_client, [RegistrySubscriberProbe]) as queue:
        probe = await mwp_client.temporal.start_workflow(
            RegistrySubscriberProbe.run,
            org.organization_id,
            id=f"probe-{uuid.uuid4()}",
            task_queue=queue,
        )

        async def subscribed() -> bool:
            return probe.id in (await org.registry.view())["subscribers"]

        await _eventually(subscribed)
        await probe.terminate("gone without unsubscribing")
        await org.registry.register_binding(org.identity("human", "ada"))

        async def dropped() -> bool:
            return probe.id not in (await org.registry.view())["subscribers"]

        await _eventually(dropped)


async def test_a_registry_started_with_a_bad_trust_root_fails_with_a_typed_error(
    mwp_client: MwpClient,
) -> None:
    human = Identity.generate(Principal("human", "urn:mwp:human:not-a-service"))
    organization_id = f"urn:mwp:organization:bad-{uuid.uuid4().hex[:8]}"
    handle = await mwp_client.temporal.start_workflow(
        REGISTRY_WORKFLOW_TYPE,
        OrganizationRegistryInput(organization_id, human.binding()),
        id=organization_workflow_id(organization_id),
        task_queue=mwp_client.task_queue,
    )
    with pytest.raises(Exception) as info:
        await handle.result()
    error = from_temporal_failure(info.value)
    assert error is not None and error.code is ErrorCode.INVALID_COMMAND
    assert error.details == {"reason": "registry-service-principal"}
