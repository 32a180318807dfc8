"""Value types and shared objects used across the protocol's schemas (common.schema.json).

Every value type is an ``Annotated`` alias with a plain validator, so each check is one Python
call with no pydantic coercion in front of it, and it reproduces the JSON Schema verdict:

* patterns are ECMA-262 regular expressions anchored at both ends; they are matched with
  ``fullmatch`` because Python's ``$`` would also accept a trailing line feed;
* strings are checked in Python, not by pydantic's ``str``, because a string holding an
  unpaired surrogate is still a JSON Schema string (JCS rejects it later, at its own stage);
* a JSON Schema integer is any number with a zero fraction, so ``1.0`` is accepted (and held
  as ``1``, the same JSON number) while ``true`` and ``"1"`` are not;
* timestamps are ``date-time`` plus the protocol timestamp profile, kept as their exact text.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any, Literal, Self, TypeVar

from annotated_types import MinLen
from pydantic import AfterValidator, PlainValidator, model_validator

from mwp.core.models._base import WireModel, unique_items
from mwp.core.wire.values import (
    MAX_SAFE_INTEGER,
    is_absolute_uri,
    is_identifier,
    is_profile_timestamp,
    is_sha256_ref,
)

CLAUSES: tuple[str, ...] = ("MWP-EXT-010", "MWP-FND-009")

T = TypeVar("T")

# --- building blocks ------------------------------------------------------------------------


def _string(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError("expected a string")
    return value


def text(min_length: int = 0, max_length: int | None = None) -> PlainValidator:
    """A string whose length in code points lies within the bounds."""

    def check(value: object) -> str:
        string = _string(value)
        if len(string) < min_length:
            raise ValueError(f"must have at least {min_length} characters")
        if max_length is not None and len(string) > max_length:
            raise ValueError(f"must have at most {max_length} characters")
        return string

    return PlainValidator(check)


def matching(
    pattern: str, *, what: str, min_length: int = 0, max_length: int | None = None
) -> PlainValidator:
    """A string matching ``pattern`` as a whole, within optional length bounds."""
    compiled = re.compile(pattern)

    def check(value: object) -> str:
        string = _string(value)
        if max_length is not None and len(string) > max_length:
            raise ValueError(f"{what} must have at most {max_length} characters")
        if len(string) < min_length or compiled.fullmatch(string) is None:
            raise ValueError(f"not a valid {what}")
        return string

    return PlainValidator(check)


def predicate(
    test: Callable[[str], bool], what: str, max_length: int | None = None
) -> PlainValidator:
    """A string for which ``test`` holds, within an optional length bound."""

    def check(value: object) -> str:
        string = _string(value)
        if max_length is not None and len(string) > max_length:
            raise ValueError(f"{what} must have at most {max_length} characters")
        if not test(string):
            raise ValueError(f"not a valid {what}")
        return string

    return PlainValidator(check)


def _integer(minimum: int) -> PlainValidator:
    def check(value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError("expected an integer")
        if isinstance(value, float):
            if not value.is_integer():
                raise ValueError("expected an integer")
            value = int(value)
        if not minimum <= value <= MAX_SAFE_INTEGER:
            raise ValueError(f"must be a safe integer of at least {minimum}")
        return value

    return PlainValidator(check)


def _number(minimum: float, maximum: float | None = None) -> PlainValidator:
    def check(value: object) -> int | float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError("expected a number")
        if value < minimum or (maximum is not None and value > maximum):
            raise ValueError("number out of range")
        return value

    return PlainValidator(check)


def _json_object(value: object) -> dict[str, Any]:
    # Held as received (no copy): its content is free-form and checked by later stages.
    if type(value) is not dict:
        raise ValueError("expected a JSON object")
    return value


def _false(value: object) -> Literal[False]:
    if value is not False:
        raise ValueError("must be false")
    return False


def _uri_or_sha256(value: str) -> bool:
    return is_identifier(value) or is_sha256_ref(value)


def has_non_space(value: str) -> bool:
    """ECMA-262 ``\\S`` found somewhere in ``value``."""
    return _ECMA_NON_SPACE.search(value) is not None


# ECMA-262 `\S`: anything but its WhiteSpace and LineTerminator sets (not Python's `\s`).
_ECMA_NON_SPACE = re.compile(
    "[^\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]"
)

_EXTENSION_KIND = re.compile(r"ext\.[a-z0-9][a-z0-9_-]*(?:\.[a-z0-9][a-z0-9_-]*){2,}")


def is_extension_kind(value: str) -> bool:
    """An extension Command or Event kind (``ext.`` and at least three more segments)."""
    return len(value) <= 160 and _EXTENSION_KIND.fullmatch(value) is not None


# --- value types ----------------------------------------------------------------------------

ProtocolVersion = Literal["0.1"]
Identifier = Annotated[
    str, predicate(is_identifier, "identifier (absolute ASCII URI, at most 512 characters)")
]
Uri = Annotated[str, predicate(is_absolute_uri, "absolute URI")]
Timestamp = Annotated[str, predicate(is_profile_timestamp, "profile timestamp")]
Sha256 = Annotated[str, predicate(is_sha256_ref, "sha256 content hash")]
IdentifierOrSha256 = Annotated[str, predicate(_uri_or_sha256, "identifier or content hash")]
ExtensionKind = Annotated[str, predicate(is_extension_kind, "extension kind")]
# Unpadded base64url spelling only; zero unused pad bits are a later (envelope) stage's rule.
Base64Url = Annotated[
    str, matching("[A-Za-z0-9_-]+", what="base64url value", min_length=2, max_length=4096)
]
Kind = Annotated[
    str, matching(r"[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)+", what="kind", max_length=160)
]
SemVer = Annotated[
    str,
    matching(
        r"(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)"
        r"(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?",
        what="semantic version",
        max_length=128,
    ),
]
# ISO 8601 duration in days and time only; the look-aheads refuse a bare "P" or "T".
Duration = Annotated[
    str,
    matching(
        r"P(?!\Z)(?:[0-9]+D)?(?:T(?=[0-9])(?:[0-9]+H)?(?:[0-9]+M)?(?:[0-9]+(?:\.[0-9]+)?S)?)?",
        what="duration",
        max_length=64,
    ),
]
CapabilityId = Annotated[
    str, matching(r"[a-z0-9]+(?:[.-][a-z0-9]+)+", what="capability id", max_length=200)
]
CriterionId = Annotated[str, matching(r"[a-zA-Z0-9][a-zA-Z0-9._-]{0,127}", what="local id")]
MediaType = Annotated[
    str, matching(r"[A-Za-z0-9!#$&^_.+-]+/[A-Za-z0-9!#$&^_.+-]+", what="media type")
]
Operation = Annotated[str, matching(r"[a-z][a-z0-9._:-]*", what="operation", max_length=128)]
Scope = Annotated[str, matching(r"[a-z][a-z0-9._:-]*", what="scope", max_length=160)]
FailureCode = Annotated[str, matching(r"[A-Z][A-Z0-9_]{1,127}", what="failure code")]
CurrencyCode = Annotated[str, matching(r"[A-Z]{3}", what="currency code")]

SafeInteger = Annotated[int, _integer(0)]
PositiveInteger = Annotated[int, _integer(1)]
NonNegativeNumber = Annotated[int | float, _number(0)]
UnitInterval = Annotated[int | float, _number(0, 1)]
FalseConst = Annotated[Literal[False], PlainValidator(_false)]
JsonObject = Annotated[dict[str, Any], PlainValidator(_json_object)]

UniqueList = Annotated[list[T], AfterValidator(unique_items)]
NonEmptyList = Annotated[list[T], MinLen(1)]
NonEmptyUniqueList = Annotated[list[T], MinLen(1), AfterValidator(unique_items)]

Classification = Literal["public", "internal", "confidential", "restricted"]
EvidenceType = Literal[
    "artifact_integrity",
    "schema_validation",
    "deterministic_test",
    "business_rule",
    "reviewer_assessment",
    "human_review",
    "policy_check",
]

# --- shared objects -------------------------------------------------------------------------

ActorType = Literal["agent", "human", "service"]


class Actor(WireModel):
    """A Principal acting in the protocol."""

    type: ActorType
    id: Identifier


class AgentActor(WireModel):
    type: Literal["agent"]
    id: Identifier


class HumanActor(WireModel):
    type: Literal["human"]
    id: Identifier


class ServiceActor(WireModel):
    type: Literal["service"]
    id: Identifier


class Signature(WireModel):
    """The detached Ed25519 signature carried by a Signed Document."""

    algorithm: Literal["Ed25519"]
    key_id: Identifier
    created_at: Timestamp
    value: Base64Url


class PublicKey(WireModel):
    key_id: Identifier
    algorithm: Literal["Ed25519"]
    public_key: Base64Url
    valid_from: Timestamp
    valid_until: Timestamp | None = None
    revoked_at: Timestamp | None = None


class CapabilityRef(WireModel):
    id: CapabilityId
    version: SemVer


class Budget(WireModel):
    """Limits of a Mission or WorkItem; at least one limit, a money limit with its currency."""

    currency: CurrencyCode | None = None
    financial_limit: NonNegativeNumber | None = None
    model_token_limit: SafeInteger | None = None
    tool_call_limit: SafeInteger | None = None
    compute_seconds_limit: SafeInteger | None = None
    wall_clock_seconds_limit: SafeInteger | None = None
    external_side_effect_limit: SafeInteger | None = None

    @model_validator(mode="after")
    def _has_a_limit(self) -> Self:
        counted = (
            self.model_token_limit,
            self.tool_call_limit,
            self.compute_seconds_limit,
            self.wall_clock_seconds_limit,
            self.external_side_effect_limit,
        )
        money = self.financial_limit is not None and self.currency is not None
        if not money and all(limit is None for limit in counted):
            raise ValueError(
                "a budget needs financialLimit with currency, or at least one counted limit"
            )
        return self


class AcceptanceCriterion(WireModel):
    criterion_id: CriterionId
    description: Annotated[str, text(1, 4000)]
    evidence_required: NonEmptyUniqueList[EvidenceType]


class ResourceGrant(WireModel):
    resource: Identifier
    operations: NonEmptyUniqueList[Operation]
    constraints: JsonObject | None = None


class ExtensionEntry(WireModel):
    """One extension's data, kept as received so unknown extensions relay unchanged."""

    nullable_members = frozenset({"data"})

    version: SemVer
    critical: bool
    data: Any


Extensions = dict[Identifier, ExtensionEntry]
