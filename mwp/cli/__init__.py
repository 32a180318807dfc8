"""The `mwp` command line: argument wiring only; each subcommand lives in `mwp.cli.commands`.

`main(argv)` parses, dispatches and returns the exit code (tests call it in-process); `run()`
is the `mwp` command itself, which also ends the process (see `run` for why it must).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

from mwp import PROTOCOL_VERSION, __version__

if TYPE_CHECKING:
    from mwp.cli.commands import Handler


def build_parser() -> argparse.ArgumentParser:
    from mwp.cli.commands import COMMANDS  # imported only now: see run()

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
    """Parse, dispatch, and return the process exit code; never ends the process."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version and usage errors: keep main() returning an int
        return exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 2
    handler: Handler = args.handler
    return handler(args)


def run(argv: Sequence[str] | None = None) -> NoReturn:
    """The `mwp` command: `main(argv)`, then end the process without finalizing the interpreter.

    The Temporal SDK's native runtime can crash while the interpreter finalizes after a clean
    run (`PyGILState_Release`: SIGABRT or SIGSEGV once the output is already printed), so the
    process leaves with `os._exit` once the command is done and its output flushed. So no
    command may rely on finalization: no atexit hooks, no non-daemon threads left running.

    The proof of concept's stack starts before any command is imported (`mwp.demo.head_start`:
    it comes up while the demo imports); stopped here if the demo never took it.
    """
    from mwp.demo import head_start

    try:
        head_start.begin_if_demo(list(sys.argv[1:] if argv is None else argv))
        code = main(argv)
    except SystemExit as exc:  # a handler's sys.exit(): the status the interpreter would give
        code = _status(exc.code)
    except KeyboardInterrupt:  # Ctrl-C outside a handler's own handling: as Python reports it
        sys.excepthook(*sys.exc_info())
        _flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.raise_signal(signal.SIGINT)  # killed by SIGINT, as after an unhandled interrupt
        code = 130  # not reached unless SIGINT is blocked
    except BaseException:  # an unexpected error: its traceback and status 1, as before
        sys.excepthook(*sys.exc_info())
        code = 1
    finally:
        head_start.abandon()
    if not _flush():
        code = 120  # the interpreter's status when it cannot flush stdout at exit
    os._exit(code)


def _status(code: object) -> int:
    if code is None or isinstance(code, int):
        return code or 0
    print(code, file=sys.stderr)
    return 1


def _flush() -> bool:
    """Flush stdout, then stderr, as interpreter exit would; False if stdout could not be."""
    flushed = True
    try:
        sys.stdout.flush()
    except (OSError, ValueError):  # a closed pipe (`mwp mission list | head`) or stream
        flushed = False
    with contextlib.suppress(OSError, ValueError):  # nowhere left to report it
        sys.stderr.flush()
    return flushed


if __name__ == "__main__":
    run()
