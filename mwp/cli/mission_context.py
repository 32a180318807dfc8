"""What the `mwp mission` actions share: naming Missions and keys of the state folder, the
connection, the signing actor's Session Epoch, and printing a receipt or a refusal."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mwp.client import Identity, MwpClient
    from mwp.client.missions import MissionHandle

MISSIONS_FILE = "missions.json"


class MissionCliError(Exception):
    """A user-facing failure: printed without a traceback."""


def handler(action: Any) -> Any:
    def handle(args: argparse.Namespace) -> int:
        from mwp.client import ClientError
        from mwp.core.errors import MwpError

        try:
            return int(asyncio.run(action(args)))
        except (MissionCliError, ClientError, OSError) as exc:
            print(f"mwp mission: {exc}", file=sys.stderr)
            return 1
        except MwpError as exc:
            detail = f" {json.dumps(exc.details)}" if exc.details else ""
            print(f"mwp mission: refused: {exc.code.value}: {exc.message}{detail}", file=sys.stderr)
            return 1

    return handle


def organization_id(state_dir: Path) -> str:
    from mwp.client.state_dir import StateDirError, organization_id_of

    try:
        return organization_id_of(state_dir)
    except StateDirError as exc:
        raise MissionCliError(str(exc)) from None


def signer(state_dir: Path, name: str) -> Identity:
    from mwp.client import KeyStore

    keys = KeyStore.in_state_dir(state_dir)
    for key_name in (f"human-{name}", f"agent-{name}", name):
        if keys.exists(key_name):
            return keys.load(key_name)
    raise MissionCliError(f"no key named {name!r} in {keys.directory} (see `mwp registry`)")


def remembered(state_dir: Path) -> dict[str, str]:
    path = state_dir / MISSIONS_FILE
    if not path.exists():
        return {}
    value: dict[str, str] = json.loads(path.read_text())
    return value


def remember(state_dir: Path, mission_id: str, group_id: str) -> None:
    known = remembered(state_dir)
    known[mission_id] = group_id
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / MISSIONS_FILE).write_text(json.dumps(known, indent=2) + "\n")


async def connect_to(args: argparse.Namespace) -> MwpClient:
    from mwp.client import connect

    return await connect(args.address, args.namespace)


async def mission_of(args: argparse.Namespace, client: MwpClient) -> MissionHandle:
    from mwp.client.missions import MissionClient

    mission_id = unique_mission(args.state_dir, args.mission)
    return MissionClient(client, organization_id(args.state_dir)).mission(
        mission_id, remembered(args.state_dir)[mission_id]
    )


def unique_mission(state_dir: Path, prefix: str) -> str:
    """The one Mission created here whose ID is ``prefix`` or starts with it."""
    matches = [m for m in remembered(state_dir) if names(m, prefix)]
    if len(matches) != 1:
        found = "no" if not matches else "several"
        raise MissionCliError(f"{found} Missions match {prefix!r} (see `mwp mission list`)")
    return matches[0]


async def session_epoch(client: MwpClient, state_dir: Path, identity: Identity) -> int | None:
    if identity.principal.type != "agent":
        return None
    epochs = await client.registry(organization_id(state_dir)).session_epochs()
    epoch = epochs.get(identity.principal.id)
    if epoch is None:
        raise MissionCliError(f"{identity.principal.id} has no open session")
    return epoch


def print_result(result: dict[str, Any]) -> None:
    receipt = result["receipt"]
    note = " (duplicate: original receipt)" if result.get("duplicate") else ""
    print(
        f"accepted{note}: sequence {receipt['firstSequence']}..{receipt['lastSequence']}, "
        f"revision {receipt['aggregateRevision']}"
    )
    for event in result["events"]:
        subject = event.get("workItemId", "")
        print(f"  {event['sequence']:>5}  {event['kind']:<36} {subject}")


def names(identifier: str, prefix: str) -> bool:
    """Whether ``prefix`` names ``identifier``: a prefix of the whole ID or of its last part
    (``ab12`` names ``urn:uuid:ab12cd34-…``, as the short IDs printed everywhere show it)."""
    return identifier.startswith(prefix) or identifier.rsplit(":", 1)[-1].startswith(prefix)
