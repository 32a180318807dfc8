"""One :class:`CommandRule` per Command kind: its Authority-step hooks and its ``decide``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mwp.core.group.api import RULES_0_1_0, AuthorityContext
from mwp.core.group.drafts import Drafts
from mwp.core.group.incoming import Incoming
from mwp.core.group.payload import NO_MEMBERS, Members
from mwp.core.group.roles import Authorize
from mwp.core.group.state import GroupState
from mwp.core.kinds import CommandKind

Decide = Callable[[GroupState, Incoming, AuthorityContext, Drafts], None]
# The target aggregate's name and current revision for ``expectedRevision`` (step 6), or None
# when the kind compares revisions itself or its target does not exist yet.
Target = Callable[[GroupState, Incoming], tuple[str, int] | None]
# Whether this Command exercises the Coordinator lease (step 5).
Exercises = Callable[[GroupState, Incoming], bool]


def never(state: GroupState, cmd: Incoming) -> bool:
    return False


def by_agent(state: GroupState, cmd: Incoming) -> bool:
    return cmd.is_agent


def mission_target(state: GroupState, cmd: Incoming) -> tuple[str, int] | None:
    return ("Mission", state.mission.revision) if state.mission else None


def work_item_target(state: GroupState, cmd: Incoming) -> tuple[str, int] | None:
    item = state.item_record(cmd.work_item_id or "")
    return ("WorkItem", item.revision) if item else None


def no_target(state: GroupState, cmd: Incoming) -> tuple[str, int] | None:
    return None


@dataclass(frozen=True, slots=True)
class CommandRule:
    kind: CommandKind
    decide: Decide
    authorize: Authorize
    target: Target = mission_target
    coordinator: Exercises = never
    # Provisional Members (a Worker holding an offer) may issue this kind.
    provisional_ok: bool = False
    # The kind brings the Group into existence: no Membership, Session or Coordinator yet.
    creates_group: bool = False
    # The payload members the kind defines (docs/commands.md); the door refuses any other.
    payload: Members = NO_MEMBERS
    # The MWP 0.1 clause IDs this kind's own hooks and ``decide`` implement. The Authority steps
    # every kind passes name theirs in a module-level ``CLAUSES`` (decision.py and the modules
    # it calls); docs/conformance.md maps both to their tests.
    clauses: tuple[str, ...] = ()
    # The first rules revision that knows the kind: a Group deciding under older rules refuses
    # it exactly as it refused every kind it did not know (``decision.py``).
    since_rules: int = RULES_0_1_0
