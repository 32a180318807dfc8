"""The `mwp` command line: argument wiring only; each subcommand lives in `mwp.cli.commands`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from mwp import PROTOCOL_VERSION, __version__
from mwp.cli.commands import COMMANDS, Handler


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mwp", description="MissionWeaveProtocol runtime on Temporal."
    )
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {__version__} (MWP {PROTOCOL_VERSION})"
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse, dispatch, and return the process exit code (callers pass it to `sys.exit`)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version and usage errors: keep main() returning an int
        return exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 2
    handler: Handler = args.handler
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
