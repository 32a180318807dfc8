"""Context Packages (spec 8, 13.3): the signed, versioned summary a newcomer is handed.

``ext.missionweaveprotocol.core.context_package_publish`` puts one signed Context Package into
the Group; its Event ``..._published`` carries the same document, scoped to the package's
WorkItem when it names one (else the Mission). A late-joining Worker reaches the Group only
through what its Membership lets it read: the package, and the Events it cites.

The Authority checks what the Group knows: the package describes this Mission and Group (and a
WorkItem of it), its generator is the Command's actor, its cited Event range lies within the
Group's log and names Events of it, each Artifact hash is published here, its ID is new, and
its version continues its predecessor's (same scope, version + 1; no predecessor: version 1).

From rules ``RULES_CONTEXT`` on, a ``work.offer`` admitting a new Worker and a
``mission.assign_coordinator`` must name a published package (``contextPackageId``); an offer
may instead carry the package itself (``contextPackage``), published by the same transition
just before the grant. A Coordinator's package stayed optional until ``RULES_LEDGER``: from
then on a replacement Coordinator is refused without a Mission-wide one.

The core cannot check the package's signature (it holds no Registry evidence). The shell does,
on the object :func:`embedded_context_package` returns, before the Command is decided.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, NoReturn

from mwp.core.errors import ErrorCode
from mwp.core.group.api import RULES_CONTEXT, RULES_LEDGER, AuthorityContext
from mwp.core.group.drafts import Drafts
from mwp.core.group.ids import event_id
from mwp.core.group.incoming import Incoming
from mwp.core.group.payload import Payload, members
from mwp.core.group.rejection import bad_transition, invalid, reject
from mwp.core.group.roles import coordinator_or_owner
from mwp.core.group.rules import CommandRule, by_agent, no_target
from mwp.core.group.state import GroupState
from mwp.core.models import DocumentInvalid, validate_document

Json = dict[str, Any]

PUBLISH_KIND: Final = "ext.missionweaveprotocol.core.context_package_publish"
PUBLISHED_KIND: Final = "ext.missionweaveprotocol.core.context_package_published"
PACKAGE_MEMBER: Final = "contextPackage"
PACKAGE_ID_MEMBER: Final = "contextPackageId"
# Kinds whose payload may carry a signed package the shell must verify first.
CARRYING_KINDS: Final = frozenset({PUBLISH_KIND, "work.offer"})

CLAUSES: tuple[str, ...] = ("MWP-MSN-005", "MWP-WRK-027")


def embedded_context_package(kind: str, payload: Mapping[str, Any]) -> dict[str, Any] | None:
    """The signed Context Package a Command of ``kind`` carries, unchanged; None if none.

    The shell verifies it against the Registry evidence before the Command is decided::

        package = embedded_context_package(command["kind"], command["payload"])
        if package is not None:
            verify_value(package, PROFILES["context-package"], evidence)  # signer: generatedBy

    A publish Command without a package object is ``INVALID_COMMAND``, exactly as ``decide``
    would refuse it.
    """
    if kind not in CARRYING_KINDS:
        return None
    p = Payload(payload)
    if kind != PUBLISH_KIND and not p.has(PACKAGE_MEMBER):
        return None
    return _package_object(p)


def _package_object(payload: Payload) -> Json:
    value = payload.raw(PACKAGE_MEMBER)
    if not isinstance(value, dict):
        invalid(
            f"payload.{PACKAGE_MEMBER}: must be an object",
            member=f"payload.{PACKAGE_MEMBER}",
            reason="must be an object",
        )
    return value


def _wrong(member: str, message: str, **details: Any) -> NoReturn:
    invalid(message, member=f"payload.{PACKAGE_MEMBER}.{member}", **details)


def checked_package(state: GroupState, cmd: Incoming) -> Json:
    """The package the Command carries, as signed, if the Group may publish it."""
    package = _package_object(cmd.payload)
    try:
        validate_document("context-package.schema.json", package)
    except DocumentInvalid as exc:
        reject(
            ErrorCode.SCHEMA_VALIDATION_FAILED,
            f"the Context Package is invalid: {exc.reason}",
            member=f"payload.{PACKAGE_MEMBER}",
            reason=exc.reason,
        )
    generator = package["generatedBy"]
    if generator["id"] != cmd.actor_id or generator["type"] != cmd.actor_type:
        _wrong("generatedBy", "the package's generator must be the Command's actor")
    for member, expected in (("missionId", state.mission_id), ("groupId", state.group_id)):
        if package[member] != expected:
            _wrong(member, f"payload.{PACKAGE_MEMBER}.{member} does not match", expected=expected)
    scope = package.get("workItemId")
    if scope is not None and not state.has_item(scope):
        _wrong("workItemId", "no such WorkItem in this Group", workItemId=scope)
    _check_range(state, package["sourceEventRange"])
    unknown = sorted(h for h in package["artifactHashes"] if h not in state.artifacts)
    if unknown:
        _wrong(
            "artifactHashes",
            "every Artifact hash must be published in this Group",
            unknownArtifacts=unknown,
        )
    package_id = package["contextPackageId"]
    if package_id in state.context_packages:
        _wrong(
            "contextPackageId",
            "the Context Package ID is already published in this Group",
            reason="context_package_exists",
        )
    _check_version(state, package, scope)
    return package


def _check_range(state: GroupState, cited: Json) -> None:
    first, last = cited["fromSequence"], cited["toSequence"]
    if first > last or last > state.sequence:
        _wrong(
            "sourceEventRange",
            "the source range must lie within the Group's log, from before to",
            lastSequence=state.sequence,
        )
    named: list[str] = cited["eventIds"]
    if len(named) > last - first + 1:
        _wrong("sourceEventRange.eventIds", "more Event IDs than the range holds")
    in_range = {event_id(state.group_id, s) for s in range(first, last + 1)}
    outside = [e for e in named if e not in in_range]
    if outside:
        _wrong(
            "sourceEventRange.eventIds",
            "every cited Event must be one of the range's",
            eventIds=outside[:20],
        )


def _check_version(state: GroupState, package: Json, scope: str | None) -> None:
    previous_id = package.get("previousContextPackageId")
    version = package["version"]
    if previous_id is None:
        if version != 1:
            _wrong("version", "a first Context Package is version 1", expected=1)
        return
    previous = state.context_packages.get(previous_id)
    if previous is None:
        _wrong(
            "previousContextPackageId",
            "the previous Context Package is not published in this Group",
        )
    if previous.get("workItemId") != scope:
        _wrong(
            "workItemId",
            "a new version keeps the previous package's scope",
            expected=previous.get("workItemId"),
        )
    if version != previous["version"] + 1:
        _wrong(
            "version", "a new version follows the previous one", expected=previous["version"] + 1
        )


def add_published(drafts: Drafts, state: GroupState, package: Json) -> None:
    scope = package.get("workItemId")
    aggregate = ("work_item", scope) if scope else ("mission", state.mission_id)
    drafts.add(PUBLISHED_KIND, aggregate, {PACKAGE_MEMBER: package}, work_item_id=scope)


def offered_package(
    state: GroupState, cmd: Incoming, ctx: AuthorityContext, work_item_id: str
) -> tuple[str | None, Json | None]:
    """The package a ``work.offer`` names or carries: (its ID, the document when inline).

    Under rules older than ``RULES_CONTEXT`` any named ID is taken as it always was."""
    p = cmd.payload
    if ctx.rules < RULES_CONTEXT:
        if p.has(PACKAGE_MEMBER):
            invalid(
                f"payload.{PACKAGE_MEMBER} is not known to this Group's rules",
                member=f"payload.{PACKAGE_MEMBER}",
            )
        return p.opt_id(PACKAGE_ID_MEMBER), None
    if p.has(PACKAGE_MEMBER):
        if p.has(PACKAGE_ID_MEMBER):
            invalid(
                "name the Context Package once: contextPackage or contextPackageId",
                member=f"payload.{PACKAGE_ID_MEMBER}",
            )
        coordinator_or_owner(state, cmd)
        package = checked_package(state, cmd)
        scope = package.get("workItemId")
        if scope is not None and scope != work_item_id:
            _wrong("workItemId", "the package is scoped to another WorkItem", expected=work_item_id)
        return str(package["contextPackageId"]), package
    return p.opt_id(PACKAGE_ID_MEMBER), None


def require_published(
    state: GroupState,
    ctx: AuthorityContext,
    package_id: str | None,
    *,
    member_id: str,
    work_item_id: str | None = None,
) -> None:
    """From ``RULES_CONTEXT`` on, ``package_id`` names a package of this Group (for an offer:
    Mission-wide or scoped to the offered WorkItem); the refusal names the member admitted."""
    if ctx.rules < RULES_CONTEXT or package_id is None:
        return
    published = state.context_packages.get(package_id)
    if published is None:
        invalid(
            "the Context Package is not published in this Group",
            member=f"payload.{PACKAGE_ID_MEMBER}",
            agentId=member_id,
            contextPackageId=package_id,
        )
    scope = published.get("workItemId")
    if work_item_id is not None and scope is not None and scope != work_item_id:
        invalid(
            "the Context Package is scoped to another WorkItem",
            member=f"payload.{PACKAGE_ID_MEMBER}",
            agentId=member_id,
            contextPackageId=package_id,
        )


def require_handover_package(
    state: GroupState,
    ctx: AuthorityContext,
    package_id: str | None,
    *,
    agent_id: str,
    previous_agent_id: str,
) -> None:
    """A ``mission.assign_coordinator``'s package: from ``RULES_LEDGER`` on, a replacement
    (another agent than the lease's holder, live or expired) must be handed a Mission-wide
    package the Group published (spec 7.2); re-appointing the holder needs none. Under older
    rules the package is optional and, when named, only has to be published."""
    if ctx.rules < RULES_LEDGER or agent_id == previous_agent_id:
        require_published(state, ctx, package_id, member_id=agent_id)
        return
    if package_id is None:
        invalid(
            "a replacement Coordinator must be handed a Context Package the Group published",
            member=f"payload.{PACKAGE_ID_MEMBER}",
            agentId=agent_id,
            reason="context_package_required",
        )
    require_published(state, ctx, package_id, member_id=agent_id)
    if state.context_packages[package_id].get("workItemId") is not None:
        invalid(
            "a replacement Coordinator's Context Package must have Mission scope",
            member=f"payload.{PACKAGE_ID_MEMBER}",
            agentId=agent_id,
            contextPackageId=package_id,
        )


# --- ext.missionweaveprotocol.core.context_package_publish ------------------------------------


def _decide_publish(
    state: GroupState, cmd: Incoming, ctx: AuthorityContext, drafts: Drafts
) -> None:
    mission = state.mission
    assert mission is not None
    if mission.terminal:
        bad_transition("Mission", mission.state, cmd.kind)
    add_published(drafts, state, checked_package(state, cmd))


def _evolve_published(state: GroupState, event: Json) -> None:
    package = event["payload"][PACKAGE_MEMBER]
    scope = package.get("workItemId")
    entry: Json = {"version": package["version"], "sequence": event["sequence"]}
    if scope is not None:
        entry["workItemId"] = scope
        record = state.item_record(scope)
        assert record is not None
        record.revision = event["aggregateRevision"]
        live = state.work_items.get(scope)
        if live is not None:
            live.updated_at = event["occurredAt"]
    else:
        assert state.mission is not None
        state.mission.revision = event["aggregateRevision"]
        state.mission.updated_at = event["occurredAt"]
    state.context_packages[package["contextPackageId"]] = entry


RULES = (
    CommandRule(
        PUBLISH_KIND,
        _decide_publish,
        coordinator_or_owner,
        target=no_target,
        coordinator=by_agent,
        payload=members(PACKAGE_MEMBER),
        clauses=CLAUSES,
        since_rules=RULES_CONTEXT,
    ),
)

EVOLVERS = {PUBLISHED_KIND: _evolve_published}
