"""Capability tokens (spec 12, 11.3): what one Worker may do under one Execution Lease.

The Organization's Authorization Service issues a token after acceptance and approvals; the
runtime presents it with every tool call and the Authority and gateway check it. A token is a
sealed service message (:mod:`mwp.core.trust.service_message`) of type ``capability-token``
from the Authorization Service to the Worker Agent, so it shares that codec and its refusals.
Its body binds the Session Epoch, Mission, Group, WorkItem, Ownership Epoch and Execution
Lease; lists the tools, resources, data and operations allowed; and limits each budget
dimension by the least of what was asked, the Work Contract budget and what the ledger says
remains (a dimension none of them limits stays unlimited, as in the budget ledger).

The token binds to the lease, not the reverse: it records the lease's expiry and never
outlives it, and a narrower token may replace a wider one while the lease stays current
(:func:`rotate`). The token is a credential: its repr never shows the signature, and
:func:`contains_token` finds its ID or signature anywhere in a JSON value, for the checks that
no durable object carries one. Every refusal is an :class:`MwpError` whose protected
diagnostic names the binding or grant that failed.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, Final

from mwp.core.errors import Diagnostic, ErrorCode, MwpError
from mwp.core.trust.registry import Principal, RegistryEvidence, RegistryEvidenceError
from mwp.core.trust.service_message import MessageRefusedError, TrustedKey, open_sealed, seal
from mwp.core.wire.ed25519 import SigningKey
from mwp.core.wire.values import Instant, ValueRuleError, parse_timestamp

CLAUSES: tuple[str, ...] = ("MWP-AUT-001", "MWP-AUT-002", "MWP-WRK-014")

TOKEN_TYPE: Final = "capability-token"

# The budget's dimension names (mwp.core.group.allocation.DIMENSIONS; the Group core imports
# trust, so trust cannot import it back; a unit test keeps the two equal).
DIMENSIONS: Final = (
    "financialLimit",
    "modelTokenLimit",
    "toolCallLimit",
    "computeSecondsLimit",
    "wallClockSecondsLimit",
    "externalSideEffectLimit",
)
FINANCIAL: Final = "financialLimit"

_GRANT_SETS: Final = ("tools", "resources", "data", "operations")
_BODY: Final = frozenset(
    {
        "tokenId",
        "missionId",
        "groupId",
        "workItemId",
        "ownershipEpoch",
        "sessionEpoch",
        "leaseId",
        "leaseExpiresAt",
        "expiresAt",
        "limits",
        *_GRANT_SETS,
    }
)


def _refuse(code: ErrorCode, stage: str, reason: str) -> MwpError:
    return MwpError(code, diagnostic=Diagnostic(stage, reason))


@dataclass(frozen=True)
class Binding:
    """Who may present a token and for what: as bound in it, or as the presenter's current
    Session, ownership and lease are known to the checker."""

    agent_id: str
    session_epoch: int
    mission_id: str
    group_id: str
    work_item_id: str
    ownership_epoch: int
    lease_id: str


@dataclass(frozen=True)
class ExecutionLease:
    """The current Execution Lease a token is issued under: its binding and expiry."""

    binding: Binding
    expires_at: str


@dataclass(frozen=True)
class Grant:
    """What a token allows. ``limits`` per budget dimension, one absent not limited;
    ``currency`` is the financial limit's on an issued token (the contract's; a request's is
    ignored)."""

    tools: frozenset[str] = frozenset()
    resources: frozenset[str] = frozenset()
    data: frozenset[str] = frozenset()
    operations: frozenset[str] = frozenset()
    limits: Mapping[str, Decimal] = field(default_factory=dict)
    currency: str | None = None  # of the financial limit

    def within(self, wider: Grant) -> bool:
        """Whether this grant allows nothing ``wider`` does not."""
        sets_within = all(getattr(self, n) <= getattr(wider, n) for n in _GRANT_SETS)
        limits_within = all(
            d in self.limits and self.limits[d] <= limit for d, limit in wider.limits.items()
        )
        return sets_within and limits_within


@dataclass(frozen=True)
class AuthorizationService:
    """The issuer: the service principal's ID and its signing key."""

    service_id: str
    key_id: str
    key: SigningKey = field(repr=False)


