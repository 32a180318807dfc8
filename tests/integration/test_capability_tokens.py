"""Capability tokens on the real path (spec 12, 11.3; MWP-AUT-001..003, MWP-WRK-014): the
gateway's Authorization Service issues a token only to the WorkItem's owner, after its
execution approval, under the current Execution Lease of the Agent's Session; the agent
runtime checks each tool call locally and presents the token for it; the gateway refuses
expired, revoked, mismatched, outside-the-grant and over-budget tokens. After a real run
through the gateway, no Group Event, Artifact, Agent Card or AgentWorkflow history holds a
token."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from mwp.agent import Agent, CapabilityContext, CardInfo, ResourceAccess, Submission
from mwp.agent.gateway_connection import GatewayConnection
from mwp.agent.gateway_link import GatewayLink, GatewaySettings
from mwp.agent.tokens import TokenHolder
from mwp.client import Identity, MwpClient
from mwp.contracts.agent import ExecutionOrder
from mwp.contracts.errors import RemoteMwpError
from mwp.core.errors import ErrorCode, MwpError
from mwp.core.group.resource_usage import ResourceUsage
from mwp.core.trust.capability_token import CapabilityToken, contains_token, token_paths
from mwp.core.trust.registry import Principal
from mwp.core.trust.resource_scope import INVOKE
from mwp.core.wire.jcs import canonicalize
from mwp.core.wire.strict_json import parse_bytes
from mwp.dev.scenario import work_contract
from mwp.dev.stack import BackgroundStack
from mwp.gateway.authorization import authorization_path, token_path, tool_call_path
from mwp.gateway.hello import Session
from mwp.gateway.https import request
from mwp.gateway.server import Gateway
from mwp.log.group_log import GroupEventLog
from mwp.stores.artifacts import ArtifactStore
from tests.integration.gateway_agents import (
    agent_gateway,
    agents_client,
    covering_submission,
    sample_agent,
    scheduler_of,
    served_agent,
)
from tests.integration.missions_helper import (
    PAST_THE_SESSION_CHECK,
    MissionRig,
    WorkItemRef,
    eventually,
    in_seconds,
    new_id,
    new_mission,
    refused,
)

# --- helpers -------------------------------------------------------------------------------------


def declared(identity: Identity, organization_id: str) -> Agent:
    """A declaration for a Crew worker (already registered), with one tool."""
    agent = Agent(
        identity.principal.id,
        identity,
        card=CardInfo(organization_id, Principal("human", "urn:mwp:human:tester"), "Worker"),
    )

    @agent.tool("effect")
    async def effect(note: str) -> str:
        return note

    return agent


@asynccontextmanager
async def linked(settings: GatewaySettings, agent: Agent) -> AsyncIterator[GatewayLink]:
    async with GatewayLink.open(settings, agent) as link:
        yield link


async def post(link: GatewayLink, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """A raw POST on the gateway's HTTPS listener with the link's session token (no local
    check: what the gateway itself answers)."""
    url = urlsplit(link.artifacts_url)
    assert url.hostname is not None and url.port is not None
    response = await request(
        url.hostname,
        url.port,
        link.client.context,
        "POST",
        path,
        headers={"Authorization": f"Bearer {link.client.session_token}"},
        body=canonicalize(body),
        max_body=65536,
    )
    answer = parse_bytes(response.body)
    assert isinstance(answer, dict)
    return response.status, answer


def session_of(gateway: Gateway, link: GatewayLink) -> Session:
    token = link.client.session_token
    assert token is not None
    return gateway.sessions[token]


async def session_known(rig: MissionRig, worker: Identity, epoch: int) -> None:
    """Use ``epoch`` (opened by the link's HELLO) for ``worker``'s Commands, once the Group
    learned it (a Registry notice reaches it asynchronously)."""
    rig.crew.sessions[worker.principal.id] = epoch

    async def known() -> bool:
        probe = await rig.command(
            worker,
            "message.post",
            {"content": [{"type": "text", "text": "probe"}]},
            membership_epoch=1,  # schema-valid for a non-member too
            expected_revision=999_999,  # no such revision: refused after the Session check
        )
        error = await refused(rig.mission.send_signed(probe))
        # Refused by a check after the Session's (so it passed that one); any other answer,
        # a transient one included, says nothing yet.
        return error.code in PAST_THE_SESSION_CHECK

    await eventually(known)


async def gated_item(rig: MissionRig) -> WorkItemRef:
    """A WorkItem whose contract requires the MissionOwner's execution approval."""
    contract = work_contract("Pay the invoice", deadline=in_seconds(86400))
    contract["executionApproval"] = "human_required"
    item = WorkItemRef(new_id(), contract)
    await rig.coordinate("work.authorize", {"contract": contract}, work_item_id=item.work_item_id)
    return item


def asked(lease: dict[str, Any], **grant: Any) -> dict[str, Any]:
    return {
        "leaseId": lease["leaseId"],
        "ownershipEpoch": lease["ownershipEpoch"],
        "tools": ["effect"],
        "operations": [INVOKE],
        **grant,
    }


def call(tool: str = "effect", operation: str = INVOKE, **spend: Any) -> dict[str, Any]:
    return {"tool": tool, "operation": operation, "spend": {"toolCallLimit": 1, **spend}}


async def refusal(action: Any) -> MwpError:
    try:
        await action
    except MwpError as error:
        return error
    raise AssertionError("not refused")


def reason(error: MwpError) -> str:
    assert error.diagnostic is not None, error
    return f"{error.diagnostic.stage}/{error.diagnostic.reason}"


# --- issuance and refusal at the gateway ---------------------------------------------------------


async def test_the_gateway_issues_tokens_to_the_leased_owner_and_refuses_every_other_use(
    mwp_client: MwpClient, tmp_path: Path
) -> None:
    rig = await new_mission(mwp_client)
    organization_id = rig.crew.organization.organization_id
    worker, other = rig.crew.workers
    async with (
        agent_gateway(mwp_client, rig.crew.organization, tmp_path / "tls") as (gateway, settings),
        linked(settings, declared(worker, organization_id)) as link,
        linked(settings, declared(other, organization_id)) as stranger,
    ):
        service = gateway.authorizations
        await session_known(rig, worker, link.session_epoch)
        session = session_of(gateway, link)
        item = await gated_item(rig)
        wid = item.work_item_id
        group = rig.mission.group_id
        issue = token_path(group, wid)
        present = tool_call_path(group, wid)

        # Not the owner: offered, not accepted yet.
        offer = await rig.offer(item, worker)
        no_lease = {"leaseId": "urn:x", "ownershipEpoch": 1, "tools": ["effect"]}
        assert reason(await refusal(service.issue(session, group, wid, no_lease))) == (
            "authorization/not-owner"
        )
        epoch = await rig.accept(worker, item, offer["offers"][0]["offerId"])

        # Accepted, the approval gate unsatisfied: withheld (MWP-AUT-003).
        status, answer = await post(link, issue, no_lease)
        assert (status, answer["code"]) == (403, "AUTH_FORBIDDEN")
        assert reason(await refusal(service.issue(session, group, wid, no_lease))) == (
            "authorization/awaiting-execution-approval"
        )
        await rig.send(
            rig.crew.owner,
            "approval.grant_execution",
            {"contractVersion": item.contract["contractVersion"]},
            work_item_id=wid,
        )
        # Approved, not started: no lease to bind to.
        assert reason(await refusal(service.issue(session, group, wid, no_lease))) == (
            "authorization/lease"
        )
        lease = await rig.start(worker, item, epoch, lease_seconds=60)
        assert (
            reason(
                await refusal(service.issue(session, group, wid, {**asked(lease), "leaseId": "x"}))
            )
            == "authorization/lease-id"
        )
        assert (
            reason(
                await refusal(service.issue(session, group, wid, asked(lease, ownershipEpoch=9)))
            )
            == "authorization/ownership-epoch"
        )

        # Issued: bound to the Agent, Session, WorkItem, Ownership Epoch and lease; limits
        # capped by what is asked and the contract; ending with the lease.
        status, answer = await post(link, issue, asked(lease, limits={"toolCallLimit": 3}))
        assert status == 201, answer
        token = CapabilityToken(answer["token"])
        claims = token.claims
        assert claims.binding.agent_id == worker.principal.id
        assert claims.binding.session_epoch == link.session_epoch
        assert (claims.binding.work_item_id, claims.binding.ownership_epoch) == (wid, epoch)
        assert claims.binding.lease_id == lease["leaseId"]
        assert claims.grant.tools == {"effect"} and claims.grant.operations == {INVOKE}
        assert claims.grant.limits == {"financialLimit": 10, "toolCallLimit": 3}
        assert claims.expires_at == claims.lease_expires_at == lease["expiresAt"]
        assert str(token).find(token.signature) == -1

        # Presented within the grant: allowed and charged.
        status, answer = await post(link, present, {"token": token.to_json(), "call": call()})
        assert (status, answer) == (200, {"authorized": True})

        async def refused_as(body: dict[str, Any], code: str, why: str) -> None:
            status, answer = await post(link, present, body)
            assert status != 200 and answer["code"] == code, answer
            error = await refusal(service.present(session, group, wid, body))
            assert (error.code.value, reason(error)) == (code, why)

        doc = token.to_json()
        await refused_as({"token": doc, "call": call("other")}, "AUTH_FORBIDDEN", "grant/tool")
        await refused_as(
            {"token": doc, "call": call(operation="delete")}, "AUTH_FORBIDDEN", "grant/operation"
        )
        # Over budget: one call charged, three more would pass the limit of three.
        await refused_as(
            {"token": doc, "call": call(toolCallLimit=3)}, "BUDGET_EXCEEDED", "limit/toolCallLimit"
        )
        await refused_as(
            {"token": doc, "call": call(financialLimit=11, currency="USD")},
            "BUDGET_EXCEEDED",
            "limit/financialLimit",
        )
        # An amount in another currency than the token's limit cannot be compared with it.
        await refused_as(
            {"token": doc, "call": call(financialLimit=1, currency="EUR")},
            "INVALID_COMMAND",
            "limit/currency",
        )
        # Altered: the signature no longer holds.
        altered = json.loads(json.dumps(doc))
        altered["body"]["tools"] = ["effect", "other"]
        status, answer = await post(link, present, {"token": altered, "call": call("other")})
        assert answer["code"] == "AUTH_INVALID_SIGNATURE", answer

        # Mismatched: another WorkItem, another Agent.
        second = await rig.authorize("Another item")
        status, answer = await post(
            link, tool_call_path(group, second.work_item_id), {"token": doc, "call": call()}
        )
        assert answer["code"] == "AUTH_FORBIDDEN"
        error = await refusal(
            service.present(session, group, second.work_item_id, {"token": doc, "call": call()})
        )
        assert reason(error) == "binding/work-item"
        status, answer = await post(stranger, present, {"token": doc, "call": call()})
        assert answer["code"] == "AUTH_FORBIDDEN"
        error = await refusal(
            service.present(
                session_of(gateway, stranger), group, wid, {"token": doc, "call": call()}
            )
        )
        assert reason(error) == "binding/agent"

        # Expired: a short policy cap ends the next token before its lease.
        service.token_seconds = 1
        status, answer = await post(link, issue, asked(lease))
        short = answer["token"]
        assert CapabilityToken(short).claims.expires_at < lease["expiresAt"]
        await asyncio.sleep(1.1)  # past the token's end, long before its lease's
        body = {"token": short, "call": call()}
        assert reason(await refusal(service.present(session, group, wid, body))) == (
            "expiry/expired"
        )
        service.token_seconds = 300

        # Rotated: the newest token for the lease revokes the older ones.
        status, answer = await post(link, issue, asked(lease))
        current = answer["token"]
        await refused_as({"token": doc, "call": call()}, "AUTH_FORBIDDEN", "revocation/revoked")
        status, answer = await post(link, present, {"token": current, "call": call()})
        assert status == 200, answer

        # The lease released (blocked): the token's lease is gone; then it stays revoked.
        await rig.send(
            worker,
            "work.block",
            {
                "ownershipEpoch": epoch,
                "leaseId": lease["leaseId"],
                "requiredResolution": "Need the payee's details.",
            },
            work_item_id=wid,
        )
        body = {"token": current, "call": call()}

        async def lease_gone() -> bool:  # once the gateway has seen the release in the log
            try:
                await service.present(session, group, wid, body)
            except MwpError as error:
                assert (error.code, reason(error)) == (
                    ErrorCode.WORK_LEASE_EXPIRED,
                    "binding/lease",
                )
                return True
            return False

        await eventually(lease_gone, timeout=10)
        await refused_as(body, "AUTH_FORBIDDEN", "revocation/revoked")
        assert service.presentations > 0


async def test_a_replaced_session_cannot_use_its_token(
    mwp_client: MwpClient, tmp_path: Path
) -> None:
    rig = await new_mission(mwp_client)
    organization_id = rig.crew.organization.organization_id
    worker = rig.crew.workers[0]
    agent = declared(worker, organization_id)
    async with agent_gateway(mwp_client, rig.crew.organization, tmp_path / "tls") as (
        gateway,
        settings,
    ):
        async with linked(settings, agent) as link:
            await session_known(rig, worker, link.session_epoch)
            item = await rig.authorize()
            offer = await rig.offer(item, worker)
            epoch = await rig.accept(worker, item, offer["offers"][0]["offerId"])
            lease = await rig.start(worker, item, epoch, lease_seconds=60)
            group, wid = rig.mission.group_id, item.work_item_id
            status, answer = await post(link, token_path(group, wid), asked(lease))
            assert status == 201, answer
            token = answer["token"]
        async with linked(settings, agent) as replaced:  # a new HELLO: a new Session Epoch
            assert replaced.session_epoch > lease["sessionEpoch"]
            body = {"token": token, "call": call()}
            error = await refusal(
                gateway.authorizations.present(session_of(gateway, replaced), group, wid, body)
            )
            assert (error.code, reason(error)) == (
                ErrorCode.AUTH_STALE_SESSION,
                "binding/session-epoch",
            )
            # Refused once as stale, the token is revoked: refused as such from then on.
            status, answer = await post(replaced, tool_call_path(group, wid), body)
            assert answer["code"] == "AUTH_FORBIDDEN", answer
            # Nor is a token issued to the new Session under the old Session's lease.
            status, answer = await post(replaced, token_path(group, wid), asked(lease))
            assert answer["code"] == "WORK_LEASE_EXPIRED", answer


async def test_a_token_names_only_what_the_work_contract_allows_and_each_access_is_checked(
    mwp_client: MwpClient, tmp_path: Path
) -> None:
    """The grant is flat (resources, operations); the contract pairs them. Issuance refuses a
    resource or operation outside the contract, and a presented call is checked pair by pair:
    an operation the contract allows on another resource is refused at the door."""
    rig = await new_mission(mwp_client)
    worker = rig.crew.workers[0]
    repo, wiki, elsewhere = "urn:mwp:resource:repo", "urn:mwp:resource:wiki", "urn:mwp:resource:x"
    async with (
        agent_gateway(mwp_client, rig.crew.organization, tmp_path / "tls") as (gateway, settings),
        linked(settings, declared(worker, rig.crew.organization.organization_id)) as link,
    ):
        service = gateway.authorizations
        await session_known(rig, worker, link.session_epoch)
        session = session_of(gateway, link)
        contract = work_contract("Fix the docs", deadline=in_seconds(86400))
        contract["allowedResources"] = [
            {"resource": repo, "operations": ["read"]},
            {"resource": wiki, "operations": ["read", "write"]},
        ]
        item = WorkItemRef(new_id(), contract)
        wid, group = item.work_item_id, rig.mission.group_id
        await rig.coordinate("work.authorize", {"contract": contract}, work_item_id=wid)
        offer = await rig.offer(item, worker)
        epoch = await rig.accept(worker, item, offer["offers"][0]["offerId"])
        lease = await rig.start(worker, item, epoch, lease_seconds=60)
        operations = [INVOKE, "read", "write"]

        for grant, why in (
            ({"resources": [repo, elsewhere], "operations": operations}, "grant-resource"),
            ({"resources": [repo], "operations": [*operations, "delete"]}, "grant-operation"),
        ):
            error = await refusal(service.issue(session, group, wid, asked(lease, **grant)))
            assert (error.code, reason(error)) == (
                ErrorCode.AUTH_FORBIDDEN,
                f"resource-scope/{why}",
            )
        status, answer = await post(
            link,
            token_path(group, wid),
            asked(lease, resources=[repo, wiki], operations=operations),
        )
        assert status == 201, answer
        doc = answer["token"]
        present = tool_call_path(group, wid)

        def access(operation: str, *resources: str) -> dict[str, Any]:
            return {"token": doc, "call": {**call(operation=operation), "resources": [*resources]}}

        status, answer = await post(link, present, access("read", repo, wiki))
        assert (status, answer) == (200, {"authorized": True})
        status, answer = await post(link, present, access("write", wiki))
        assert status == 200, answer
        for body, why in (
            (access("write", repo), "resource-scope/access"),  # write is the wiki's, not the repo's
            (access("read", elsewhere), "grant/resource"),  # not in the token at all
        ):
            status, answer = await post(link, present, body)
            assert (status, answer["code"]) == (403, "AUTH_FORBIDDEN"), answer
            error = await refusal(service.present(session, group, wid, body))
            assert reason(error) == why


@pytest.mark.parametrize("cancel", ["work.cancel", "mission.cancel"])
async def test_cancelling_the_work_revokes_its_token(
    mwp_client: MwpClient, tmp_path: Path, cancel: str
) -> None:
    """MWP-AUT-006: once the WorkItem (or its whole Mission) is cancelled, the token of its
    lease is refused at its next presentation and revoked from then on."""
    rig = await new_mission(mwp_client)
    worker = rig.crew.workers[0]
    async with (
        agent_gateway(mwp_client, rig.crew.organization, tmp_path / "tls") as (gateway, settings),
        linked(settings, declared(worker, rig.crew.organization.organization_id)) as link,
    ):
        await session_known(rig, worker, link.session_epoch)
        session = session_of(gateway, link)
        item = await rig.authorize("Pay the supplier")
        wid, group = item.work_item_id, rig.mission.group_id
        offer = await rig.offer(item, worker)
        epoch = await rig.accept(worker, item, offer["offers"][0]["offerId"])
        lease = await rig.start(worker, item, epoch, lease_seconds=60)
        status, answer = await post(link, token_path(group, wid), asked(lease))
        assert status == 201, answer
        body = {"token": answer["token"], "call": call()}
        status, answer = await post(link, tool_call_path(group, wid), body)
        assert status == 200, answer

        if cancel == "work.cancel":
            await rig.coordinate(cancel, {"reason": "replanned"}, work_item_id=wid)
        else:
            await rig.send(rig.crew.owner, cancel, {"reason": "replanned"})

        async def cancelled() -> bool:
            return bool((await rig.mission.work_item(wid))["state"] == "cancelled")

        await eventually(cancelled)
        service = gateway.authorizations
        first = await refusal(service.present(session, group, wid, body))
        assert first.code is ErrorCode.WORK_LEASE_EXPIRED and reason(first) == "binding/lease"
        again = await refusal(service.present(session, group, wid, body))
        assert again.code is ErrorCode.AUTH_FORBIDDEN and reason(again) == "revocation/revoked"
        # Nor is a new one issued: a cancelled WorkItem has no owner.
        status, answer = await post(link, token_path(group, wid), asked(lease))
        assert (status, answer["code"]) == (403, "AUTH_FORBIDDEN"), answer


async def test_the_coordinator_requests_authorization_and_never_obtains_the_token(
    mwp_client: MwpClient, tmp_path: Path
) -> None:
    """MWP-AUT-002: the Coordinator's request names the step's scope and yields no token; the
    owner's token stays within it; nobody else may request, and the Coordinator gets no
    token of its own for the Worker's item."""
    rig = await new_mission(mwp_client)
    organization_id = rig.crew.organization.organization_id
    worker, other = rig.crew.workers
    issued: list[CapabilityToken] = []
    async with (
        agent_gateway(mwp_client, rig.crew.organization, tmp_path / "tls") as (gateway, settings),
        linked(settings, declared(worker, organization_id)) as link,
        linked(settings, declared(rig.crew.coordinator, organization_id)) as coordinator,
        linked(settings, declared(other, organization_id)) as stranger,
    ):
        gateway.authorizations.observe = issued.append
        await session_known(rig, worker, link.session_epoch)
        await session_known(rig, rig.crew.coordinator, coordinator.session_epoch)
        item = await rig.authorize("Send the newsletter")
        wid, group = item.work_item_id, rig.mission.group_id
        offer = await rig.offer(item, worker)
        epoch = await rig.accept(worker, item, offer["offers"][0]["offerId"])
        lease = await rig.start(worker, item, epoch, lease_seconds=60)
        scope = {"tools": ["effect"], "operations": [INVOKE], "limits": {"toolCallLimit": 2}}
        path = authorization_path(group, wid)

        for asker in (stranger, link):  # another Worker, and the owner itself
            status, answer = await post(asker, path, scope)
            assert (status, answer["code"]) == (403, "AUTH_FORBIDDEN"), answer
        wider = {**scope, "resources": ["urn:mwp:resource:elsewhere"]}
        status, answer = await post(coordinator, path, wider)
        assert (status, answer["code"]) == (403, "AUTH_FORBIDDEN"), answer
        status, answer = await post(coordinator, path, scope)
        assert (status, answer) == (202, {"requested": True, "workItemId": wid})
        # The Coordinator gets no token for the Worker's item.
        status, answer = await post(coordinator, token_path(group, wid), asked(lease))
        assert (status, answer["code"]) == (403, "AUTH_FORBIDDEN"), answer
        assert not issued

        # The owner asks for more than the Coordinator planned: it gets what was requested.
        wants = asked(lease, tools=["effect", "other"], limits={"toolCallLimit": 50})
        status, answer = await post(link, token_path(group, wid), wants)
        assert status == 201, answer
        claims = CapabilityToken(answer["token"]).claims
        assert claims.binding.agent_id == worker.principal.id
        assert claims.grant.tools == {"effect"}
        assert claims.grant.limits["toolCallLimit"] == 2

    assert len(issued) == 1 and issued[0].claims.binding.agent_id == worker.principal.id


# --- the runtime: local checks, presentation, no secrets in durable objects -----------------------


async def test_the_runtime_refuses_locally_a_call_outside_its_token(
    mwp_client: MwpClient, tmp_path: Path
) -> None:
    rig = await new_mission(mwp_client)
    worker = rig.crew.workers[0]
    agent = declared(worker, rig.crew.organization.organization_id)
    async with (
        agent_gateway(mwp_client, rig.crew.organization, tmp_path / "tls") as (gateway, settings),
        linked(settings, agent) as link,
    ):
        await session_known(rig, worker, link.session_epoch)
        item = await rig.authorize()
        offer = await rig.offer(item, worker)
        epoch = await rig.accept(worker, item, offer["offers"][0]["offerId"])
        lease = await rig.start(worker, item, epoch, lease_seconds=60)
        order = ExecutionOrder(
            worker.principal.id,
            link.session_epoch,
            rig.mission.group_id,
            rig.mission.mission_id,
            item.work_item_id,
            epoch,
        )
        connection = GatewayConnection(agent)
        connection.attach(link)
        holder = TokenHolder(connection, order, ["effect"])
        await holder.authorize("effect", ResourceUsage(tool_calls=1), lease["leaseId"])
        assert holder.obtained == 1 and gateway.authorizations.presentations == 1
        assert "signature" not in repr(holder) and holder._token is not None
        assert holder._token.signature not in repr(holder)

        for tool, cost, code in (
            ("undeclared", ResourceUsage(tool_calls=1), ErrorCode.AUTH_FORBIDDEN),
            ("effect", ResourceUsage(financial=11, currency="USD"), ErrorCode.BUDGET_EXCEEDED),
        ):
            error = await refusal(holder.authorize(tool, cost, lease["leaseId"]))
            assert error.code is code
        # Another lease than its token's: a fresh token is asked for, and refused.
        error = await refusal(holder.authorize("effect", ResourceUsage(tool_calls=1), "urn:x"))
        assert isinstance(error, RemoteMwpError) and error.code is ErrorCode.WORK_LEASE_EXPIRED
        assert gateway.authorizations.presentations == 1  # none of them reached the gateway


CALLS: list[str] = []
REFUSED_ACCESS: list[ErrorCode] = []
WORKSPACE = "urn:mwp:resource:workspace"  # the sample contract allows "read" on it


def tool_agent(organization_id: str) -> Agent:
    agent = sample_agent(organization_id, "Tokens")

    @agent.tool("effect")
    async def effect(note: str) -> str:
        CALLS.append(note)
        return note

    @agent.capability("mwp.dev.general", "1.0.0")
    async def work(ctx: CapabilityContext) -> Submission:
        await ctx.tool("one", "effect", "one", spend=ResourceUsage(financial=1, currency="USD"))
        await ctx.tool("two", "effect", "two")

        async def inline() -> str:
            return "inline"

        await ctx.tool("three", inline)
        await ctx.tool("read", "effect", "read", access=ResourceAccess("read", (WORKSPACE,)))
        try:  # the contract allows only "read" on the workspace: refused before it runs
            await ctx.tool("write", "effect", "write", access=ResourceAccess("write", (WORKSPACE,)))
        except MwpError as refused:
            REFUSED_ACCESS.append(refused.code)
        return await covering_submission(ctx, b"done")

    return agent


def payload_texts(value: Any) -> Iterator[str]:
    """The decoded JSON payloads inside a workflow history's JSON (base64 ``data``)."""
    if isinstance(value, dict):
        data = value.get("data")
        if isinstance(data, str) and "metadata" in value:
            with suppress(ValueError):
                yield base64.b64decode(data).decode("utf-8", "replace")
        for member in value.values():
            yield from payload_texts(member)
    elif isinstance(value, list):
        for member in value:
            yield from payload_texts(member)


async def test_a_run_presents_its_token_and_no_durable_object_holds_one(
    mwp_client: MwpClient, temporal_stack: BackgroundStack, tmp_path: Path
) -> None:
    rig = await new_mission(mwp_client)
    agent = tool_agent(rig.crew.organization.organization_id)
    issued: list[CapabilityToken] = []
    async with served_agent(
        mwp_client, rig.crew.organization, agent, temporal_stack.address, tmp_path
    ) as gateway:
        gateway.authorizations.observe = issued.append  # set before the offer: every token
        item = await rig.authorize("Do the three steps")
        await rig.offer(item, agent.identity)

        async def submitted() -> bool:
            view = await rig.mission.work_item(item.work_item_id)
            return bool(view["state"] == "submitted")

        await eventually(submitted, timeout=60)
        presented = gateway.authorizations.presentations
        history = await scheduler_of(
            await agents_client(temporal_stack.address), agent.agent_id
        ).fetch_history()
        card = await gateway.authority.agent_card(agent.agent_id)

    assert issued and presented == 4  # every executed call, the inline one included
    assert CALLS.count("one") == 1 and CALLS.count("two") == 1 and CALLS.count("read") == 1
    assert "write" not in CALLS and REFUSED_ACCESS == [ErrorCode.AUTH_FORBIDDEN]
    # Asked for exactly what the Work Contract allows.
    assert issued[0].claims.grant.resources == {WORKSPACE}
    assert issued[0].claims.grant.operations == {INVOKE, "read"}
    assert all(t.claims.binding.work_item_id == item.work_item_id for t in issued)

    # No Group Event, Artifact, Agent Card or AgentWorkflow history holds a token.
    log = GroupEventLog(gateway.authority.store, rig.mission.group_id)
    entries = log.read(0, 100000)
    assert entries
    for entry in entries:
        assert not contains_token(entry.event, issued), list(token_paths(entry.event, issued))
        assert not contains_token(entry.data.decode(), issued)
    artifacts = ArtifactStore(gateway.authority.store)
    hashes = {
        e.event["payload"]["manifest"]["contentHash"]
        for e in entries
        if e.event["kind"] == "artifact.published"
    }
    assert hashes
    for content_hash in hashes:
        text = artifacts.get(content_hash).decode("utf-8", "replace")
        assert not contains_token(text, issued)
    assert card is not None and not contains_token(card, issued)
    texts = list(payload_texts(history.to_json_dict()))
    assert texts and not any(contains_token(text, issued) for text in texts)
