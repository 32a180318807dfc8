"""``commandHash`` (issue 15, item 6): from rules ``RULES_ARCHIVE`` on, the Events a Command
causes carry its signing hash (the JCS bytes without the signature, spec 6.4), as the reference
implementation does; a Group deciding under older rules keeps the whole Command's hash. Either
way the Event log alone rebuilds receipts that recognize a retry."""

from __future__ import annotations

from dataclasses import replace

import pytest

from mwp.core.errors import ErrorCode, MwpError
from mwp.core.group import replay
from mwp.core.group.api import RULES_ARCHIVE, RULES_DOOR
from mwp.core.trust.signed_document import signing_hash
from mwp.core.wire.jcs import jcs_hash
from tests.unit.group.harness import OWNER, Harness, mission_harness

TEXT = {"content": [{"type": "text", "text": "Status."}]}


def _post(h: Harness, rules: int) -> tuple[dict[str, object], list[dict[str, object]]]:
    command = h.command(OWNER, "message.post", TEXT)
    outcome = h.authority.submit(h.envelope(command), replace(h.ctx(), rules=rules))
    h.events.extend(outcome.events)
    return command, list(outcome.events)


def test_under_the_archive_rules_events_carry_the_signing_hash() -> None:
    h = mission_harness()
    command, events = _post(h, RULES_ARCHIVE)
    assert signing_hash(command) != jcs_hash(command)
    assert [e["commandHash"] for e in events] == [signing_hash(command)]


def test_under_older_rules_events_keep_the_whole_command_hash() -> None:
    h = mission_harness()
    command, events = _post(h, RULES_DOOR)
    assert [e["commandHash"] for e in events] == [jcs_hash(command)]


@pytest.mark.parametrize("rules", [RULES_DOOR, RULES_ARCHIVE])
def test_receipts_rebuilt_from_the_log_recognize_a_retry_and_refuse_other_content(
    rules: int,
) -> None:
    h = mission_harness()
    command, events = _post(h, rules)
    rebuilt = replay(h.events)
    ctx = replace(h.ctx(), rules=rules)

    retry = rebuilt.submit(h.envelope(command), ctx)
    assert retry.duplicate and retry.receipt.last_sequence == events[-1]["sequence"]

    other = dict(command, payload={"content": [{"type": "text", "text": "Other."}]})
    with pytest.raises(MwpError) as refused:
        rebuilt.submit(h.envelope(other), ctx)
    assert refused.value.code is ErrorCode.ACTION_ID_COLLISION