@dataclass(frozen=True)
class Claims:
    """What an authentic token states."""

    token_id: str
    issuer: str
    binding: Binding
    grant: Grant
    issued_at: str
    expires_at: str
    lease_expires_at: str


@dataclass(frozen=True, eq=False)
class CapabilityToken:
    """An issued token: the sealed document to hand to its Worker, never to log."""

    document: Mapping[str, Any]

    @property
    def token_id(self) -> str:
        return str(self.document["body"]["tokenId"])

    @property
    def signature(self) -> str:
        return str(self.document["signature"]["value"])

    @property
    def claims(self) -> Claims:
        return _claims(self.document)

    def to_json(self) -> dict[str, Any]:
        return dict(self.document)

    def __repr__(self) -> str:
        body = self.document["body"]
        return (
            f"CapabilityToken(token_id={body['tokenId']!r}, agent={self.document['to']!r}, "
            f"lease={body['leaseId']!r}, expires_at={body['expiresAt']!r})"
        )

    __str__ = __repr__


@dataclass(frozen=True)
class ToolCall:
    """One call as presented: the tool and operation, what it touches, what it declares it
    will spend (per budget dimension, in the token's currency)."""

    tool: str
    operation: str
    resources: frozenset[str] = frozenset()
    data: frozenset[str] = frozenset()
    spend: Mapping[str, Decimal | int] = field(default_factory=dict)
    currency: str | None = None  # of a declared financial spend


# --- issuing -------------------------------------------------------------------------------------


def issue(
    grant: Grant,
    *,
    lease: ExecutionLease,
    contract_budget: Mapping[str, Any],
    remaining: Mapping[str, Decimal],
    token_id: str,
    issued_at: str,
    expires_at: str,
    issuer: AuthorizationService,
) -> CapabilityToken:
    """A token for ``grant`` under ``lease``, its limits capped by the Work Contract budget and
    by ``remaining`` (what the ledger leaves the WorkItem, as ``budget.item_remaining``)."""
    issued, expires = _instant(issued_at, "issued-at"), _instant(expires_at, "expires-at")
    lease_end = _instant(lease.expires_at, "lease-expires-at")
    if not issued < lease_end:
        raise _refuse(ErrorCode.WORK_LEASE_EXPIRED, "issue", "lease-over")
    if not issued < expires:
        raise _refuse(ErrorCode.INVALID_COMMAND, "issue", "expiry-not-after-issuance")
    if lease_end < expires:
        raise _refuse(ErrorCode.AUTH_FORBIDDEN, "issue", "expiry-past-lease")
    limits = capped_limits(grant.limits, contract_budget, remaining)
    currency = contract_budget.get("currency") if FINANCIAL in limits else None
    bound = lease.binding
    body = {
        "tokenId": token_id,
        "missionId": bound.mission_id,
        "groupId": bound.group_id,
        "workItemId": bound.work_item_id,
        "ownershipEpoch": bound.ownership_epoch,
        "sessionEpoch": bound.session_epoch,
        "leaseId": bound.lease_id,
        "leaseExpiresAt": lease.expires_at,
        "expiresAt": expires_at,
        **{name: sorted(getattr(grant, name)) for name in _GRANT_SETS},
        "limits": _limits_json(limits, currency),
    }
    document = seal(
        TOKEN_TYPE,
        sender=issuer.service_id,
        recipient=bound.agent_id,
        sent_at=issued_at,
        body=body,
        key_id=issuer.key_id,
        key=issuer.key,
    )
    return CapabilityToken(document)


def rotate(
    previous: CapabilityToken,
    grant: Grant,
    *,
    lease: ExecutionLease,
    contract_budget: Mapping[str, Any],
    remaining: Mapping[str, Decimal],
    token_id: str,
    issued_at: str,
    expires_at: str,
    issuer: AuthorizationService,
) -> CapabilityToken:
    """A replacement for ``previous`` under the same lease allowing no more than it did (the
    caller revokes ``previous``); widening needs a fresh authorization, not a rotation."""
    before = previous.claims
    if before.binding != lease.binding:
        raise _refuse(ErrorCode.WORK_LEASE_EXPIRED, "rotate", "another-lease")
    token = issue(
        grant,
        lease=lease,
        contract_budget=contract_budget,
        remaining=remaining,
        token_id=token_id,
        issued_at=issued_at,
        expires_at=expires_at,
        issuer=issuer,
    )
    if not token.claims.grant.within(before.grant):
        raise _refuse(ErrorCode.AUTH_FORBIDDEN, "rotate", "wider-than-previous")
    return token


