"""Agent and Coordinator process start-up: wall time and CPU until a runtime serves.

Run: ``make bench-agent-startup`` (or ``.venv/bin/python -m benchmarks.agent_startup``); about a
minute on two cores. It sets the stage as the proof of concept does (`mwp.demo.setup`): `mwp
dev --no-gateway --headless` in a temporary folder on free loopback ports, the Organization,
the owner ``ada`` and the demo's cast registered from this process, and the gateway as its own
process. Then it starts the cast's runtimes as `mwp agent run mwp.demo.cast:NAME` and `mwp
coordinator run mwp.demo.cast:NAME` processes, as `mwp demo` does:

1. **One at a time.** ``--runs`` starts of the tester (a Worker) and of the lead (a
   Coordinator), each stopped (SIGTERM) before the next starts.
2. **Together.** ``--rounds`` starts of the demo's six runtimes at once (four Workers, two
   Coordinators), all stopped before the next round.

Measured per process: the wall time from its start to its ready line (a Worker's ``Task
queue``, a Coordinator's ``Gateway``: printed once it serves), its CPU (user + system, all its
threads) at that moment from ``/proc/PID/stat``, and its CPU over its whole life (its rusage,
read as the growth of this process's children's rusage once it is reaped; for a round, the
sum of its six). ``--python-only`` also measures the bare import of the command line and the
agent runtime (`python -c`), the part of the start no runtime work is in.

``--hold`` sets the stage, prints the environment to run a runtime by hand against it (for a
profiler: ``py-spy record -- python -m mwp agent run mwp.demo.cast:tester``) and waits for
Ctrl-C. ``--json`` prints the figures as one JSON document after the report.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import resource
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mwp.client import connect
from mwp.demo import cast
from mwp.demo.head_start import PORTS, STATE, environment, gateway_argv
from mwp.demo.processes import Processes
from mwp.demo.setup import COORDINATION
from mwp.dev.registration import add_agent, add_human, init_organization
from mwp.dev.stack import free_port

TICKS = os.sysconf("SC_CLK_TCK")
# What a runtime prints once it serves (`mwp.cli.agent`, `mwp.cli.coordinator`).
READY = {"agent": "Task queue", "coordinator": "Gateway  "}
# A runtime that used no CPU this long after serving has settled (an idle worker's polls are
# long polls: no CPU between them).
SETTLE_SECONDS = 0.5
SETTLE_LIMIT = 10.0
IDLE_SECONDS = 3.0
IMPORTS = "import mwp.cli.commands, mwp.workers.agent, mwp.demo.cast"


@dataclass(frozen=True)
class Start:
    name: str
    wall: float  # seconds from the start to the ready line
    cpu: float  # CPU seconds (user + system) at the ready line
    settled_wall: float  # seconds from the start until it went idle after serving
    settled_cpu: float  # CPU seconds then: with its AgentWorkflow's first workflow tasks


class Stage:
    """`mwp dev`, the Organization with the cast, and the gateway, as `mwp demo` sets them."""

    def __init__(self, folder: Path, bytecode: dict[str, str]) -> None:
        ports = {name: free_port() for name in PORTS}
        self.address = f"127.0.0.1:{ports['temporal']}"
        self.env = {**environment(ports), **bytecode}
        self.gateway_argv = gateway_argv(ports)
        self.folder = folder
        self.services = Processes(folder, folder / "logs", self.env)

    async def set(self) -> None:
        dev = self.services.start("dev", "dev", "--no-gateway", "--headless", service=True)
        await dev.wait_for("Ready in", 120)
        client = await connect(self.address, "default")
        organization = await init_organization(client, self.folder / STATE)
        gateway = self.services.start("gateway", *self.gateway_argv, service=True)
        await add_human(organization.registry, organization.keys, "ada")
        declared = {name: [COORDINATION] for name in cast.COORDINATORS}
        for name in cast.WORKERS:
            declared[name] = [f"{c}@{cast.VERSION}" for c in cast.capabilities_of(name)]
        await asyncio.gather(
            *(
                add_agent(
                    organization.registry, organization.keys, name, owner="ada", capabilities=c
                )
                for name, c in declared.items()
            )
        )
        await gateway.wait_for("Artifacts", 60)

    def stop(self) -> None:
        self.services.stop_all()

    def services_cpu(self) -> float:
        """CPU seconds so far of `mwp dev` (with its Temporal server) and the gateway: what
        serving a runtime's start costs the authority side is their growth over it."""
        return sum(_tree_cpu(p.process.pid) for p in self.services.started if p.process)

    async def start(self, name: str) -> tuple[asyncio.subprocess.Process, Start]:
        kind = "coordinator" if name in cast.COORDINATORS else "agent"
        began = time.monotonic()
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "mwp",
            kind,
            "run",
            f"mwp.demo.cast:{name}",
            cwd=self.folder,
            env={**os.environ, **self.env},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        assert child.stdout is not None
        said: list[str] = []
        while True:
            line = (await asyncio.wait_for(child.stdout.readline(), 120)).decode()
            if not line:
                raise RuntimeError(f"{name} exited before serving: {''.join(said)[-2000:]}")
            said.append(line)
            if line.startswith(READY[kind]):
                wall, cpu = time.monotonic() - began, _cpu_now(child.pid)
                settled_cpu = await _settled(child.pid)
                settled_wall = time.monotonic() - began - SETTLE_SECONDS
                return child, Start(name, wall, cpu, settled_wall, settled_cpu)


