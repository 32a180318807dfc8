"""The pure tool-call pieces: the agent's task queue name and a call's idempotency key."""

from __future__ import annotations

import pytest

from mwp.contracts.agent import AGENT_TASK_QUEUE_PREFIX, ToolCall, agent_task_queue
from mwp.core.idempotency import tool_key

MISSION = "urn:mwp:mission:m"
ITEM = "urn:mwp:work-item:w"


def test_an_agent_task_queue_is_the_agent_id_under_the_prefix() -> None:
    assert agent_task_queue("urn:mwp:agent:writer") == "mwp-agent/urn:mwp:agent:writer"
    assert agent_task_queue("urn:mwp:agent:writer") == agent_task_queue("urn:mwp:agent:writer")


def test_unsafe_or_long_agent_ids_get_distinct_bounded_queue_names() -> None:
    spaced, underscored = agent_task_queue("urn:x:a b"), agent_task_queue("urn:x:a_b")
    assert " " not in spaced and spaced != underscored
    long_a, long_b = agent_task_queue("urn:x:" + "a" * 500), agent_task_queue("urn:x:" + "a" * 501)
    assert long_a != long_b and len(long_a) <= 200 and long_a.startswith(AGENT_TASK_QUEUE_PREFIX)
    with pytest.raises(ValueError):
        agent_task_queue("")


def test_a_calls_key_is_the_tool_key_of_its_four_values_and_nothing_else() -> None:
    call = ToolCall(MISSION, ITEM, 3, "search:q1", "search", ["a"], {"limit": 2})
    assert call.key() == tool_key(MISSION, ITEM, 3, "search:q1")
    other_tool = ToolCall(MISSION, ITEM, 3, "search:q1", "fetch", ["b"])
    assert other_tool.key() == call.key()  # the tool and its arguments are not in the key
    assert ToolCall(MISSION, ITEM, 4, "search:q1", "search").key() != call.key()
    with pytest.raises(ValueError):
        ToolCall(MISSION, ITEM, 0, "search:q1", "search").key()