def capped_limits(
    requested: Mapping[str, Decimal],
    contract_budget: Mapping[str, Any],
    remaining: Mapping[str, Decimal],
) -> dict[str, Decimal]:
    """Per dimension, the least of what is asked, what the contract allows and what remains
    (never below zero); a dimension none of them limits is left out."""
    if not set(requested) <= set(DIMENSIONS):
        raise _refuse(ErrorCode.INVALID_COMMAND, "issue", "unknown-dimension")
    limits: dict[str, Decimal] = {}
    for dimension in DIMENSIONS:
        caps = [
            _amount(source[dimension], "limit")
            for source in (requested, contract_budget, remaining)
            if dimension in source
        ]
        if caps:
            limits[dimension] = max(Decimal(0), min(caps))
    return limits


# --- checking ------------------------------------------------------------------------------------


def check(
    token: CapabilityToken | Mapping[str, Any],
    *,
    presented_by: Binding,
    for_call: ToolCall,
    now: str,
    revoked: Collection[str],
    trusted: TrustedKey | RegistryEvidence,
    issuer: str,
    spent: Mapping[str, Decimal | int] | None = None,
) -> Claims:
    """The token's claims if it allows ``for_call`` by ``presented_by`` at ``now``, given what
    was already charged under it (``spent``); otherwise the refusal for the first failure.

    ``trusted`` is the Authorization Service's key, or Registry evidence in which ``issuer``
    holds the signing key, valid when the token was issued and now.
    """
    document = token.document if isinstance(token, CapabilityToken) else token
    _instant(now, "now")
    claims = _open(document, presented_by.agent_id, trusted, issuer, now)
    return check_claims(
        claims, presented_by=presented_by, for_call=for_call, now=now, revoked=revoked, spent=spent
    )


def check_claims(
    claims: Claims,
    *,
    presented_by: Binding,
    for_call: ToolCall,
    now: str,
    revoked: Collection[str] = (),
    spent: Mapping[str, Decimal | int] | None = None,
) -> Claims:
    """:func:`check` of claims already opened (the signature is not looked at again): the
    agent runtime's local check of the token its gateway handed it."""
    if claims.binding.agent_id != presented_by.agent_id:
        raise _refuse(ErrorCode.AUTH_FORBIDDEN, "binding", "agent")
    if claims.token_id in revoked:
        raise _refuse(ErrorCode.AUTH_FORBIDDEN, "revocation", "revoked")
    _check_expiry(claims, _instant(now, "now"))
    _check_binding(claims.binding, presented_by)
    _check_call(claims.grant, for_call)
    _check_spend(claims.grant.limits, for_call.spend, spent or {})
    _check_currency(claims.grant, for_call)
    return claims


def _open(
    document: Mapping[str, Any],
    agent_id: str,
    trusted: TrustedKey | RegistryEvidence,
    issuer: str,
    now: str,
) -> Claims:
    key = trusted if isinstance(trusted, TrustedKey) else _registry_key(document, trusted, issuer)
    try:
        open_sealed(
            document,
            key,
            message_type=TOKEN_TYPE,
            recipient=agent_id,
            senders=frozenset({issuer}),
        )
    except MessageRefusedError as refused:
        raise _opening_refusal(refused.reason) from None
    claims = _claims(document)
    if isinstance(trusted, RegistryEvidence):
        validity = trusted.resolve(key.key_id).validity()
        moments = (parse_timestamp(claims.issued_at), parse_timestamp(now))
        if not all(validity.contains(moment) for moment in moments):
            raise _refuse(ErrorCode.AUTH_INVALID_SIGNATURE, "issuer", "key-interval")
    return claims


def _opening_refusal(reason: str) -> MwpError:
    if reason == "wrong-recipient":
        return _refuse(ErrorCode.AUTH_FORBIDDEN, "binding", "agent")
    if reason in ("untrusted-key", "wrong-sender"):
        return _refuse(ErrorCode.AUTH_INVALID_SIGNATURE, "issuer", reason)
    return _refuse(ErrorCode.AUTH_INVALID_SIGNATURE, "signature", reason)


