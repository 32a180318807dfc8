"""`mwp demo`: the foundation demonstration (see `mwp.demo`)."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="sign, verify and admit MWP Commands end to end",
        description="Sign a mission.create Command, verify it in six stages, admit it once, "
        "and show typed refusals of tampered, mis-signed and malformed copies.",
    )
    parser.add_argument("--state", type=Path, default=Path(".mwp/demo"), help="state folder")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from mwp.demo import run_demo

    return 0 if run_demo(args.state) else 1
