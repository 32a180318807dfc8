"""The Group Authority core: pure, deterministic protocol rules for one Mission Group.

No I/O, no clock, no randomness: the Temporal shell passes time and Session facts in an
:class:`AuthorityContext` and persists what :meth:`GroupAuthority.snapshot` returns.
"""

from mwp.core.group.api import (
    AuthorityContext,
    Envelope,
    Outcome,
    Receipt,
    TimerFired,
    TimerKind,
    TimerRequest,
)
from mwp.core.group.authority import SNAPSHOT_FORMAT, GroupAuthority, replay
from mwp.core.group.execution_lease import LEASE_RENEW_KIND, OWNERSHIP_EXPIRED_KIND
from mwp.core.group.kinds import COORDINATOR_KINDS
from mwp.core.group.views import MISSION_VIEW_EXTRAS, WORK_ITEM_VIEW_EXTRAS, schema_part
from mwp.core.kinds import COMMAND_KINDS as _COMMANDS
from mwp.core.kinds import EVENT_KINDS as _EVENTS

COMMAND_KINDS: frozenset[str] = frozenset(_COMMANDS)
EVENT_KINDS: frozenset[str] = frozenset(_EVENTS)

__all__ = [
    "COMMAND_KINDS",
    "COORDINATOR_KINDS",
    "EVENT_KINDS",
    "LEASE_RENEW_KIND",
    "MISSION_VIEW_EXTRAS",
    "OWNERSHIP_EXPIRED_KIND",
    "SNAPSHOT_FORMAT",
    "WORK_ITEM_VIEW_EXTRAS",
    "AuthorityContext",
    "Envelope",
    "GroupAuthority",
    "Outcome",
    "Receipt",
    "TimerFired",
    "TimerKind",
    "TimerRequest",
    "replay",
    "schema_part",
]
