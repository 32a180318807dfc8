"""`mwp demo`: one Mission end to end on the embedded stack (see `mwp.dev.mission_demo`)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from pathlib import Path
from typing import Any


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="run one Mission end to end on the embedded stack",
        description="Start the embedded Temporal stack, run one Mission from creation to human "
        "Approval, print the Group's Events in order; exit 0 only if it ends approved.",
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=Path(".mwp/demo"),
        help="folder for the embedded server's state",
    )
    parser.add_argument(
        "--temporal-address", default=None, help="use this Temporal cluster instead of starting one"
    )
    parser.add_argument(
        "--codec",
        action="store_true",
        help="only the signed-document demo (no Temporal): sign, verify, admit",
    )
    parser.add_argument(
        "--proof-of-concept",
        action="store_true",
        help="the multi-process proof of concept (in progress: docs/proof-of-concept.md)",
    )
    parser.add_argument(
        "--json", action="store_true", help="with --proof-of-concept: print the report as JSON"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.codec:
        from mwp.dev.codec_demo import run_demo

        return 0 if run_demo(args.state_dir) else 1
    if args.proof_of_concept:
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
    report = asyncio.run(run_proof_of_concept(args.state_dir / "proof-of-concept", out))
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
