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
from mwp.core.group.kinds import EVOLVERS, RULES
from mwp.core.group.views import MISSION_VIEW_EXTRAS, WORK_ITEM_VIEW_EXTRAS, schema_part

COMMAND_KINDS: frozenset[str] = frozenset(RULES)
EVENT_KINDS: frozenset[str] = frozenset(EVOLVERS)

__all__ = [
    "COMMAND_KINDS",
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
