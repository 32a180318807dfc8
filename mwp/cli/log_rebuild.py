"""`mwp log rebuild GROUP --into DEST`: the Group Event log again, from workflow history alone.

Reads every run of the Group's MissionWorkflow, seals the accepted Events with the Group
Authority's key (from the state folder's ``authority-keys``) into ``DEST``, then compares it
with the mirrored log (``--store``) byte for byte. Exit codes: 0 identical, 1 a difference,
2 history, key or stores unusable.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from mwp.cli import defaults

EXIT_OK, EXIT_DIFFERENT, EXIT_UNUSABLE = 0, 1, 2


def add_rebuild_parser(actions: Any, default_store: str) -> None:
    rebuild = actions.add_parser(
        "rebuild",
        help="rebuild a Group's log from Temporal history and compare it with the mirrored one",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    rebuild.add_argument("group", metavar="GROUP", help="the Group ID")
    rebuild.add_argument("--into", required=True, help="destination folder or s3://bucket/prefix")
    rebuild.add_argument(
        "--store", default=default_store, help=f"the mirrored log (default {default_store})"
    )
    rebuild.add_argument("--address", default=defaults.address(), help=defaults.address_help())
    rebuild.add_argument("--namespace", default="default", help="Temporal namespace")
    rebuild.add_argument(
        "--state-dir", type=Path, default=Path(".mwp"), help="state folder (authority-keys/)"
    )
    rebuild.add_argument("--org", help="Organization ID (default: from the state folder)")
    rebuild.add_argument("--json", action="store_true", help="print the result as JSON")
    rebuild.set_defaults(handler=_rebuild)


def _rebuild(args: argparse.Namespace) -> int:
    from mwp.client import ClientError
    from mwp.log.rebuild import RebuildError
    from mwp.stores.objects import ObjectStoreError

    try:
        return asyncio.run(_run(args))
    except (RebuildError, ClientError, ObjectStoreError, OSError) as exc:
        print(f"mwp log rebuild: {exc}", file=sys.stderr)
        return EXIT_UNUSABLE


async def _run(args: argparse.Namespace) -> int:
    from mwp.client import connect
    from mwp.client.state_dir import StateDirError, organization_id_of
    from mwp.contracts.messages import group_authority
    from mwp.log.group_log import GroupEventLog
    from mwp.log.keys import AuthorityKeyring
    from mwp.log.rebuild import RebuildError, compare, rebuild
    from mwp.stores.objects import open_store
    from mwp.workers.progress import Progress

    try:
        organization_id = organization_id_of(args.state_dir, args.org)
    except StateDirError as exc:
        raise RebuildError(str(exc)) from None
    authority = AuthorityKeyring.in_state_dir(args.state_dir).get(
        group_authority(organization_id).id
    )
    if authority is None:
        raise RebuildError(f"no Group Authority key of {organization_id} in {args.state_dir}")
    client = await connect(args.address, args.namespace)
    destination = open_store(args.into)
    shown = not args.json  # stdout is the JSON document alone, stderr stays quiet
    with Progress(f"reading the history of {args.group}", unit="events", enabled=shown) as read:
        rebuilt = await rebuild(client.temporal, args.group, destination, authority, read.report)
    with Progress("comparing with the mirrored log", unit="entries", enabled=shown) as compared:
        comparison = compare(
            GroupEventLog(open_store(args.store), args.group),
            GroupEventLog(destination, args.group),
            compared.report,
        )
    result = {
        "group": args.group,
        "workflowId": rebuilt.workflow_id,
        "runs": rebuilt.runs,
        "events": rebuilt.events,
        "identical": comparison.identical,
        "firstDifference": comparison.first_difference,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    elif comparison.identical:
        print(
            f"rebuilt {rebuilt.events} Events from {rebuilt.runs} runs of {rebuilt.workflow_id}: "
            f"byte-identical to {args.store}"
        )
    else:
        print(
            f"rebuilt {rebuilt.events} Events; the logs first differ at sequence "
            f"{comparison.first_difference}"
        )
    return EXIT_OK if comparison.identical else EXIT_DIFFERENT
