"""`mwp console`: serve the human Approval console until Ctrl-C.

A MissionOwner logs in with their own key file (signed in the browser, never uploaded), sees
their Missions, reads one awaiting Approval (revision, WorkItems, Evidence per criterion,
Artifacts with their hashes checked) and approves it or requests changes. ``mwp dev`` serves
the same console on ``--console-port``; this command is for a console beside an authority
worker of your own. It needs the authority namespace and the object store, as the gateway does.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path
from typing import Any

from mwp.cli import defaults

DEFAULT_LISTEN = "127.0.0.1:7480"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "console",
        help="serve the human Approval console (a web page) until Ctrl-C",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--address", default=defaults.address(), help=defaults.address_help())
    parser.add_argument("--namespace", default="default", help="the authority namespace")
    parser.add_argument(
        "--state-dir", type=Path, default=Path(".mwp"), help="state folder (default: ./.mwp)"
    )
    parser.add_argument("--org", help="Organization ID (default: the state folder's)")
    parser.add_argument(
        "--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT", help=f"({DEFAULT_LISTEN})"
    )
    parser.add_argument(
        "--store",
        help="the Artifact store: a folder or s3://bucket/prefix (default: <state-dir>/objects)",
    )
    parser.set_defaults(handler=run)


def _listen(value: str) -> tuple[str, int] | None:
    host, _, port = value.rpartition(":")
    return (host, int(port)) if host and port.isdigit() and int(port) < 65536 else None


def run(args: argparse.Namespace) -> int:
    listen = _listen(args.listen)
    if listen is None:
        print(f"mwp console: --listen {args.listen!r} is not HOST:PORT", file=sys.stderr)
        return 2
    return asyncio.run(_serve(args, *listen))


async def _serve(args: argparse.Namespace, host: str, port: int) -> int:
    from mwp.client import connect
    from mwp.client.state_dir import StateDirError, organization_id_of
    from mwp.console.server import Console
    from mwp.stores.objects import open_store

    def organization() -> str | None:
        if args.org:
            return str(args.org)
        try:
            return organization_id_of(args.state_dir)
        except StateDirError:
            return None

    try:
        client = await connect(args.address, args.namespace)
    except Exception as exc:
        print(f"mwp console: cannot reach Temporal at {args.address}: {exc}", file=sys.stderr)
        return 1
    console = Console(client, organization, open_store(args.store or args.state_dir / "objects"))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        async with console.listening(host, port) as url:
            print(f"Approval console on {url} (Ctrl-C stops it)", flush=True)
            if organization() is None:
                print("  it serves the Organization once `mwp registry init` ran", flush=True)
            await stop.wait()
    except OSError as exc:
        print(f"mwp console: cannot listen on {host}:{port}: {exc}", file=sys.stderr)
        return 1
    return 0
