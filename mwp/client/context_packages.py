"""Context Packages from the client SDK: what a Coordinator hands a Worker it offers work to.

A Worker new to the Group sees only what its Membership admits, so an offer that admits one
names a signed Context Package the Group published, or carries it inline
(``contextPackage``: the Authority publishes it in the same transition, before the grant):

>>> package = offer_context_package(await mission.work_item(item_id), coordinator)
>>> await mission.send(coordinator, "work.offer",
...                    {"candidates": [...], "expiresAt": ..., "contextPackage": package},
...                    session_epoch=1, work_item_id=item_id)

The package built here cites the Events that stated the item's Work Contract (the view's
``contractEvents``) and the one that recorded its latest checkpoint: a newcomer may retrieve
them to read the contract it is offered and to resume from where the last owner stopped.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any, Final

from mwp.client.identity import Identity, new_id, utc_now
from mwp.core.group.ids import event_id

CLAUSES: tuple[str, ...] = ("MWP-MSN-012", "MWP-WRK-027")

CONTEXT_PACKAGE_PUBLISH: Final = "ext.missionweaveprotocol.core.context_package_publish"
# The schema's bound on a package's summary.
MAX_SUMMARY_CHARS: Final = 50_000


def contract_summary(contract: Mapping[str, Any]) -> str:
    """The goal, then the first acceptance criterion: what the Worker is asked to deliver."""
    lines = [str(contract["goal"])]
    criteria = contract.get("acceptanceCriteria") or []
    if criteria:
        lines.append(f"Accepted when: {criteria[0]['description']}")
    return "\n".join(lines)[:MAX_SUMMARY_CHARS]


def offer_context_package(
    view: Mapping[str, Any],
    coordinator: Identity,
    *,
    published_artifacts: Collection[str] | None = None,
    context_package_id: str | None = None,
    previous: Mapping[str, Any] | None = None,
    generated_at: str | None = None,
    dependencies: Iterable[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """A Context Package for an offer of the WorkItem ``view`` (what ``work_item`` returns),
    signed by ``coordinator``, its generator.

    It cites the item's ``contractEvents``, the Event of its latest checkpoint (when the view
    names it) and the contract's input Artifacts (only those in
    ``published_artifacts`` when given: the Group refuses a hash it has not published).
    ``previous`` (an earlier package of the same item) makes this its next version.
    ``dependencies`` (the views of the item's dependencies) adds, for each, the Event that
    accepted its result when it is verified, else its ``contractEvents``: a newcomer learns
    what its item waits on."""
    contract = view["contract"]
    cited = list(view.get("contractEvents") or [])
    if not cited:
        raise ValueError("the WorkItem view lists no contractEvents (a Group before packages)")
    checkpoint = view.get("checkpoint") or {}
    if checkpoint.get("eventId") and checkpoint.get("checkpointRef"):  # where to resume from
        cited.append({"sequence": checkpoint["sequence"], "eventId": checkpoint["eventId"]})
    for dependency in dependencies:  # a view, or the record the Group keeps of a settled item
        accepted = (dependency.get("result") or {}).get("acceptedEvent")
        if accepted is None and dependency.get("acceptedSequence") is not None:
            sequence = int(dependency["acceptedSequence"])
            accepted = {"sequence": sequence, "eventId": event_id(view["groupId"], sequence)}
        cited.extend([accepted] if accepted else dependency.get("contractEvents") or [])
    cited = sorted({e["eventId"]: e for e in cited}.values(), key=lambda e: int(e["sequence"]))
    inputs = list(contract.get("inputArtifacts") or [])
    if published_artifacts is not None:
        inputs = [h for h in inputs if h in published_artifacts]
    package: dict[str, Any] = {
        "contextPackageId": context_package_id or new_id(),
        "version": 1,
        "missionId": view["missionId"],
        "groupId": view["groupId"],
        "workItemId": view["workItemId"],
        "sourceEventRange": {
            "fromSequence": cited[0]["sequence"],
            "toSequence": cited[-1]["sequence"],
            "eventIds": [e["eventId"] for e in cited],
        },
        "artifactHashes": inputs,
        "summary": contract_summary(contract),
        "decisions": [],
        "constraints": [],
        "unresolvedQuestions": [],
        "generatedBy": coordinator.principal.to_json(),
        "generatedAt": generated_at or utc_now(),
    }
    if previous is not None:
        package["previousContextPackageId"] = previous["contextPackageId"]
        package["version"] = int(previous["version"]) + 1
    return coordinator.sign(package, "context-package")


def needs_context_package(
    mission_view: Mapping[str, Any], item_view: Mapping[str, Any], agent_ids: Collection[str]
) -> bool:
    """Whether an offer of the WorkItem ``item_view`` to ``agent_ids`` should carry a Context
    Package: a candidate is new to the Group (the Authority requires one), or its visibility
    starts after the Events that stated the item's contract (without the package it could not
    read the contract it is offered)."""
    cited = item_view.get("contractEvents") or []
    first = int(cited[0]["sequence"]) if cited else None
    members = {m["member"]["id"]: m for m in mission_view.get("memberships", [])}
    for agent_id in agent_ids:
        membership = members.get(agent_id)
        if membership is None or membership.get("state") == "ended":
            return True
        start = int(membership.get("visibilityStartSequence", 0))
        if first is not None and start > first:
            return True
    return False
