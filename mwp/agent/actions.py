"""What every capability context does the same way, wherever it runs: the WorkItem's fixed
facts, resolving a tool, passing it its idempotency key, and building the signed
``artifact.publish`` Command."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from mwp.agent.declaration import Agent, CapabilitySpec
from mwp.agent.progress import OwnerCommand
from mwp.stores.artifacts import StoredContent, new_manifest, sign_manifest

# The tool name a capability token allows a function passed to ``ctx.tool`` under.
INLINE_TOOL = "inline"


class WorkItemFacts:
    """What a capability context knows of its WorkItem for the whole run (the
    :class:`~mwp.agent.context.CapabilityContext` members that never change)."""

    def __init__(
        self,
        mission_id: str,
        group_id: str,
        work_item_id: str,
        ownership_epoch: int,
        contract: Mapping[str, Any],
    ) -> None:
        self.mission_id = mission_id
        self.group_id = group_id
        self.work_item_id = work_item_id
        self.ownership_epoch = ownership_epoch
        self.contract = contract

    @property
    def input_artifacts(self) -> Sequence[str]:
        return tuple(self.contract.get("inputArtifacts", ()))


def accepts_idempotency_key(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` takes an ``idempotency_key`` keyword (it then receives the tool key)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    p = params.get("idempotency_key")
    return p is not None and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)


def tool_name(agent: Agent, fn: Callable[..., Awaitable[Any]] | str) -> str:
    """The name a tool call is authorized under: a declared tool's, or ``inline`` for a
    function the capability passes itself."""
    return fn if isinstance(fn, str) and fn in agent.tools else INLINE_TOOL


def resolve_tool(
    agent: Agent, fn: Callable[..., Awaitable[Any]] | str
) -> Callable[..., Awaitable[Any]]:
    """``fn`` itself, or the function of the tool ``agent`` declared under that name."""
    if not isinstance(fn, str):
        return fn
    spec = agent.tools.get(fn)
    if spec is None:
        raise LookupError(f"no tool {fn!r} is declared by {agent.agent_id}")
    return spec.fn


def publish_command(
    agent: Agent,
    spec: CapabilitySpec,
    content: StoredContent,
    *,
    media_type: str,
    schema_uri: str,
    source_hashes: Sequence[str],
    mission_id: str,
    group_id: str,
    work_item_id: str,
    ownership_epoch: int,
    lease_id: str,
    created_at: str,
    card_version: int,
) -> OwnerCommand:
    """``artifact.publish`` of stored ``content`` with its manifest signed by ``agent``, naming
    ``card_version`` (the Agent Card version the Registry holds for it) as the producer's."""
    manifest = new_manifest(
        content,
        media_type=media_type,
        schema_uri=schema_uri,
        producer_agent_id=agent.agent_id,
        agent_card_version=card_version,
        capabilities=[spec.ref],
        mission_id=mission_id,
        group_id=group_id,
        work_item_id=work_item_id,
        created_at=created_at,
        source_hashes=source_hashes,
    )
    signed = sign_manifest(manifest, agent.identity.key_id, agent.identity.key)
    payload = {"ownershipEpoch": ownership_epoch, "leaseId": lease_id, "manifest": signed}
    return OwnerCommand("artifact.publish", work_item_id, payload)