async def _settled(pid: int) -> float:
    """``pid``'s CPU seconds once it used none for ``SETTLE_SECONDS`` (its first workflow
    tasks, which run after the ready line, done), at most ``SETTLE_LIMIT`` seconds later."""
    deadline = time.monotonic() + SETTLE_LIMIT
    last, idle_since = _cpu_now(pid), time.monotonic()
    while time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        now = _cpu_now(pid)
        if now != last:
            last, idle_since = now, time.monotonic()
        elif time.monotonic() - idle_since >= SETTLE_SECONDS:
            break
    return last


def _cpu_now(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far, all its threads (``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def _tree_cpu(pid: int) -> float:
    """CPU seconds of ``pid`` and every process descended from it (`mwp dev`'s Temporal
    server is its child), those that still run."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                parents[int(entry.name)] = int(fields[1])
    tree, grew = {pid}, True
    while grew:
        found = {child for child, parent in parents.items() if parent in tree} - tree
        tree |= found
        grew = bool(found)
    total = 0.0
    for member in tree:
        with contextlib.suppress(OSError, IndexError):
            total += _cpu_now(member)
    return total


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def _stop(children: Sequence[asyncio.subprocess.Process]) -> None:
    for child in children:
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signal.SIGTERM)
    for child in children:
        assert child.stdout is not None
        await child.stdout.read()  # drain it: a full pipe would block its exit
        await asyncio.wait_for(child.wait(), 30)


async def one_at_a_time(stage: Stage, name: str, runs: int) -> list[dict[str, float]]:
    found = []
    for _ in range(runs):
        before, services = _children_cpu(), stage.services_cpu()
        child, start = await stage.start(name)
        services = stage.services_cpu() - services
        await _stop([child])
        life = _children_cpu() - before
        found.append(
            {
                "wall": start.wall,
                "cpu": start.cpu,
                "settledWall": start.settled_wall,
                "settledCpu": start.settled_cpu,
                "lifeCpu": life,
                "servicesCpu": services,
            }
        )
    return found


async def together(stage: Stage, names: Sequence[str], rounds: int) -> list[dict[str, Any]]:
    found = []
    for _ in range(rounds):
        before, services = _children_cpu(), stage.services_cpu()
        started = await asyncio.gather(*(stage.start(name) for name in names))
        services = stage.services_cpu() - services
        await _stop([child for child, _ in started])
        starts = [start for _, start in started]
        found.append(
            {
                "wall": max(s.wall for s in starts),
                "cpu": sum(s.cpu for s in starts),
                "settledWall": max(s.settled_wall for s in starts),
                "settledCpu": sum(s.settled_cpu for s in starts),
                "lifeCpu": _children_cpu() - before,
                "servicesCpu": services,
                "each": {
                    s.name: {"wall": s.wall, "cpu": s.cpu, "settledCpu": s.settled_cpu}
                    for s in starts
                },
            }
        )
    return found


async def python_only(runs: int, env: dict[str, str]) -> list[dict[str, float]]:
    found = []
    for _ in range(runs):
        before = _children_cpu()
        began = time.monotonic()
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-c", IMPORTS, env={**os.environ, **env}
        )
        await child.wait()
        found.append({"wall": time.monotonic() - began, "cpu": _children_cpu() - before})
    return found


def _summary(values: Sequence[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"median {statistics.median(values):.2f} (min {min(values):.2f}, max {max(values):.2f})"


def report(figures: dict[str, Any]) -> None:
    for label, key in (
        ("Worker (tester), one at a time", "worker"),
        ("Coordinator (lead), one at a time", "coordinator"),
        ("bare imports (python -c), one at a time", "imports"),
    ):
        runs = figures.get(key) or []
        if not runs:
            continue
        print(f"{label}, {len(runs)} runs:")
        print(f"  wall to serving  {_summary([r['wall'] for r in runs])} s")
        print(f"  CPU to serving   {_summary([r['cpu'] for r in runs])} s")
        if "settledCpu" in runs[0]:
            print(f"  wall to settled  {_summary([r['settledWall'] for r in runs])} s")
            print(f"  CPU to settled   {_summary([r['settledCpu'] for r in runs])} s")
        if "lifeCpu" in runs[0]:
            print(f"  CPU over life    {_summary([r['lifeCpu'] for r in runs])} s")
            print(f"  services' CPU    {_summary([r['servicesCpu'] for r in runs])} s")
    rounds = figures.get("together") or []
    if rounds:
        print(f"six runtimes together ({', '.join(rounds[0]['each'])}), {len(rounds)} rounds:")
        print(f"  wall to all serving  {_summary([r['wall'] for r in rounds])} s")
        print(f"  CPU to serving, sum  {_summary([r['cpu'] for r in rounds])} s")
        print(f"  wall to all settled  {_summary([r['settledWall'] for r in rounds])} s")
        print(f"  CPU to settled, sum  {_summary([r['settledCpu'] for r in rounds])} s")
        print(f"  CPU over life, sum   {_summary([r['lifeCpu'] for r in rounds])} s")
        print(f"  services' CPU        {_summary([r['servicesCpu'] for r in rounds])} s")


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    bytecode = {}
    if args.pycache_prefix:
        bytecode = {"PYTHONPYCACHEPREFIX": str(args.pycache_prefix), "PYTHONDONTWRITEBYTECODE": ""}
    with tempfile.TemporaryDirectory(prefix="mwp-startup-") as folder:
        stage = Stage(Path(folder), bytecode)
        await python_only(1, stage.env)  # its bytecode cache written, if any is
        try:
            await stage.set()
            if args.hold:
                print(f"cd {folder} && " + " ".join(f"{k}={v}" for k, v in stage.env.items()))
                print("then: python -m mwp agent run mwp.demo.cast:tester (SIGTERM ends this)")
                held = asyncio.Event()
                for signum in (signal.SIGINT, signal.SIGTERM):
                    asyncio.get_running_loop().add_signal_handler(signum, held.set)
                await held.wait()
                return {}
            load = os.getloadavg()[0]
            figures: dict[str, Any] = {
                "machine": {
                    "python": platform.python_version(),
                    "cores": os.cpu_count(),
                    "loadAverageAtStart": round(load, 2),
                    "bytecode": _bytecode(stage.env),
                }
            }
            print(f"python {platform.python_version()}; {os.cpu_count()} cores; load {load:.2f}")
            print(f"bytecode: {_bytecode(stage.env)}")
            idle = stage.services_cpu()
            await asyncio.sleep(IDLE_SECONDS)
            idle = (stage.services_cpu() - idle) / IDLE_SECONDS
            figures["servicesIdleCpuPerSecond"] = idle
            print(f"services' CPU while no runtime starts: {idle:.3f} s per second")
            if args.python_only:
                figures["imports"] = await python_only(args.runs, stage.env)
            figures["worker"] = await one_at_a_time(stage, "tester", args.runs)
            figures["coordinator"] = await one_at_a_time(stage, "lead", args.runs)
            names = (*cast.WORKERS, *cast.COORDINATORS)
            figures["together"] = await together(stage, names, args.rounds)
            figures["machine"]["loadAverageAtEnd"] = round(os.getloadavg()[0], 2)
            return figures
        finally:
            stage.stop()


def _bytecode(env: dict[str, str]) -> str:
    """Whether the runtimes' processes read their modules' bytecode from a cache."""
    merged = {**os.environ, **env}
    if merged.get("PYTHONPYCACHEPREFIX"):
        return f"cached under {merged['PYTHONPYCACHEPREFIX']}"
    if merged.get("PYTHONDONTWRITEBYTECODE"):
        return "not written (PYTHONDONTWRITEBYTECODE): sources without a cache compiled each start"
    return "cached beside the sources"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="starts of each, one at a time")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of six starts at once")
    parser.add_argument("--python-only", action="store_true", help="also time the bare imports")
    parser.add_argument(
        "--pycache-prefix",
        type=Path,
        help="the runtimes' bytecode cache (PYTHONPYCACHEPREFIX), written even where "
        "PYTHONDONTWRITEBYTECODE is set",
    )
    parser.add_argument(
        "--hold", action="store_true", help="set the stage and wait, for a profiler"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = parser.parse_args()
    figures = asyncio.run(bench(args))
    if figures:
        report(figures)
    if args.json:
        print(json.dumps(figures, indent=2))
    os._exit(0)  # the Temporal SDK may crash at interpreter exit (DESIGN.md)


if __name__ == "__main__":
    main()
