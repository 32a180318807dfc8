"""``check_claims``: the agent runtime's local check of the token its gateway handed it. The
same refusals as ``check`` for every rule but the signature, which it does not look at."""

from __future__ import annotations

import dataclasses
from decimal import Decimal

import pytest

from mwp.core.errors import ErrorCode, MwpError
from mwp.core.trust.capability_token import ToolCall, check_claims
from tests.unit.test_capability_token import (
    BEFORE_END,
    BOUND,
    CALL,
    EXPIRES,
    ISSUED,
    token,
)


def refused(**changes: object) -> tuple[ErrorCode, str]:
    args: dict[str, object] = {
        "presented_by": BOUND,
        "for_call": CALL,
        "now": ISSUED,
        "revoked": (),
        "spent": None,
    }
    args.update(changes)
    with pytest.raises(MwpError) as caught:
        check_claims(token().claims, **args)  # type: ignore[arg-type]
    diagnostic = caught.value.diagnostic
    assert diagnostic is not None
    return caught.value.code, f"{diagnostic.stage}/{diagnostic.reason}"


def test_a_call_within_the_token_passes() -> None:
    claims = token().claims
    assert check_claims(claims, presented_by=BOUND, for_call=CALL, now=ISSUED) == claims


def test_each_rule_but_the_signature_refuses_as_check_does() -> None:
    assert refused(presented_by=dataclasses.replace(BOUND, agent_id="urn:x")) == (
        ErrorCode.AUTH_FORBIDDEN,
        "binding/agent",
    )
    assert refused(revoked={token().token_id}) == (ErrorCode.AUTH_FORBIDDEN, "revocation/revoked")
    assert refused(now=EXPIRES) == (ErrorCode.AUTH_FORBIDDEN, "expiry/expired")
    assert refused(now=BEFORE_END) == (ErrorCode.AUTH_FORBIDDEN, "expiry/expired")
    assert refused(presented_by=dataclasses.replace(BOUND, session_epoch=4)) == (
        ErrorCode.AUTH_STALE_SESSION,
        "binding/session-epoch",
    )
    assert refused(presented_by=dataclasses.replace(BOUND, lease_id="urn:x")) == (
        ErrorCode.WORK_LEASE_EXPIRED,
        "binding/lease",
    )
    assert refused(for_call=dataclasses.replace(CALL, tool="repo.delete")) == (
        ErrorCode.AUTH_FORBIDDEN,
        "grant/tool",
    )
    over = ToolCall("repo.read", "read", spend={"toolCallLimit": 2})
    assert refused(for_call=over, spent={"toolCallLimit": Decimal(9)}) == (
        ErrorCode.BUDGET_EXCEEDED,
        "limit/toolCallLimit",
    )


def test_a_financial_spend_is_in_the_tokens_currency() -> None:
    claims = token().claims
    assert claims.grant.currency == "USD"
    paid = dataclasses.replace(CALL, spend={"financialLimit": 1}, currency="USD")
    assert check_claims(claims, presented_by=BOUND, for_call=paid, now=ISSUED) == claims
    for currency in ("EUR", None):
        other = dataclasses.replace(paid, currency=currency)
        assert refused(for_call=other) == (ErrorCode.INVALID_COMMAND, "limit/currency")
    # Spending nothing financial needs no currency.
    calls = dataclasses.replace(CALL, spend={"toolCallLimit": 1})
    assert check_claims(claims, presented_by=BOUND, for_call=calls, now=ISSUED) == claims
