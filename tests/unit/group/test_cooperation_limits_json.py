"""The JSON form of the Organization's cooperation limits: what a Mission's input carries."""

from __future__ import annotations

from typing import Any

import pytest

from mwp.core.group.cooperation_limits import (
    BUDGET_SOFT_PERCENT,
    MESSAGE_RATE,
    POLICY_NAMES,
    WORK_ITEM_DEPTH,
    CooperationLimits,
    CooperationLimitsError,
    Limit,
)


def test_the_defaults_and_set_limits_survive_their_json_form() -> None:
    defaults = CooperationLimits()
    assert set(defaults.to_json()) == POLICY_NAMES  # no budget share unless set
    assert CooperationLimits.from_json(defaults.to_json()) == defaults
    assert CooperationLimits.from_json({}) == defaults
    custom = CooperationLimits(
        message_rate=Limit(2, 3), work_item_depth=Limit(4, 4), budget_soft_percent=80
    )
    value = custom.to_json()
    assert value[MESSAGE_RATE] == {"soft": 2, "binding": 3}
    assert value[BUDGET_SOFT_PERCENT] == 80
    assert CooperationLimits.from_json(value) == custom


def test_a_limit_left_out_keeps_its_default() -> None:
    limits = CooperationLimits.from_json({WORK_ITEM_DEPTH: {"soft": 1, "binding": 2}})
    assert limits.work_item_depth == Limit(1, 2)
    assert limits.message_rate == CooperationLimits().message_rate
    assert limits.budget_soft_percent is None
    assert CooperationLimits.from_json({BUDGET_SOFT_PERCENT: None}).budget_soft_percent is None


@pytest.mark.parametrize(
    ("value", "member", "reason"),
    [
        ({"messageRat": {"soft": 1, "binding": 2}}, "messageRat", "not a cooperation limit"),
        ({"budget": {"soft": 1, "binding": 2}}, "budget", "not a cooperation limit"),
        ({MESSAGE_RATE: {"soft": 4, "binding": 3}}, MESSAGE_RATE, "binding limit (3)"),
        ({MESSAGE_RATE: {"soft": 0, "binding": 3}}, MESSAGE_RATE, "from 1"),
        ({MESSAGE_RATE: {"soft": 1}}, MESSAGE_RATE, "expected"),
        ({MESSAGE_RATE: {"soft": 1, "binding": 2, "hard": 3}}, MESSAGE_RATE, "expected"),
        ({MESSAGE_RATE: [1, 2]}, MESSAGE_RATE, "expected"),
        ({MESSAGE_RATE: {"soft": 1.5, "binding": 2}}, MESSAGE_RATE, "whole numbers"),
        ({MESSAGE_RATE: {"soft": True, "binding": 2}}, MESSAGE_RATE, "whole numbers"),
        ({MESSAGE_RATE: {"soft": "1", "binding": 2}}, MESSAGE_RATE, "whole numbers"),
        ({BUDGET_SOFT_PERCENT: 0}, BUDGET_SOFT_PERCENT, "percentage"),
        ({BUDGET_SOFT_PERCENT: 101}, BUDGET_SOFT_PERCENT, "percentage"),
        ({BUDGET_SOFT_PERCENT: "80"}, BUDGET_SOFT_PERCENT, "percentage"),
        ([], "(document)", "JSON object"),
    ],
)
def test_invalid_limits_are_refused_naming_the_member(value: Any, member: str, reason: str) -> None:
    with pytest.raises(CooperationLimitsError) as refused:
        CooperationLimits.from_json(value)
    assert refused.value.member == member
    assert reason in str(refused.value) and member in str(refused.value)
    assert isinstance(refused.value, ValueError)
