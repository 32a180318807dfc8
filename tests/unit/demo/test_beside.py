"""Scenes run beside the demo's main line: their checks join the report where the main line
waits for them, whichever finished first, and a scene that fails stops the demo with its own
error."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from mwp.demo.beside import Beside
from mwp.demo.head_start import PORTS, HeadStart, environment
from mwp.demo.processes import DemoProcess, Processes
from mwp.demo.report import Report
from mwp.demo.setup import DemoStoppedError, ProofOfConcept


def _poc(tmp_path: Path) -> ProofOfConcept:
    """A demo on paper: no process is started."""
    ports = {name: 0 for name in PORTS}
    processes = Processes(tmp_path, tmp_path / "logs", environment(ports))
    dev = DemoProcess("dev", ("dev",), processes.env, tmp_path, tmp_path / "dev.log", True)
    head = HeadStart(tmp_path, ports, processes, dev, began=0.0)
    return ProofOfConcept(head, Report(lambda _: None))


async def _checks(poc: ProofOfConcept, *names: str, after: float = 0.0) -> int:
    await asyncio.sleep(after)
    for name in names:
        poc.report.check(name, True, name)
    return len(names)


def _names(poc: ProofOfConcept) -> list[str]:
    return [c.name for c in poc.report.checks]


@pytest.mark.parametrize(("scene_takes", "line_takes"), [(0.05, 0.0), (0.0, 0.05)])
async def test_checks_join_where_the_scene_is_awaited_whichever_finished_first(
    tmp_path: Path, scene_takes: float, line_takes: float
) -> None:
    poc = _poc(tmp_path)
    async with Beside(poc) as beside:
        isolated = beside.start(
            lambda p: _checks(p, "isolation.a", "isolation.b", after=scene_takes)
        )
        await _checks(poc, "console.approval", after=line_takes)
        assert await isolated.done() == 2
        await _checks(poc, "human.approves_revision")
    assert _names(poc) == [
        "console.approval",
        "isolation.a",
        "isolation.b",
        "human.approves_revision",
    ]


async def test_a_failing_scene_stops_the_main_line_with_its_own_error(tmp_path: Path) -> None:
    poc = _poc(tmp_path)

    async def fails(p: ProofOfConcept) -> None:
        p.report.check("archival.signed_snapshot", True, "archived")
        raise DemoStoppedError("timed out waiting for the archive")

    waited = False
    with pytest.raises(DemoStoppedError, match="archive"):
        async with Beside(poc) as beside:
            beside.start(fails)
            await asyncio.sleep(5)  # cancelled when the scene fails
            waited = True
    assert not waited
    # What the failed scene proved before it stopped is in the report.
    assert _names(poc) == ["archival.signed_snapshot"]


async def test_a_failing_main_line_ends_the_scenes_beside_it(tmp_path: Path) -> None:
    poc = _poc(tmp_path)
    ended = asyncio.Event()

    async def waits(_: ProofOfConcept) -> None:
        try:
            await asyncio.sleep(5)
        finally:
            ended.set()

    with pytest.raises(DemoStoppedError, match="revision"):
        async with Beside(poc) as beside:
            beside.start(waits)
            await asyncio.sleep(0)
            raise DemoStoppedError("timed out waiting for the revision")
    assert ended.is_set()