def _registry_key(
    document: Mapping[str, Any], evidence: RegistryEvidence, issuer: str
) -> TrustedKey:
    envelope = document.get("signature") if isinstance(document, Mapping) else None
    key_id = envelope.get("keyId") if isinstance(envelope, Mapping) else None
    if not isinstance(key_id, str):
        raise _refuse(ErrorCode.AUTH_INVALID_SIGNATURE, "signature", "bad-signature-envelope")
    try:
        binding = evidence.resolve(key_id)
    except RegistryEvidenceError as exc:
        raise _refuse(ErrorCode.AUTH_INVALID_SIGNATURE, "issuer", exc.reason) from None
    if binding.principal != Principal("service", issuer):
        raise _refuse(ErrorCode.AUTH_INVALID_SIGNATURE, "issuer", "not-the-issuer")
    return TrustedKey(binding.key_id, binding.public_key)


def _check_expiry(claims: Claims, now: Instant) -> None:
    expires = _instant(claims.expires_at, "expires-at")
    # An authentic token past its lease is an issuer's fault; it is refused all the same.
    if _instant(claims.lease_expires_at, "lease-expires-at") < expires:
        raise _refuse(ErrorCode.AUTH_FORBIDDEN, "expiry", "past-lease")
    if not now < expires:
        raise _refuse(ErrorCode.AUTH_FORBIDDEN, "expiry", "expired")


_BINDING_CHECKS: Final = (
    ("group_id", ErrorCode.AUTH_FORBIDDEN, "group"),
    ("mission_id", ErrorCode.AUTH_FORBIDDEN, "mission"),
    ("work_item_id", ErrorCode.AUTH_FORBIDDEN, "work-item"),
    ("session_epoch", ErrorCode.AUTH_STALE_SESSION, "session-epoch"),
    ("ownership_epoch", ErrorCode.WORK_STALE_OWNERSHIP, "ownership-epoch"),
    ("lease_id", ErrorCode.WORK_LEASE_EXPIRED, "lease"),
)


def _check_binding(bound: Binding, current: Binding) -> None:
    """Each binding but the agent, which opening checks (the token is sealed for it)."""
    for member, code, name in _BINDING_CHECKS:
        if getattr(bound, member) != getattr(current, member):
            raise _refuse(code, "binding", name)


def _check_call(grant: Grant, call: ToolCall) -> None:
    if call.tool not in grant.tools:
        raise _refuse(ErrorCode.AUTH_FORBIDDEN, "grant", "tool")
    if call.operation not in grant.operations:
        raise _refuse(ErrorCode.AUTH_FORBIDDEN, "grant", "operation")
    if not call.resources <= grant.resources:
        raise _refuse(ErrorCode.AUTH_FORBIDDEN, "grant", "resource")
    if not call.data <= grant.data:
        raise _refuse(ErrorCode.AUTH_FORBIDDEN, "grant", "data")


def _check_spend(
    limits: Mapping[str, Decimal],
    spend: Mapping[str, Decimal | int],
    spent: Mapping[str, Decimal | int],
) -> None:
    for dimension, value in spend.items():
        if dimension not in DIMENSIONS:
            raise _refuse(ErrorCode.INVALID_COMMAND, "call", "unknown-dimension")
        declared = _amount(value, "spend")
        if declared < 0:
            raise _refuse(ErrorCode.INVALID_COMMAND, "call", "negative-spend")
        if dimension not in limits:
            continue
        already = _amount(spent.get(dimension, 0), "spent")
        if already + declared > limits[dimension]:
            raise _refuse(ErrorCode.BUDGET_EXCEEDED, "limit", dimension)


def _check_currency(grant: Grant, call: ToolCall) -> None:
    """A financial spend is in the currency of the token's financial limit: amounts in
    another currency cannot be compared with it (nor charged to the ledger)."""
    if FINANCIAL not in call.spend or grant.currency is None:
        return
    if call.currency != grant.currency:
        raise _refuse(ErrorCode.INVALID_COMMAND, "limit", "currency")


# --- the token's body ----------------------------------------------------------------------------


