"""The Coordinator runtime's projection of a Group: the pure Group Authority following the
signed log the gateway delivers (GroupAuthority.follow), in order, once per Event."""

from __future__ import annotations

from typing import Any, cast

from mwp.agent import CardInfo
from mwp.client import Identity
from mwp.coordinator import Coordinator
from mwp.coordinator.journal import PlanJournal
from mwp.coordinator.runtime import CoordinatorRuntime
from mwp.core.trust.registry import Principal
from tests.unit.coordinator.test_runtime_steps import in_process
from tests.unit.group.harness import W1, mission_harness


def runtime(lines: list[str], tmp: Any) -> CoordinatorRuntime:
    agent_id = "urn:mwp:agent:planner"
    coordinator = Coordinator(
        agent_id,
        Identity.generate(Principal("agent", agent_id)),
        card=CardInfo("urn:mwp:organization:acme", Principal("human", "urn:mwp:human:ada"), "P"),
    )
    return CoordinatorRuntime(
        coordinator,
        cast(Any, None),
        PlanJournal(tmp),
        report=lines.append,
        decisions=in_process(coordinator),
    )


def test_the_projection_follows_the_log_to_the_authoritys_own_views(tmp_path: Any) -> None:
    h = mission_harness()
    h.authorize("a")
    h.offer("a", W1)
    lines: list[str] = []
    rt = runtime(lines, tmp_path)

    for event in [*h.events, *h.events[:3]]:  # a redelivery changes nothing
        rt.follow(event)

    (group,) = rt.groups.values()
    assert group.authority.sequence == h.authority.sequence
    assert group.authority.mission_view() == h.authority.mission_view()
    assert group.items() == {i: h.authority.work_item_view(i) for i in h.authority.work_item_ids()}
    assert lines == []


def test_a_group_visible_only_from_later_on_is_left_and_said_so(tmp_path: Any) -> None:
    h = mission_harness()
    lines: list[str] = []
    rt = runtime(lines, tmp_path)

    for event in h.events[2:]:
        rt.follow(event)

    (group,) = rt.groups.values()
    assert group.left and group.authority.sequence == 0
    assert len(lines) == 1 and "visible only from sequence 3" in lines[0]
