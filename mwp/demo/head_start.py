"""The proof of concept's first step, taken before the product's modules are imported.

`mwp demo` spends about 0.9 s importing the product before it can do anything, and `mwp dev`
takes 1.3 s to start (its own imports, then the Temporal server): started first thing, the stack
comes up while the demo imports. :func:`begin_if_demo` is called by the command line before it
imports any command; it empties the demo's folder, chooses the ports, starts `mwp dev` and the
warm launcher, and leaves the :class:`HeadStart` for :func:`take`. A caller that runs the demo
in-process (the tests) gets the same from :func:`begin`.

Only the standard library, `mwp.demo.processes` and `mwp.dev.ports` (standard library
themselves) are imported here.
"""

from __future__ import annotations

import argparse
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from mwp.demo.processes import DemoProcess, Processes
from mwp.dev.ports import free_port

STATE = ".mwp"  # inside the demo's folder: every `mwp` command's default state folder
DEFAULT_STATE_DIR = Path(".mwp/demo")
FOLDER = "proof-of-concept"  # under --state-dir
# The dev server is killed this long after SIGTERM at the end (it takes 1.2 s to stop; SQLite's
# write-ahead log keeps what committed, and the demo's folder is emptied at its next run).
SERVER_STOP_SECONDS = 0.2
PORTS = ("temporal", "ui", "gw", "art", "console", "hints")


@dataclass
class HeadStart:
    """The demo's folder, ports and processes, with `mwp dev` and the launcher starting."""

    folder: Path
    ports: dict[str, int]
    processes: Processes
    dev: DemoProcess
    began: float  # time.monotonic() when the demo began

    @property
    def state(self) -> Path:
        return self.folder / STATE


_begun: HeadStart | None = None


def environment(ports: dict[str, int]) -> dict[str, str]:
    """What every process of the demo finds in its environment: where the parts listen."""
    return {
        "MWP_ADDRESS": f"127.0.0.1:{ports['temporal']}",
        "MWP_UI_PORT": str(ports["ui"]),
        "MWP_GATEWAY_PORT": str(ports["gw"]),
        "MWP_ARTIFACT_PORT": str(ports["art"]),
        "MWP_CONSOLE_PORT": str(ports["console"]),
        "MWP_STATE_DIR": STATE,
        "MWP_GATEWAY_HINTS": f"127.0.0.1:{ports['hints']}",
        "PYTHONUNBUFFERED": "1",
    }


def gateway_argv(ports: dict[str, int]) -> list[str]:
    """`mwp gateway` as the demo runs it, its own process (the demo kills it for the outage),
    told of new Events by the authority worker's mirror over UDP."""
    return [
        "gateway",
        f"--listen=127.0.0.1:{ports['gw']}",
        f"--artifact-listen=127.0.0.1:{ports['art']}",
        f"--hint-listen=127.0.0.1:{ports['hints']}",
    ]


def begin(folder: Path, began: float | None = None) -> HeadStart:
    """Empty ``folder``, then start `mwp dev` and the warm launcher there."""
    began = time.monotonic() if began is None else began
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    ports = {name: free_port() for name in PORTS}
    processes = Processes(folder, folder / "logs", environment(ports))
    # Its SQLite file stays for a look at a run that went wrong (the UI, on the same file).
    dev = processes.start(
        "dev", "dev", "--no-gateway", f"--server-stop-seconds={SERVER_STOP_SECONDS}", service=True
    )
    processes.warm_up()  # it imports the runtimes' modules while the stack starts
    return HeadStart(folder, ports, processes, dev, began)


def begin_if_demo(argv: list[str]) -> None:
    """If ``argv`` runs the proof of concept, :func:`begin` it now (see the module)."""
    global _begun
    began = time.monotonic()
    if argv[:1] != ["demo"]:
        return
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR)
    for other in ("--one-mission", "--codec", "-h", "--help"):
        parser.add_argument(other, action="store_true")
    known, _ = parser.parse_known_args(argv[1:])
    if known.one_mission or known.codec or known.h or known.help:
        return
    _begun = begin(known.state_dir / FOLDER, began)


def abandon() -> None:
    """Stop what :func:`begin_if_demo` started if the demo never took it (a usage error)."""
    global _begun
    head, _begun = _begun, None
    if head is not None:
        head.processes.stop_all()


def take(folder: Path) -> HeadStart | None:
    """The head start :func:`begin_if_demo` made for ``folder``, once."""
    global _begun
    head, _begun = _begun, None
    if head is None or head.folder.resolve() != folder.resolve():
        if head is not None:
            head.processes.stop_all()  # begun for another folder: not this run's
        return None
    return head
