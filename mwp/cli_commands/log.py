"""`mwp log`: the signed Group Event log in an object store.

    mwp log verify GROUP [--store LOCATION] [--evidence FILE]

checks every stored entry of the Group: its object key, its signature (six stages against the
Organization's Registry evidence), the hash chain, contiguity from sequence 1, the Group and
Event ID uniqueness, and reports the first fault or ``ok N entries``. Exit codes: 0 the log
verified, 1 a fault (or no entry at all), 2 the store or the evidence could not be used.

``LOCATION`` is a folder or ``s3://bucket[/prefix]`` (endpoint from ``MWP_S3_ENDPOINT``,
credentials from the usual AWS variables); the default is ``$MWP_OBJECT_STORE``, else
``.mwp/objects``. Registry evidence comes from ``--evidence FILE`` (the evidence JSON, or the
output of ``mwp registry show --json``), else from the running Organization registry.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_FAULT, EXIT_UNUSABLE = 0, 1, 2
STORE_ENV = "MWP_OBJECT_STORE"
DEFAULT_STORE = ".mwp/objects"


class LogCliError(Exception):
    """The store or the evidence could not be used (printed without a traceback)."""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "log",
        help="the signed Group Event log",
        description="Inspect the signed, hash-chained Group Event log in its object store.",
    )
    actions = parser.add_subparsers(dest="log_command", metavar="ACTION", required=True)
    verify = actions.add_parser(
        "verify",
        help="verify a Group's log and report the first fault",
        description=(
            "Verify every entry of a Group's Event log: signatures, hash chain, contiguity. "
            "Exits 0 when it verifies, 1 on a fault or an empty log, 2 when the store or the "
            "Registry evidence cannot be used."
        ),
    )
    verify.add_argument("group", metavar="GROUP", help="the Group ID")
    verify.add_argument(
        "--store",
        default=None,
        help=f"folder or s3://bucket[/prefix] (default ${STORE_ENV}, else {DEFAULT_STORE})",
    )
    verify.add_argument(
        "--evidence",
        type=Path,
        help="Registry evidence JSON, or the output of `mwp registry show --json`",
    )
    verify.add_argument(
        "--authority", metavar="SERVICE_ID", help="require this acceptedBy service on every Event"
    )
    verify.add_argument("--json", action="store_true", help="print the verdict as JSON")
    registry = verify.add_argument_group("evidence from the running registry (no --evidence)")
    registry.add_argument("--address", default="127.0.0.1:7233", help="Temporal address")
    registry.add_argument("--namespace", default="default", help="Temporal namespace")
    registry.add_argument("--state-dir", type=Path, default=Path(".mwp"), help="state folder")
    registry.add_argument("--org", help="Organization ID (default: from the state folder)")
    verify.set_defaults(handler=_verify)


def _verify(args: argparse.Namespace) -> int:
    from mwp.core.registry import Principal
    from mwp.group_log import GroupEventLog
    from mwp.stores.objects import ObjectStoreError, open_store

    location = args.store or os.environ.get(STORE_ENV) or DEFAULT_STORE
    try:
        evidence = _evidence(args)
        log = GroupEventLog(open_store(location), args.group)
        authority = Principal("service", args.authority) if args.authority else None
        verdict = log.verify_all(evidence, authority=authority)
    except (LogCliError, ObjectStoreError, OSError, ValueError) as exc:
        print(f"mwp log verify: {exc}", file=sys.stderr)
        return EXIT_UNUSABLE
    fault = verdict.fault
    if args.json:
        print(
            json.dumps(
                {
                    "groupId": args.group,
                    "ok": verdict.ok and verdict.verified > 0,
                    "entries": verdict.verified,
                    "lastSequence": verdict.last_sequence,
                    "headHash": verdict.head_hash,
                    "fault": None
                    if fault is None
                    else {
                        "sequence": fault.sequence,
                        "reason": fault.reason.value,
                        "detail": fault.detail,
                    },
                }
            )
        )
    elif fault is not None:
        print(f"fault at {fault}")
        print(f"verified {verdict.verified} entries before it")
    elif verdict.verified == 0:
        print(f"no entries for {args.group} in {location}")
    else:
        print(
            f"ok {verdict.verified} entries (sequences {verdict.first_sequence}-"
            f"{verdict.last_sequence}), head {verdict.head_hash}"
        )
    return EXIT_OK if verdict.ok and verdict.verified > 0 else EXIT_FAULT


def _evidence(args: argparse.Namespace) -> Any:
    from mwp.core.registry import RegistryEvidence, RegistryEvidenceError

    if args.evidence is not None:
        try:
            value = json.loads(args.evidence.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise LogCliError(f"cannot read evidence {args.evidence}: {exc}") from None
    else:
        value = asyncio.run(_registry_evidence(args))
    if isinstance(value, dict) and "evidence" in value:  # `mwp registry show --json`
        value = value["evidence"]
    try:
        return RegistryEvidence.from_json(value)
    except RegistryEvidenceError as exc:
        raise LogCliError(f"the Registry evidence is not usable: {exc.reason}") from None


async def _registry_evidence(args: argparse.Namespace) -> Any:
    from mwp.client import ClientError, connect

    organization_id = args.org
    if organization_id is None:
        path = args.state_dir / "organization.json"
        try:
            organization_id = json.loads(path.read_text())["organizationId"]
        except (OSError, ValueError, KeyError):
            raise LogCliError(
                f"no Registry evidence: pass --evidence FILE, or --org (no {path})"
            ) from None
    try:
        client = await connect(args.address, args.namespace)
        return await client.registry(organization_id).evidence_json()
    except ClientError as exc:
        raise LogCliError(str(exc)) from None
