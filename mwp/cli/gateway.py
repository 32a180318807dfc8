"""`mwp gateway`: serve the Group gateway (MWP over WebSocket, TLS 1.3) until Ctrl-C.

It needs what the authority zone holds: the Temporal address of the authority namespace, the
Organization and the registry service key of `mwp registry init` (in the state folder), and
the Group log's object store. Without ``--certfile/--keyfile`` it serves a development
certificate signed by a development CA it creates under ``<state-dir>/gateway-tls``; agents
trust that CA's ``ca.pem``.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path
from typing import Any

from mwp.cli import defaults

DEFAULT_LISTEN = "127.0.0.1:7443"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "gateway",
        help="serve the Group gateway: MWP over WebSocket on TLS 1.3",
        description=(
            "Serve the Group gateway for the state folder's Organization: HELLO, PING and "
            "COMMAND over wss (TLS 1.3 only). Ctrl-C stops it."
        ),
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
        "--hint-listen",
        metavar="HOST:PORT",
        help="receive the mirror's hints over UDP (loopback or a private interface); the "
        "authority worker sends them where MWP_GATEWAY_HINTS says",
    )
    parser.add_argument(
        "--artifact-listen",
        metavar="HOST:PORT",
        help="also serve Artifacts over HTTPS here (same host as --listen; default: none)",
    )
    parser.add_argument(
        "--reuse-policy",
        type=Path,
        metavar="FILE",
        help="the Organization's Knowledge Reuse Policy (JSON; default: "
        "<state-dir>/knowledge-reuse.json; none: no import is approved)",
    )
    parser.add_argument("--certfile", type=Path, help="server certificate chain (PEM)")
    parser.add_argument("--keyfile", type=Path, help="its private key (PEM)")
    parser.add_argument(
        "--store",
        help="the Group log's object store: a folder or s3://bucket/prefix "
        "(default: <state-dir>/objects)",
    )
    parser.set_defaults(handler=run)


def _listen(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"--listen must be HOST:PORT, not {text!r}")
    return host.strip("[]"), int(port)


def run(args: argparse.Namespace) -> int:
    if (args.certfile is None) != (args.keyfile is None):
        print("mwp gateway: pass both --certfile and --keyfile, or neither", file=sys.stderr)
        return 2
    try:
        host, port = _listen(args.listen)
    except ValueError as exc:
        print(f"mwp gateway: {exc}", file=sys.stderr)
        return 2
    return asyncio.run(_serve(args, host, port))


async def _serve(args: argparse.Namespace, host: str, port: int) -> int:
    from mwp.client import ClientError, KeyStore, connect
    from mwp.client.state_dir import REGISTRY_KEY_NAME, StateDirError, organization_id_of
    from mwp.gateway.authority import TemporalAuthority
    from mwp.gateway.knowledge_imports import POLICY_FILE
    from mwp.gateway.server import Gateway, GatewayOptions
    from mwp.gateway.tls import (
        DEVELOPMENT_FOLDER,
        certificate_hash_of_file,
        development_certificates,
        server_context,
    )
    from mwp.stores.objects import open_store

    try:
        organization_id = organization_id_of(args.state_dir, args.org)
        registrar = KeyStore.in_state_dir(args.state_dir).load(REGISTRY_KEY_NAME)
        client = await connect(args.address, args.namespace)
    except (StateDirError, ClientError, OSError) as exc:
        print(f"mwp gateway: {exc}", file=sys.stderr)
        return 1
    if args.certfile is None:
        paths = development_certificates(args.state_dir / DEVELOPMENT_FOLDER, _hostnames(host))
        certfile, keyfile, anchor = paths.server_cert, paths.server_key, str(paths.ca_cert)
    else:
        certfile, keyfile, anchor = args.certfile, args.keyfile, "the operator's CA"
    try:
        context = server_context(certfile, keyfile)
        fingerprint = certificate_hash_of_file(certfile)
    except (OSError, ValueError) as exc:
        print(f"mwp gateway: cannot load the certificate: {exc}", file=sys.stderr)
        return 1
    artifact_port = None
    if args.artifact_listen:
        artifact_host, artifact_port = _listen(args.artifact_listen)
        if artifact_host != host:
            print("mwp gateway: --artifact-listen must use the --listen host", file=sys.stderr)
            return 2
    store = open_store(args.store or args.state_dir / "objects")
    authority = TemporalAuthority(client, organization_id, registrar, store)
    hints = _listen(args.hint_listen) if args.hint_listen else None
    policy = args.reuse_policy or args.state_dir / POLICY_FILE
    options = GatewayOptions(hint_listen=hints, reuse_policy=policy)
    gateway = Gateway(authority, context, fingerprint, options)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        async with gateway.listening(host, port, artifact_port=artifact_port) as server:
            bound = server.sockets[0].getsockname()[1]
            shown = f"[{host}]" if ":" in host else host
            print(f"Organization  {organization_id}")
            print(f"Trust anchor  {anchor}")
            print(f"Gateway       wss://{shown}:{bound} (TLS 1.3)", flush=True)
            if gateway.artifact_address is not None:
                print(f"Artifacts     https://{shown}:{gateway.artifact_address[1]}", flush=True)
            await stop.wait()
    except OSError as exc:
        print(f"mwp gateway: cannot listen on {args.listen}: {exc}", file=sys.stderr)
        return 1
    print("gateway stopped", flush=True)
    return 0


def _hostnames(host: str) -> list[str]:
    names = ["localhost", "127.0.0.1", "::1"]
    if host not in names and host not in ("0.0.0.0", "::", ""):
        names.insert(0, host)
    return names
