"""One enumeration (``mwp.core.kinds``): the Authority's tables cover it exactly, its states are
the bundle's, and the lists others use are derived from it."""

from __future__ import annotations

import json
from pathlib import Path

from mwp.core.group import COORDINATOR_KINDS
from mwp.core.group.kinds import EVOLVERS, RULES
from mwp.core.group.rules import never
from mwp.core.kinds import (
    COMMAND_KINDS,
    COORDINATOR_ONLY_KINDS,
    CORE_COMMAND_KINDS,
    CORE_EVENT_KINDS,
    EVENT_KINDS,
    GROUP_CREATING_KINDS,
    MISSION_STATES,
    OFFERABLE_WORK_STATES,
    SETTLED_WORK_STATES,
    UNFINISHED_WORK_STATES,
    WORK_ITEM_STATES,
)
from mwp.core.models.common import is_extension_kind


def test_one_rule_per_command_kind_and_one_evolver_per_event_kind() -> None:
    assert sorted(RULES) == sorted(COMMAND_KINDS)
    assert sorted(EVOLVERS) == sorted(EVENT_KINDS)
    assert len(set(COMMAND_KINDS)) == len(COMMAND_KINDS)
    assert len(set(EVENT_KINDS)) == len(EVENT_KINDS)


def _state_enum(protocol_root: Path, schema: str) -> list[str]:
    document = json.loads((protocol_root / "schemas" / schema).read_text("utf-8"))
    states: list[str] = document["properties"]["state"]["enum"]
    return states


def test_the_states_are_the_bundle_schemas_states(protocol_root_path: Path) -> None:
    assert sorted(WORK_ITEM_STATES) == sorted(
        _state_enum(protocol_root_path, "work-item.schema.json")
    )
    assert sorted(MISSION_STATES) == sorted(_state_enum(protocol_root_path, "mission.schema.json"))


def test_the_subsets_are_subsets() -> None:
    assert UNFINISHED_WORK_STATES.isdisjoint(SETTLED_WORK_STATES)
    assert set(WORK_ITEM_STATES) == UNFINISHED_WORK_STATES | SETTLED_WORK_STATES
    assert "failed" in OFFERABLE_WORK_STATES and "submitted" not in OFFERABLE_WORK_STATES


def test_the_coordinator_kinds_are_read_from_the_rules_not_listed_by_hand() -> None:
    assert {k for k, r in RULES.items() if r.coordinator is not never} == COORDINATOR_KINDS
    assert {"work.authorize", "work.offer", "membership.grant_delegation"} <= COORDINATOR_KINDS
    assert not {"work.accept_offer", "message.post", "mission.create"} & COORDINATOR_KINDS


def test_the_runtime_decides_protocol_kinds_or_extensions_only() -> None:
    for kind in COMMAND_KINDS:
        assert kind in CORE_COMMAND_KINDS or is_extension_kind(kind), kind
    for kind in EVENT_KINDS:
        assert kind in CORE_EVENT_KINDS or is_extension_kind(kind), kind


def test_the_schemas_rules_on_kinds_agree_with_the_authoritys() -> None:
    assert COORDINATOR_ONLY_KINDS <= COORDINATOR_KINDS  # each one's rule exercises the lease
    assert {k for k, r in RULES.items() if r.creates_group} == GROUP_CREATING_KINDS