def _claims(document: Mapping[str, Any]) -> Claims:
    """The claims of a document already opened (or issued here): its shape, strictly."""
    body = document.get("body")
    if not isinstance(body, Mapping) or set(body) != _BODY:
        raise _refuse(ErrorCode.SCHEMA_VALIDATION_FAILED, "token", "body-members")
    try:
        binding = Binding(
            _text(document["to"]),
            _epoch(body["sessionEpoch"]),
            _text(body["missionId"]),
            _text(body["groupId"]),
            _text(body["workItemId"]),
            _epoch(body["ownershipEpoch"]),
            _text(body["leaseId"]),
        )
        grant = Grant(
            tools=frozenset(_texts(body["tools"])),
            resources=frozenset(_texts(body["resources"])),
            data=frozenset(_texts(body["data"])),
            operations=frozenset(_texts(body["operations"])),
            limits=_limits(body["limits"]),
            currency=body["limits"].get("currency"),
        )
        return Claims(
            _text(body["tokenId"]),
            _text(document["from"]),
            binding,
            grant,
            _text(document["sentAt"]),
            _text(body["expiresAt"]),
            _text(body["leaseExpiresAt"]),
        )
    except (TypeError, ValueError, AttributeError):
        raise _refuse(ErrorCode.SCHEMA_VALIDATION_FAILED, "token", "body-shape") from None


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError("not a non-empty string")
    return value


def _texts(value: Any) -> list[str]:
    if not isinstance(value, list):
        raise ValueError("not a list")
    return [_text(v) for v in value]


def _epoch(value: Any) -> int:
    if type(value) is not int or value < 1:
        raise ValueError("not a positive integer")
    return value


def _limits(value: Any) -> dict[str, Decimal]:
    if not isinstance(value, Mapping) or not set(value) <= {*DIMENSIONS, "currency"}:
        raise ValueError("not a limits object")
    return {d: _amount(value[d], "limit") for d in DIMENSIONS if d in value}


def _limits_json(limits: Mapping[str, Decimal], currency: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {d: _number(v) for d, v in limits.items()}
    return {"currency": currency, **doc} if currency is not None else doc


def _number(value: Decimal) -> int | float:
    return int(value) if value == value.to_integral_value() else float(value)


def _amount(value: Any, what: str) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        raise _refuse(ErrorCode.INVALID_COMMAND, what, "not-a-number")
    try:
        result = Decimal(str(value))
    except InvalidOperation:
        raise _refuse(ErrorCode.INVALID_COMMAND, what, "not-a-number") from None
    if not result.is_finite():
        raise _refuse(ErrorCode.INVALID_COMMAND, what, "not-a-number")
    return result


def _instant(text: Any, what: str) -> Instant:
    try:
        return parse_timestamp(text).instant
    except (TypeError, ValueRuleError):
        raise _refuse(ErrorCode.INVALID_COMMAND, what, "timestamp") from None


# --- secrets in durable objects ------------------------------------------------------------------


def contains_token(value: object, tokens: Iterable[CapabilityToken | str]) -> bool:
    """Whether ``value`` (any JSON value) holds a token's ID or signature anywhere: as a
    member name, a string or inside a longer string. A ``str`` names a token ID to look for."""
    return next(token_paths(value, tokens), None) is not None


def token_paths(value: object, tokens: Iterable[CapabilityToken | str]) -> Iterator[str]:
    """The JSON Pointer of each place in ``value`` that holds a token's ID or signature."""
    secrets = _secrets(tokens)
    if secrets:
        yield from _scan(value, "", secrets)


def _secrets(tokens: Iterable[CapabilityToken | str]) -> tuple[str, ...]:
    found: list[str] = []
    for token in tokens:
        found.extend((token,) if isinstance(token, str) else (token.token_id, token.signature))
    return tuple(s for s in found if s)


def _scan(value: object, path: str, secrets: tuple[str, ...]) -> Iterator[str]:
    if isinstance(value, str):
        if any(secret in value for secret in secrets):
            yield path
    elif isinstance(value, Mapping):
        for key, member in value.items():
            here = f"{path}/{str(key).replace('~', '~0').replace('/', '~1')}"
            if any(secret in str(key) for secret in secrets):
                yield here
            yield from _scan(member, here, secrets)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from _scan(item, f"{path}/{index}", secrets)
