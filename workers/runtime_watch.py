"""What an agent's runtime tells its operator beyond its runs: the offers its Scheduler declined,
and that another runtime took its identity over.

    writer: declined work item ab12cd34 of group 5e6f7a8b: capability: the offer pins Agent
        Card v1; this runtime serves v2 (offer it again at v2)
    writer: Session Epoch 4 was replaced by epoch 5 (another runtime of this agent started);
        stopping

A decline happens inside the AgentWorkflow, where nothing may print; the runtime reads the
Scheduler's bounded ``status`` instead and prints each decision once. A runtime whose Session
was superseded is fenced at every Command it sends (MWP-IDN-008): it stops, saying why, rather
than serving on and failing each run with ``AUTH_STALE_SESSION``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from mwp.contracts.agent import QUERY_STATUS, agent_workflow_id
from mwp.workers.run_lines import agent_name, short

CLAUSES: tuple[str, ...] = ("MWP-IDN-003", "MWP-IDN-008")

POLL_SECONDS = 2.0


class _Registry(Protocol):
    async def session_epochs(self) -> dict[str, int]: ...


class _Temporal(Protocol):
    def get_workflow_handle(self, workflow_id: str) -> Any: ...


def decline_line(name: str, decision: Mapping[str, Any]) -> str:
    """The line for one declined offer (a ``status`` decision record)."""
    subject = (
        f"{name}: declined work item {short(decision['workItemId'])} "
        f"of group {short(decision['groupId'])}"
    )
    details = decision.get("details") or {}
    if "offered" in details and "cardVersion" in details:
        why = (
            f"the offer pins Agent Card v{details['offered']}; this runtime serves "
            f"v{details['cardVersion']} (offer it again at v{details['cardVersion']})"
        )
    else:
        why = json.dumps(details, sort_keys=True, separators=(",", ":")) if details else ""
    return f"{subject}: {decision.get('reason')}{': ' + why if why else ''}"[:400]


def replaced_line(name: str, epoch: int, current: int) -> str:
    return (
        f"{name}: Session Epoch {epoch} was replaced by epoch {current} "
        "(another runtime of this agent started); stopping"
    )


class RuntimeWatch:
    """Polls the Scheduler's status and the Registry's Session Epochs until ``stop`` is set;
    sets it itself when this runtime's Session is superseded (``replaced_by`` says by which).
    Without a ``registry`` (through the gateway, which tells the runtime itself when it is
    fenced) it reports the Scheduler's declines only."""

    def __init__(
        self,
        temporal: _Temporal,
        registry: _Registry | None,
        agent_id: str,
        session_epoch: int,
        report: Callable[[str], None],
        *,
        interval: float = POLL_SECONDS,
    ) -> None:
        self.handle = temporal.get_workflow_handle(agent_workflow_id(agent_id))
        self.registry = registry
        self.agent_id = agent_id
        self.session_epoch = session_epoch
        self.report = report
        self.interval = interval
        self.replaced_by: int | None = None
        self._seen: set[tuple[str, str, str]] = set()
        self._since = datetime.now(UTC)  # declines from before this runtime are not news

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            with contextlib.suppress(Exception):  # a server hiccup: look again next time
                await self._look(stop)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.interval)

    async def _look(self, stop: asyncio.Event) -> None:
        current = 0
        if self.registry is not None:
            current = (await self.registry.session_epochs()).get(self.agent_id, 0)
        if current > self.session_epoch:
            self.replaced_by = current
            self.report(replaced_line(agent_name(self.agent_id), self.session_epoch, current))
            stop.set()
            return
        status: dict[str, Any] = await self.handle.query(QUERY_STATUS)
        self._report_declines(status.get("decisions", []))

    def _report_declines(self, decisions: list[dict[str, Any]]) -> None:
        name = agent_name(self.agent_id)
        for decision in decisions:
            if decision.get("decision") != "declined":
                continue
            key = (decision["groupId"], decision["workItemId"], decision.get("decidedAt", ""))
            if key in self._seen:
                continue
            self._seen.add(key)
            if _instant(decision.get("decidedAt")) >= self._since:
                self.report(decline_line(name, decision))


def _instant(text: Any) -> datetime:
    try:
        return datetime.fromisoformat(str(text))
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)
