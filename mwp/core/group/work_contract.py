"""Work Contract completeness (MWP-WRK-001/002): refused as ``WORK_CONTRACT_INCOMPLETE``.

The schema is the floor; on top of it a contract must name each criterion, deliverable and
capability once, so Evidence can be mapped to criteria and pins to capabilities unambiguously.
"""

from __future__ import annotations

from typing import Any, NoReturn

from pydantic import BaseModel, ValidationError

from mwp.core.errors import ErrorCode
from mwp.core.group.rejection import invalid, reject
from mwp.core.models import DocumentInvalid, validate_document
from mwp.core.models.common import CapabilityRef
from mwp.core.models.membership import DelegationBudget
from mwp.core.models.work_item import Progress, SelectionBasis

CLAUSES: tuple[str, ...] = ("MWP-WRK-001", "MWP-WRK-006")

Json = dict[str, Any]


def _incomplete(message: str, **details: Any) -> NoReturn:
    reject(ErrorCode.WORK_CONTRACT_INCOMPLETE, message, **details)


def complete_contract(value: Any) -> Json:
    """The validated contract, in canonical JSON form (a fresh copy)."""
    if not isinstance(value, dict):
        _incomplete("payload.contract must be a Work Contract object")
    try:
        model = validate_document("work-contract.schema.json", value)
    except DocumentInvalid as exc:
        _incomplete(f"the Work Contract is incomplete: {exc.reason}", reason=exc.reason)
    contract = wire_form(model, "payload.contract")
    for member in ("goal", "businessImpact"):
        if not contract[member].strip():
            _incomplete(f"the Work Contract's {member} is blank", member=member)
    for member, key in (
        ("acceptanceCriteria", "criterionId"),
        ("requiredDeliverables", "deliverableId"),
        ("requiredCapabilities", "id"),
    ):
        names = [entry[key] for entry in contract[member]]
        if len(set(names)) != len(names):
            _incomplete(f"the Work Contract names an entry of {member} twice", member=member)
    return contract


def criterion_ids(contract: Json) -> list[str]:
    return [c["criterionId"] for c in contract["acceptanceCriteria"]]


def _model(model: type[BaseModel], value: Any, what: str) -> Json:
    try:
        parsed = model.model_validate(value, strict=True, by_alias=True, by_name=False)
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        invalid(f"{what} is malformed", reason=f"{first['loc']}: {first['msg']}"[:300])
    return wire_form(parsed, what)


def wire_form(model: BaseModel, member: str) -> Json:
    """A validated model's JSON form. Free-form data inside it (a Message's ``data``, a
    resource's ``constraints``) may nest deeper than the model serializer goes: refused."""
    try:
        dumped: Json = model.model_dump(by_alias=True, exclude_unset=True, mode="json")
    except ValueError:
        invalid(f"{member} nests deeper than the Group records", member=member, reason="nesting")
    return dumped


def selection_basis(value: Any) -> Json:
    return _model(SelectionBasis, value, "selectionBasis")


def progress(value: Any) -> Json:
    return _model(Progress, value, "progress")


def delegation_budget(value: Any) -> Json:
    """A Delegation Grant budget: currency and all six ceilings, each stated explicitly."""
    return _model(DelegationBudget, value, "budget")


def capability_refs(value: Any, what: str = "capabilityPins") -> list[Json]:
    if not isinstance(value, list) or not value:
        invalid(f"{what} must be a non-empty array of capability references")
    return [_model(CapabilityRef, v, "a capability reference") for v in value]


def version_tuple(version: str) -> tuple[int, ...]:
    core = version.split("+", 1)[0].split("-", 1)[0]
    return tuple(int(part) for part in core.split("."))


def covers(required: list[Json], offered: list[Json]) -> list[str]:
    """Required capability IDs that ``offered`` lacks at the required (or a later) version."""
    best: dict[str, tuple[int, ...]] = {}
    for ref in offered:
        v = version_tuple(ref["version"])
        if v > best.get(ref["id"], ()):
            best[ref["id"]] = v
    return [
        ref["id"]
        for ref in required
        if ref["id"] not in best or best[ref["id"]] < version_tuple(ref["version"])
    ]
