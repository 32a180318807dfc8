"""The proof of concept, end to end (``mwp demo --proof-of-concept``): a fresh folder, the
scenes of `mwp.demo.scenes` on the processes of `mwp.demo.setup`, every process the demo
started stopped at the end, and the wall time and CPU it took in the report."""

from __future__ import annotations

import contextlib
import os
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from mwp.demo import cast, head_start, scenes
from mwp.demo.processes import STOP_SECONDS
from mwp.demo.report import Report
from mwp.demo.setup import ProofOfConcept


async def _keep_schedulers(poc: ProofOfConcept) -> None:
    """After a failure: each Worker's Scheduler status (its queues, declines, slots) in the
    logs folder, for whoever looks into why."""
    for name in cast.WORKERS:
        with contextlib.suppress(Exception):
            status = await poc.processes.run("agent", "status", cast.agent_id(name), "--json")
            (poc.processes.logs / f"{name}.status.json").write_text(status)


def _stop(poc: ProofOfConcept, report: Report) -> None:
    """Every process the demo started, and how long stopping them took (in the wall time)."""
    stopping = time.monotonic()
    killed = poc.processes.stop_all()
    report.facts["stopSeconds"] = round(time.monotonic() - stopping, 1)
    report.facts["killedAtStop"] = killed
    said = f"; killed after {STOP_SECONDS:.0f} s: {', '.join(killed)}" if killed else ""
    report.out(f"stopped the demo's processes in {report.facts['stopSeconds']} s{said}")


async def run_proof_of_concept(
    folder: Path, out: Callable[[str], None] = print, *, interactive: bool = False
) -> Report:
    """The demo in ``folder`` (emptied first); its wall time counts from the head start the
    command line took, if any (the stack then came up while the demo imported)."""
    report = Report(out)
    cpu = os.times()
    head = head_start.take(folder) or head_start.begin(folder)
    started = head.began
    poc = ProofOfConcept(head, report, interactive=interactive)
    try:
        await scenes.play(poc)
    except Exception as exc:  # the report says which step stopped, and why
        report.check("demo.completed", False, f"stopped: {type(exc).__name__}: {exc}"[:600])
        poc.processes.logs.mkdir(parents=True, exist_ok=True)
        (poc.processes.logs / "demo.traceback.txt").write_text(traceback.format_exc())
        await _keep_schedulers(poc)
    finally:
        _stop(poc, report)
        after = os.times()
        report.facts["wallSeconds"] = round(time.monotonic() - started, 1)
        report.facts["demoCpuSeconds"] = round(after.user - cpu.user + after.system - cpu.system, 1)
        report.facts["childCpuSeconds"] = round(
            after.children_user - cpu.children_user + after.children_system - cpu.children_system,
            1,
        )
        report.facts["logs"] = str(poc.processes.logs)
    return report
