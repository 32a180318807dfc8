"""`mwp demo`: one Mission end to end on the embedded stack (see `mwp.dev.mission_demo`)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path


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
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.codec:
        from mwp.dev.codec_demo import run_demo

        return 0 if run_demo(args.state_dir) else 1
    from mwp.dev.mission_demo import demo_with_stack

    try:
        ok = asyncio.run(demo_with_stack(args.state_dir, args.temporal_address))
    except Exception as exc:  # report, then exit non-zero without a traceback wall
        print(f"mwp demo: FAILED: {type(exc).__name__}: {exc}", file=sys.stderr)
        ok = False
    return 0 if ok else 1
