"""The Agent declaration: who the agent is, what it can do, and its tools (pure, no I/O).

An :class:`Agent` is declared once in the agent's module; its capabilities and tools are plain
``async def`` functions registered with decorators and returned unchanged, so they stay
ordinary functions a unit test can call. The Agent Card is built from the declaration, never
written by hand, so the card cannot disagree with what the worker actually hosts.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from mwp.client import Identity, agent_card
from mwp.core.trust.registry import Principal
from mwp.core.wire.jcs import canonicalize, sha256_ref
from mwp.core.wire.values import is_absolute_uri, is_identifier, is_sha256_ref

if TYPE_CHECKING:
    from mwp.agent.context import CapabilityContext
    from mwp.agent.progress import Submission

CapabilityFn = Callable[["CapabilityContext"], Awaitable["Submission"]]
ToolFn = Callable[..., Awaitable[Any]]
C = TypeVar("C", bound=CapabilityFn)
T = TypeVar("T", bound=ToolFn)

# The Agent Card's capability ID and version rules (agent-card / common schema).
_CAPABILITY_ID = re.compile(r"[a-z0-9]+(?:[.-][a-z0-9]+)+")
_SEMVER = re.compile(
    r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?"
)
_TOOL_NAME = re.compile(r"[a-z][a-z0-9_.-]{0,99}")
ANY_OBJECT_SCHEMA: dict[str, Any] = {"type": "object"}
# A capability's Evidence of verified behaviour; the default says "registered for development".
DEVELOPMENT_EVIDENCE = "urn:mwp:evidence:development-registration"
# The mean run an agent declares unless it says otherwise (the Scheduler's long-standing default).
MEAN_RUN_SECONDS = 600


class AgentDeclarationError(ValueError):
    """The declaration itself is wrong (found when the module is imported, not at run time)."""


@dataclass(frozen=True)
class SchemaRef:
    """A JSON Schema named by URI and pinned by the SHA-256 of its JCS form."""

    uri: str
    hash: str

    @classmethod
    def of(cls, uri: str, schema: Mapping[str, Any]) -> SchemaRef:
        """Pin an inline schema document under ``uri``."""
        return cls(uri, sha256_ref(canonicalize(dict(schema))))

    def __post_init__(self) -> None:
        if not is_absolute_uri(self.uri):
            raise AgentDeclarationError(f"schema URI {self.uri!r} is not an absolute URI")
        if not is_sha256_ref(self.hash):
            raise AgentDeclarationError(f"schema hash {self.hash!r} is not a sha256: reference")


ANY_OBJECT = SchemaRef.of("urn:mwp:schema:any-object", ANY_OBJECT_SCHEMA)


@dataclass(frozen=True)
class CapabilitySpec:
    """One declared capability: its versioned ID, schemas, and the function that does it."""

    id: str
    version: str
    fn: CapabilityFn
    input_schema: SchemaRef = ANY_OBJECT
    output_schema: SchemaRef = ANY_OBJECT
    constraints: Mapping[str, Any] = field(default_factory=dict)
    verified_evidence: tuple[str, ...] = (DEVELOPMENT_EVIDENCE,)

    @property
    def ref(self) -> dict[str, str]:
        """The ``{id, version}`` capability reference contracts and manifests use."""
        return {"id": self.id, "version": self.version}

    def card_entry(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "version": self.version,
            "inputSchema": self.input_schema.uri,
            "inputSchemaHash": self.input_schema.hash,
            "outputSchema": self.output_schema.uri,
            "outputSchemaHash": self.output_schema.hash,
            "constraints": dict(self.constraints),
            "verifiedEvidence": list(self.verified_evidence),
        }


@dataclass(frozen=True)
class ToolSpec:
    name: str
    fn: ToolFn
    version: str | None = None
    # Pure computation with no effect outside the run (spec 11.5): only such a tool may run
    # while the Group is unreachable. Undeclared, a tool counts as irreversible.
    reversible: bool = False


@dataclass(frozen=True)
class CardInfo:
    """What the Agent Card says beyond the capabilities: Organization, owner, name, version."""

    organization_id: str
    owner: Principal
    display_name: str
    card_version: int = 1
    endpoint: str | None = None


def _require_async(fn: Callable[..., Any], what: str) -> None:
    if not inspect.iscoroutinefunction(fn):
        raise AgentDeclarationError(f"{what} {getattr(fn, '__name__', fn)!r} must be async def")


class Agent:
    """An Agent's declaration: ID, signing identity, card, capabilities, tools, concurrency.

    ``max_concurrency`` is the number of isolated execution slots the worker runs (the card's
    ``maxConcurrency``). The private key in ``identity`` stays in the agent's worker process.
    """

    def __init__(
        self,
        agent_id: str,
        identity: Identity,
        *,
        card: CardInfo,
        max_concurrency: int = 1,
        mean_run_seconds: int = MEAN_RUN_SECONDS,
    ) -> None:
        if not is_identifier(agent_id):
            raise AgentDeclarationError(f"agent ID {agent_id!r} is not an absolute URI")
        if identity.principal != Principal("agent", agent_id):
            raise AgentDeclarationError("the identity must be the agent's own (principal agent)")
        if type(max_concurrency) is not int or not 1 <= max_concurrency <= 1024:
            raise AgentDeclarationError("max_concurrency must be an integer from 1 to 1024")
        if type(card.card_version) is not int or card.card_version < 1:
            raise AgentDeclarationError("card_version must be a positive integer")
        if type(mean_run_seconds) is not int or not 1 <= mean_run_seconds <= 7 * 86400:
            raise AgentDeclarationError("mean_run_seconds must be an integer from 1 to 604800")
        self.agent_id = agent_id
        self.identity = identity
        self.card_info = card
        self.max_concurrency = max_concurrency
        # How long one run takes, as the agent's author expects: the Scheduler's estimates
        # (start windows, admission against start-by deadlines) use it until runs are seen.
        self.mean_run_seconds = mean_run_seconds
        self._capabilities: dict[tuple[str, str], CapabilitySpec] = {}
        self._tools: dict[str, ToolSpec] = {}

    def __repr__(self) -> str:
        return f"Agent({self.agent_id}, {len(self._capabilities)} capabilities)"

    # --- registration -----------------------------------------------------------------------

    def capability(
        self,
        capability_id: str,
        version: str,
        *,
        input_schema: SchemaRef = ANY_OBJECT,
        output_schema: SchemaRef = ANY_OBJECT,
        constraints: Mapping[str, Any] | None = None,
        verified_evidence: Sequence[str] = (DEVELOPMENT_EVIDENCE,),
    ) -> Callable[[C], C]:
        """Register ``async def fn(ctx) -> Submission`` as capability ``capability_id@version``."""
        if len(capability_id) > 200 or not _CAPABILITY_ID.fullmatch(capability_id):
            raise AgentDeclarationError(f"capability ID {capability_id!r} is malformed")
        if len(version) > 128 or not _SEMVER.fullmatch(version):
            raise AgentDeclarationError(f"capability version {version!r} is not semver")
        evidence = tuple(verified_evidence)
        if not evidence or len(set(evidence)) != len(evidence):
            raise AgentDeclarationError("verified_evidence must be non-empty and unique")
        if not all(is_identifier(e) for e in evidence):
            raise AgentDeclarationError("verified_evidence entries must be absolute URIs")

        def register(fn: C) -> C:
            _require_async(fn, "capability")
            if (capability_id, version) in self._capabilities:
                raise AgentDeclarationError(f"{capability_id}@{version} is declared twice")
            self._capabilities[(capability_id, version)] = CapabilitySpec(
                capability_id,
                version,
                fn,
                input_schema,
                output_schema,
                dict(constraints or {}),
                evidence,
            )
            return fn

        return register

    def tool(
        self, name: str, *, version: str | None = None, reversible: bool = False
    ) -> Callable[[T], T]:
        """Register a plain ``async def`` tool under ``name`` (run through ``ctx.tool``);
        ``reversible``: it has no effect outside the run, so it may run offline."""
        if not _TOOL_NAME.fullmatch(name):
            raise AgentDeclarationError(f"tool name {name!r} is malformed")

        def register(fn: T) -> T:
            _require_async(fn, "tool")
            if name in self._tools:
                raise AgentDeclarationError(f"tool {name!r} is declared twice")
            self._tools[name] = ToolSpec(name, fn, version, reversible)
            return fn

        return register

    # --- lookup -----------------------------------------------------------------------------

    @property
    def capabilities(self) -> list[CapabilitySpec]:
        return list(self._capabilities.values())

    @property
    def tools(self) -> dict[str, ToolSpec]:
        return dict(self._tools)

    def find_capability(self, capability_id: str, version: str) -> CapabilitySpec | None:
        return self._capabilities.get((capability_id, version))

    def capability_for(self, required: Sequence[Mapping[str, str]]) -> CapabilitySpec | None:
        """The declared capability a Work Contract's ``requiredCapabilities`` names, if any."""
        for ref in required:
            spec = self.find_capability(ref["id"], ref["version"])
            if spec is not None:
                return spec
        return None

    # --- the Agent Card ---------------------------------------------------------------------

    def card(self, *, issued_at: str | None = None) -> dict[str, Any]:
        """The unsigned Agent Card (the Organization's registry service signs it)."""
        if not self._capabilities:
            raise AgentDeclarationError("an Agent Card needs at least one capability")
        info = self.card_info
        return agent_card(
            self.identity,
            organization_id=info.organization_id,
            owner=info.owner,
            display_name=info.display_name,
            capabilities=[spec.card_entry() for spec in self._capabilities.values()],
            card_version=info.card_version,
            max_concurrency=self.max_concurrency,
            endpoint=info.endpoint,
            issued_at=issued_at,
        )
