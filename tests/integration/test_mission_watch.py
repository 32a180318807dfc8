"""Live progress on the session's dev server: `mwp mission watch` as a real process, piped, prints
one line per change of a WorkItem and of the Mission and ends when the Mission is approved; the
agent worker process prints one line per run."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from mwp.client import KeyStore, MwpClient
from mwp.dev.stack import BackgroundStack
from mwp.workers.run_lines import short
from tests.integration import runtime_agent
from tests.integration.missions_helper import MissionRig, admit_workers, event_of, new_mission
from tests.integration.test_agent_runtime import agent_process, effects, wait_for_state

__all__ = ["effects"]  # the fixture, shared with test_agent_runtime

LINE_TIMEOUT = 30  # seconds for one expected line: generous, never asserted as a duration


class Watch:
    """A running `mwp mission watch` process and the lines it printed so far."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.lines: list[str] = []

    async def expect(self, text: str) -> str:
        """Read lines until one contains ``text``; that line."""
        assert self.process.stdout is not None
        while True:
            raw = await asyncio.wait_for(self.process.stdout.readline(), LINE_TIMEOUT)
            if not raw:
                raise AssertionError(f"watch ended before {text!r}: {self.lines}")
            self.lines.append(raw.decode().rstrip("\n"))
            if text in self.lines[-1]:
                return self.lines[-1]

    async def finish(self) -> tuple[int, str, str]:
        """Exit status, the rest of stdout, and stderr once the process ends."""
        out, err = await asyncio.wait_for(self.process.communicate(), LINE_TIMEOUT)
        return self.process.returncode or 0, out.decode(), err.decode()


async def mwp(stack: BackgroundStack, state: Path, *argv: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "mwp", *argv, "--address", stack.address, "--state-dir", str(state),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


@asynccontextmanager
async def watching(rig: MissionRig, stack: BackgroundStack, tmp_path: Path) -> AsyncIterator[Watch]:
    """`mwp mission watch` of ``rig``'s Mission, named by a prefix as `mwp mission create`
    remembered it; killed on leaving if still up."""
    state = tmp_path / ".mwp"
    state.mkdir(exist_ok=True)
    remembered = {rig.mission.mission_id: rig.mission.group_id}
    (state / "missions.json").write_text(json.dumps(remembered))
    prefix = rig.mission.mission_id[:20]
    watch = Watch(await mwp(stack, state, "mission", "watch", prefix, "--interval", "0.1"))
    try:
        yield watch
    finally:
        if watch.process.returncode is None:
            watch.process.kill()
            await watch.process.wait()


async def test_watch_shows_each_transition_in_order_and_ends_when_the_mission_is_approved(
    mwp_client: MwpClient, temporal_stack: BackgroundStack, tmp_path: Path
) -> None:
    rig = await new_mission(mwp_client)
    await admit_workers(rig)
    worker = rig.crew.workers[0]
    item = await rig.authorize("Check the figures")
    mark = f"work item {short(item.work_item_id)}"
    async with watching(rig, temporal_stack, tmp_path) as watch:
        first = await watch.expect(mark)
        assert "open ('Check the figures')" in first
        # Each step waits for its line, so no two transitions fall between two polls.
        offers = await rig.offer(item, worker)
        await watch.expect(f"{mark} open → offered")
        epoch = await rig.accept(worker, item, offers["offers"][0]["offerId"])
        owner = worker.principal.id.removeprefix("urn:mwp:")
        await watch.expect(f"{mark} offered → queued (owner {owner})")
        lease = await rig.start(worker, item, epoch)
        await watch.expect(f"{mark} queued → active (owner {owner})")
        submitted = await rig.submit(worker, item, epoch, lease["leaseId"])
        await watch.expect(f"{mark} active → submitted")
        await rig.accept_result(item)
        await watch.expect(f"{mark} submitted → verified")
        hashes = event_of(submitted, "work.submitted")["payload"]["submission"]["artifactHashes"]
        result = await rig.coordinate("mission.submit_for_approval", {"artifactHashes": hashes})
        await watch.expect("mission")  # skips nothing: the next line is the Mission's
        assert watch.lines[-1].endswith("active → awaiting_approval"), watch.lines
        assert event_of(result, "mission.submitted_for_approval")["payload"]["missionRevision"]
        await rig.approve()
        await watch.expect("awaiting_approval → approved")
        code, rest, err = await watch.finish()
    assert code == 0, err
    assert "approved" in rest and "verified" in rest and "Check the figures" in rest  # the table
    expected = [
        f"{mark} open ('Check the figures')",
        f"{mark} open → offered",
        f"{mark} offered → queued",
        f"{mark} queued → active",
        f"{mark} active → submitted",
        f"{mark} submitted → verified",
        "active → awaiting_approval",
        "awaiting_approval → approved",
    ]
    assert len(watch.lines) == 1 + len(expected), watch.lines  # the Mission's line first
    for line, wanted in zip(watch.lines[1:], expected, strict=True):
        assert wanted in line, watch.lines
    sequences = [int(line.split()[1]) for line in watch.lines]
    assert sequences == sorted(sequences)

    once = await mwp(temporal_stack, tmp_path / ".mwp", "mission", "watch", rig.mission.mission_id,
                     "--once")  # fmt: skip
    out, err = await once.communicate()
    assert once.returncode == 0, err
    assert "approved" in out.decode() and short(item.work_item_id) in out.decode()


async def test_an_unknown_mission_is_one_line_and_ctrl_c_ends_a_watch_with_130(
    mwp_client: MwpClient, temporal_stack: BackgroundStack, tmp_path: Path
) -> None:
    state = tmp_path / ".mwp"
    for name in ("urn:uuid:00000000-0000-0000-0000-000000000000", "ab12"):
        process = await mwp(temporal_stack, state, "mission", "watch", name)
        out, err = await process.communicate()
        assert process.returncode == 1 and out == b""
        assert len(err.decode().splitlines()) == 1, err
        assert err.decode().startswith("mwp mission: ")
        assert ("no Mission urn:uuid:0000" if ":" in name else "no Missions match") in err.decode()

    rig = await new_mission(mwp_client)
    async with watching(rig, temporal_stack, tmp_path) as watch:
        await watch.expect("mission")
        watch.process.send_signal(signal.SIGINT)
        code, _, err = await watch.finish()
    assert code == 130 and "Traceback" not in err, err


async def test_the_agent_process_prints_one_line_per_run_as_its_outcome_is_known(
    mwp_client: MwpClient, temporal_stack: BackgroundStack, effects: Path, tmp_path: Path
) -> None:
    rig = await new_mission(mwp_client)
    item = await rig.authorize("Say how it went")
    async with agent_process(rig, temporal_stack, tmp_path, effects, lease_seconds=6) as process:
        agent = KeyStore(tmp_path / "agent-keys").load(runtime_agent.KEY_NAME)
        await rig.offer(item, agent)
        await wait_for_state(rig, item, "submitted")
        assert process.stdout is not None
        line = (await asyncio.wait_for(process.stdout.readline(), LINE_TIMEOUT)).decode()
    name = agent.principal.id.rsplit(":", 1)[-1]
    mission = short(rig.mission.mission_id)
    assert line.startswith(f"{name}: work item {short(item.work_item_id)} of mission {mission} ")
    assert " submitted (" in line and line.rstrip().endswith(" s)"), line
