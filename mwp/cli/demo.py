"""`mwp demo`: the proof of concept (`mwp.demo`): two Missions, five agents and a Coordinator as
processes through the gateway, injected failures, the console's human decisions, and a report
of named checks. ``--one-mission`` runs one Mission in one process (`mwp.dev.mission_demo`)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from pathlib import Path
from typing import Any

from mwp.demo.head_start import DEFAULT_STATE_DIR, FOLDER


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="run the proof of concept: two Missions, real agent processes, a named-check report",
        description="Start `mwp dev`, register an Organization, run four Workers and a "
        "Coordinator as their own processes through the Group gateway, run two software "
        "Missions at once while killing and restarting agents, decide in the Approval console, "
        "send what a hostile client would, and prove it all from the signed Group logs. Prints "
        "each named check; exits 0 only if every check passed. Its folder (under --state-dir) "
        "keeps each process's log.",
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=DEFAULT_STATE_DIR,
        help="folder for the demo's state and logs (emptied first)",
    )
    parser.add_argument(
        "--json", action="store_true", help="print the report as one JSON object on stdout"
    )
    parser.add_argument(
        "--interactive",
        action="store_true",
        help="wait for a person to decide in the Approval console (request changes on the "
        "CSV export Mission, approve the others, then approve the revision) instead of "
        "driving the console",
    )
    parser.add_argument(
        "--one-mission",
        action="store_true",
        help="instead: one Mission end to end in one process on the embedded stack",
    )
    parser.add_argument(
        "--temporal-address",
        default=None,
        help="with --one-mission: use this Temporal cluster instead of starting one",
    )
    parser.add_argument(
        "--codec",
        action="store_true",
        help="instead: only the signed-document demo (no Temporal): sign, verify, admit",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.codec:
        from mwp.dev.codec_demo import run_demo

        return 0 if run_demo(args.state_dir) else 1
    if not args.one_mission:
        return _proof_of_concept(args)
    from mwp.dev.mission_demo import demo_with_stack

    interrupted = signal.getsignal(signal.SIGINT) is not signal.SIG_IGN and _Interrupted()
    try:
        with interrupted or contextlib.nullcontext():
            ok = asyncio.run(demo_with_stack(args.state_dir, args.temporal_address))
    except KeyboardInterrupt:
        ok = False
    except Exception as exc:  # report, then exit non-zero without a traceback wall
        if not (interrupted and interrupted.seen):
            print(f"mwp demo: FAILED: {type(exc).__name__}: {exc}", file=sys.stderr)
        ok = False
    if interrupted and interrupted.seen:
        print("mwp demo: interrupted; the embedded stack is stopped", file=sys.stderr)
        return 130
    return 0 if ok else 1


def _proof_of_concept(args: argparse.Namespace) -> int:
    import json

    from mwp.demo.run import run_proof_of_concept

    out = (lambda line: print(line, file=sys.stderr)) if args.json else print
    folder = args.state_dir / FOLDER
    report = asyncio.run(run_proof_of_concept(folder, out, interactive=args.interactive))
    summary = report.to_json()
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"{summary['passed']} checks passed; failed: {summary['failed'] or 'none'}")
    return 0 if summary["ok"] else 1


class _Interrupted:
    """Notes a Ctrl-C and lets asyncio cancel the demo as usual: what the cancelled Commands
    then raise is the interruption, not a failure to report."""

    def __init__(self) -> None:
        self.seen = False
        self._previous: Any = None

    def __enter__(self) -> _Interrupted:
        self._previous = signal.getsignal(signal.SIGINT)
        signal.signal(signal.SIGINT, self._note)
        return self

    def __exit__(self, *exc_info: object) -> None:
        signal.signal(signal.SIGINT, self._previous)

    def _note(self, signum: int, frame: Any) -> None:
        self.seen = True
        raise KeyboardInterrupt
