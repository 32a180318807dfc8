"""The remaining plan a hand-over Context Package carries (MWP-MSN-005): each item the
Coordinator planned but has not yet authorized.

A replacement must be able to continue the whole plan, yet a planned item that is not a
WorkItem yet exists only in the Coordinator's own journal. So the package that hands the Mission
over carries those items, signed with it and kept in the Group's log: per item its plan key, the
WorkItem ID it will be authorized under (a replacement authorizes it under the same ID, so an
item its predecessor authorized meanwhile is never authorized twice), the Work Contract (its
dependencies and budget included), what it answers (``initial`` or a change request's Approval
ID) and, for an item planned as a child Mission, what that child is.

The Context Package schema has one place for such data: a noncritical extension. A reader that
does not know it still has a valid package (its summary names the items too); the replacement
Coordinator, the one reader it is meant for, adopts the items instead of calling its own
``plan`` function, which would neither know what its predecessor decided nor keep its WorkItem
IDs. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NoReturn

from mwp.agent.declaration import AgentDeclarationError
from mwp.coordinator.declaration import ChildMission
from mwp.core.errors import ErrorCode, MwpError
from mwp.core.models import DocumentInvalid, validate_document
from mwp.core.wire.values import is_identifier

Json = dict[str, Any]

CLAUSES: tuple[str, ...] = ("MWP-MSN-005",)

REMAINING_PLAN_EXTENSION: Final = "urn:mwp:extension:coordinator-remaining-plan"
REMAINING_PLAN_VERSION: Final = "0.1.0"
ITEM_MEMBERS: Final = frozenset({"key", "workItemId", "answers", "contract", "child"})


@dataclass(frozen=True)
class RemainingItem:
    """A planned item not yet authorized, as a hand-over package carries it."""

    key: str
    work_item_id: str
    answers: str  # ``initial`` or the ID of the change request (Approval) it answers
    contract: Mapping[str, Any]  # the complete Work Contract to authorize it with
    child: ChildMission | None = None

    def to_json(self) -> Json:
        value: Json = {
            "key": self.key,
            "workItemId": self.work_item_id,
            "answers": self.answers,
            "contract": dict(self.contract),
        }
        if self.child is not None:
            value["child"] = {
                "objective": self.child.objective,
                "coordinator": self.child.coordinator,
                "definitionOfDone": list(self.child.definition_of_done),
            }
        return value


def remaining_plan_extension(items: Sequence[RemainingItem]) -> Json:
    """The package's ``extensions`` member carrying ``items``."""
    return {
        REMAINING_PLAN_EXTENSION: {
            "version": REMAINING_PLAN_VERSION,
            "critical": False,
            "data": {"items": [item.to_json() for item in items]},
        }
    }


def remaining_plan(package: Mapping[str, Any]) -> tuple[RemainingItem, ...]:
    """The remaining plan ``package`` carries (none: a package without one, as every package
    published before it existed). A malformed one is ``SCHEMA_VALIDATION_FAILED``: it is
    taken whole or not at all."""
    extension = (package.get("extensions") or {}).get(REMAINING_PLAN_EXTENSION)
    if extension is None:
        return ()
    version = str(extension.get("version", ""))
    if version.split(".", 1)[0] != REMAINING_PLAN_VERSION.split(".", 1)[0]:
        _malformed("version", f"version {version!r} is not one this Coordinator reads")
    data = extension.get("data")
    entries = data.get("items") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        _malformed("data.items", "must be a list")
    items = tuple(_item(index, entry) for index, entry in enumerate(entries))
    ids = [item.work_item_id for item in items]
    if len(set(ids)) != len(ids):
        _malformed("data.items", "names a WorkItem ID twice")
    return items


def remaining_ids(package: Mapping[str, Any]) -> tuple[str, ...]:
    """The WorkItem IDs of ``package``'s remaining plan, or none if it is malformed."""
    try:
        return tuple(item.work_item_id for item in remaining_plan(package))
    except MwpError:
        return ()


def _item(index: int, entry: object) -> RemainingItem:
    where = f"data.items[{index}]"
    if not isinstance(entry, dict) or not ITEM_MEMBERS >= set(entry) >= ITEM_MEMBERS - {"child"}:
        _malformed(where, f"must be an object with members {sorted(ITEM_MEMBERS)}")
    key, work_item_id, answers = entry["key"], entry["workItemId"], entry["answers"]
    if not isinstance(key, str) or not key:
        _malformed(f"{where}.key", "must be a non-empty string")
    if not isinstance(work_item_id, str) or not is_identifier(work_item_id):
        _malformed(f"{where}.workItemId", "must be an identifier")
    if not isinstance(answers, str) or not answers:
        _malformed(f"{where}.answers", "must be a non-empty string")
    try:
        validate_document("work-contract.schema.json", entry["contract"])
    except DocumentInvalid as exc:
        _malformed(f"{where}.contract", exc.reason)
    return RemainingItem(key, work_item_id, answers, entry["contract"], _child(where, entry))


def _child(where: str, entry: Mapping[str, Any]) -> ChildMission | None:
    child = entry.get("child")
    if child is None:
        return None
    try:
        return ChildMission(
            str(child["objective"]),
            str(child["coordinator"]),
            tuple(str(text) for text in child["definitionOfDone"]),
        )
    except (AgentDeclarationError, KeyError, TypeError) as exc:
        _malformed(f"{where}.child", str(exc))


def _malformed(member: str, reason: str) -> NoReturn:
    raise MwpError(
        ErrorCode.SCHEMA_VALIDATION_FAILED,
        f"the hand-over package's remaining plan is malformed: {member}: {reason}",
        details={"member": f"extensions.{REMAINING_PLAN_EXTENSION}.{member}", "reason": reason},
    )
