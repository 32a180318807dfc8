"""`mwp mission watch MISSION`: a Mission's state and WorkItems, updating as its Group changes.

    mwp mission watch MISSION [--once] [--interval SECONDS]

It polls the Group's ``sequence`` query (cheap) and re-reads the Mission view only when the
sequence moved, and each changed WorkItem's own view for its goal and last update. On a
terminal it redraws one table in place; piped (tests, logs) it prints one line per change
instead, so the output reads as a log. It ends, printing the final table, once the Mission is
approved, cancelled or failed (exit 0), or on Ctrl-C (exit 130).

Each line is the difference between two reads: a WorkItem that moved twice between them shows
its first and last state only (the Group's Event log has every step: `mwp log tail GROUP`).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from mwp.client.missions import MissionHandle

POLL_SECONDS = 0.5


def interruptible(handle: Callable[[argparse.Namespace], int]) -> Callable[..., int]:
    """Ctrl-C ends a watch as the user asked it to: status 130, no traceback."""

    def interrupted(args: argparse.Namespace) -> int:
        try:
            return handle(args)
        except KeyboardInterrupt:
            return 130

    return interrupted


# --- what is shown -------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One WorkItem as the table shows it (``revision``: when to re-read its view)."""

    work_item_id: str
    goal: str
    state: str
    owner: str | None
    updated: str
    revision: int


@dataclass(frozen=True)
class Snapshot:
    """One read of the Mission: its view's sequence, state, revision and WorkItems."""

    mission_id: str
    sequence: int
    state: str
    revision: int
    rows: tuple[Row, ...]

    @property
    def terminal(self) -> bool:
        from mwp.core.kinds import TERMINAL_MISSION_STATES

        return self.state in TERMINAL_MISSION_STATES


def short(identifier: str | None) -> str:
    """An ID as a person reads it: a principal without ``urn:mwp:``, else 8 characters of its
    last part (``urn:uuid:ab12…`` → ``ab12…``)."""
    if identifier is None:
        return "-"
    if identifier.startswith("urn:mwp:"):
        return identifier.removeprefix("urn:mwp:")
    return identifier.rsplit(":", 1)[-1][:8]


def changes(before: Snapshot | None, after: Snapshot) -> list[str]:
    """One line per Mission or WorkItem whose state or owner differs between two reads."""
    head = f"seq {after.sequence} ·"
    if before is None:
        lines = [
            f"{head} mission {short(after.mission_id)} {after.state} "
            f"(revision {after.revision}, {len(after.rows)} work items)"
        ]
        return lines + [f"{head} work item {_described(row)}" for row in after.rows]
    lines = []
    if before.state != after.state:
        lines.append(f"{head} mission {short(after.mission_id)} {before.state} → {after.state}")
    known = {row.work_item_id: row for row in before.rows}
    for row in after.rows:
        was = known.get(row.work_item_id)
        if was is None:
            lines.append(f"{head} work item {_described(row)}")
        elif (was.state, was.owner) != (row.state, row.owner):
            owner = f" (owner {short(row.owner)})" if row.owner else ""
            lines.append(
                f"{head} work item {short(row.work_item_id)} {was.state} → {row.state}{owner}"
            )
    return lines


def _described(row: Row) -> str:
    owner = f", owner {short(row.owner)}" if row.owner else ""
    return f"{short(row.work_item_id)} {row.state} ({row.goal!r}{owner})"


def table(snapshot: Snapshot) -> Table:
    from rich.table import Table

    title = (
        f"Mission {short(snapshot.mission_id)} · {snapshot.state} · "
        f"revision {snapshot.revision} · sequence {snapshot.sequence}"
    )
    grid = Table(title=title, title_justify="left")
    grid.add_column("WorkItem", no_wrap=True)
    grid.add_column("Goal", overflow="fold", ratio=1)  # the one column that gives way
    grid.add_column("State", no_wrap=True)
    grid.add_column("Owner", overflow="fold")
    grid.add_column("Updated", no_wrap=True)
    for row in snapshot.rows:
        grid.add_row(
            short(row.work_item_id), row.goal, row.state, short(row.owner), _clock(row.updated)
        )
    return grid


def _clock(timestamp: str) -> str:
    """``2026-12-01T12:03:04.5Z`` → ``12:03:04`` (UTC): the date rarely tells a watcher much."""
    return timestamp[11:19] if len(timestamp) >= 19 and timestamp[10] == "T" else timestamp


# --- reading -------------------------------------------------------------------------------


class Reader:
    """Reads Snapshots of one Mission, re-reading a WorkItem's view only when it changed."""

    def __init__(self, mission: MissionHandle) -> None:
        self.mission = mission
        self._rows: dict[str, Row] = {}

    async def read(self) -> Snapshot:
        view = await self.mission.view()
        rows = [await self._row(listed) for listed in view.get("workItems", [])]
        self._rows = {row.work_item_id: row for row in rows}
        return Snapshot(
            self.mission.mission_id, view["sequence"], view["state"], view["revision"], tuple(rows)
        )

    async def _row(self, listed: dict[str, Any]) -> Row:
        work_item_id, revision = listed["workItemId"], listed["revision"]
        known = self._rows.get(work_item_id)
        if known is not None and known.revision == revision:
            return known
        item = await self.mission.work_item(work_item_id)
        return Row(
            work_item_id,
            item.get("contract", {}).get("goal", ""),
            listed["state"],
            listed.get("owner"),
            item.get("updatedAt", ""),
            revision,
        )


async def follow(
    mission: MissionHandle, *, once: bool = False, interval: float = POLL_SECONDS, where: str = ""
) -> int:
    """Show ``mission`` until it ends (``once``: its current table only); the exit status."""
    from rich.console import Console

    from mwp.client import ClientError

    reader = Reader(mission)
    console = Console()
    try:
        snapshot = await reader.read()
    except ClientError:  # the server has no such Mission workflow
        raise ClientError(f"no Mission {mission.mission_id} on {where}") from None
    if once:
        console.print(table(snapshot))
        return 0
    if console.is_terminal:
        snapshot = await _live(reader, snapshot, console, interval)
    else:
        snapshot = await _lines(reader, snapshot, sys.stdout, interval)
    console.print(table(snapshot))
    return 0


async def _next(reader: Reader, snapshot: Snapshot, interval: float) -> Snapshot:
    """The next Snapshot that differs in sequence from ``snapshot`` (polled cheaply)."""
    while await reader.mission.sequence() == snapshot.sequence:
        await asyncio.sleep(interval)
    return await reader.read()


async def _lines(reader: Reader, snapshot: Snapshot, out: TextIO, interval: float) -> Snapshot:
    _print(out, changes(None, snapshot))
    while not snapshot.terminal:
        later = await _next(reader, snapshot, interval)
        _print(out, changes(snapshot, later))
        snapshot = later
    return snapshot


def _print(out: TextIO, lines: list[str]) -> None:
    for line in lines:
        print(line, file=out)
    out.flush()  # a reader at the other end of a pipe sees each change as it happens


async def _live(reader: Reader, snapshot: Snapshot, console: Console, interval: float) -> Snapshot:
    from rich.live import Live

    # transient: the final table is printed once after the Live region is gone.
    with Live(table(snapshot), console=console, auto_refresh=False, transient=True) as live:
        while not snapshot.terminal:
            snapshot = await _next(reader, snapshot, interval)
            live.update(table(snapshot), refresh=True)
    return snapshot
