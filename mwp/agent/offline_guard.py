"""One leased run's side of losing its Group (spec 11.5; MWP-WRK-020).

The hazard: a run whose gateway connection drops still holds a lease the Group has not
revoked yet, and a capability that keeps calling tools as if online could make an external
effect nobody authorized or charged. :class:`OfflineGuard` is what the run consults instead.
It knows the run went offline (the first :class:`~mwp.agent.offline.Disconnected`, or as soon
as the runtime says the Group is unreachable), until when it may go on (its
:class:`~mwp.agent.offline.OfflineRun`'s grace deadline), when it must stop (past that
deadline, or once the runtime reconnected under a newer Session, which revoked the lease),
which tools may still run (only those declared reversible) and where a checkpoint goes (the
runtime's :class:`~mwp.agent.offline.OfflineSupport`, bound to the lease). A run with no
support (the operators' direct mode) cannot go offline: the lost Group is raised as before.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from mwp.agent.actions import INLINE_TOOL
from mwp.agent.declaration import Agent
from mwp.agent.offline import Disconnected, OfflineRun, OfflineSupport, buffer_checkpoint
from mwp.contracts.agent import ExecutionOrder
from mwp.core.errors import ErrorCode, MwpError
from mwp.core.group.clock import reached
from mwp.core.group.offline_execution import SIDE_EFFECTS

CLAUSES: tuple[str, ...] = ("MWP-WRK-020",)

log = logging.getLogger(__name__)


class OfflineGuard:
    """Whether one run is offline, and what it may still do (see the module docstring)."""

    def __init__(self, support: OfflineSupport | None, agent: Agent, order: ExecutionOrder) -> None:
        self.support = support
        self.agent = agent
        self.order = order
        self.run: OfflineRun | None = None  # set once the run lost the Group
        self.buffered = 0  # checkpoints buffered

    def lose(self, lost: Disconnected, lease_id: str | None, expires_at: str | None) -> None:
        """Go on offline (once) under the lease held; with no support or no lease, ``lost``
        is raised."""
        if self.run is not None:
            return
        if self.support is None or lease_id is None or expires_at is None:
            raise lost
        o = self.order
        self.run = OfflineRun(
            o.agent_id,
            o.group_id,
            o.work_item_id,
            o.session_epoch,
            o.ownership_epoch,
            lease_id,
            expires_at,
            disconnected_at=self.support.disconnected_at(),
            grace_seconds=self.support.grace_seconds,
        )
        log.warning(
            "%s lost its Group (%s): going on offline until %s",
            o.work_item_id,
            lost.message,
            self.run.grace_deadline,
        )

    def notice(self, lease_id: str | None, expires_at: str | None) -> None:
        """Go offline as soon as the runtime knows the Group is unreachable, before the next
        Command fails: a tool call must not run as if online meanwhile."""
        if self.run is None and self.support is not None and not self.support.reachable():
            self.lose(Disconnected("the runtime lost its gateway"), lease_id, expires_at)

    def over(self, now: str) -> MwpError | None:
        """Why an offline run must stop at ``now`` (None: it may go on)."""
        if self.run is None or self.support is None:
            return None
        if reached(now, self.run.grace_deadline):
            why = f"offline past the grace deadline {self.run.grace_deadline}"
        elif self.support.ended(self.run.session_epoch):
            why = "the runtime reconnected under a newer Session, which revoked this lease"
        else:
            return None
        return MwpError(ErrorCode.WORK_LEASE_EXPIRED, why)

    def require_reversible(self, fn: Callable[..., Awaitable[Any]] | str) -> None:
        """Offline, only a tool declared reversible runs; any other is ``AUTH_FORBIDDEN``."""
        spec = self.agent.tools.get(fn) if isinstance(fn, str) else None
        if spec is None or not spec.reversible:
            name = fn if isinstance(fn, str) else INLINE_TOOL
            raise MwpError(
                ErrorCode.AUTH_FORBIDDEN,
                f"tool {name!r} is not declared reversible: it waits for the Group",
            )

    def buffer(
        self,
        progress: Mapping[str, Any],
        state: Any,
        *,
        latest_ref: str | None,
        due: Mapping[str, Any],
    ) -> tuple[str | None, dict[str, Any]]:
        """Buffer a checkpoint carrying the usage ``due``: the reference it names and the
        delta it carries. A side effect is the one usage no offline checkpoint may carry (the
        Group refuses it): it is left out, to be recorded online."""
        assert self.run is not None and self.support is not None
        delta = {d: v for d, v in due.items() if d != SIDE_EFFECTS}
        ref = buffer_checkpoint(
            self.run,
            self.support,
            self.agent.identity,
            progress,
            state=state,
            latest_ref=latest_ref,
            delta=delta,
        )
        self.buffered += 1
        return ref, delta

    def detail(self) -> dict[str, Any]:
        """What an outcome says of the run's time offline."""
        assert self.run is not None
        return {"buffered": self.buffered, "graceDeadline": self.run.grace_deadline}
