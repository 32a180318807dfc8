"""`mwp mission`: create, inspect and steer Missions from the command line.

    mwp mission create --owner ada --coordinator planner --objective "..."
    mwp mission list
    mwp mission show MISSION [--json]
    mwp mission send MISSION --as NAME KIND [--payload JSON | --payload @FILE] [--work-item ID]
                     [--action-id ID] [--override-grant GRANT]
    mwp mission grant-override MISSION --as ada --policy NAME --for NAME --kind KIND
                     --action-id ID --reason "..." [--expires-in SECONDS]
    mwp mission publish MISSION FILE --as AGENT --work-item ID [--media-type TYPE]
    mwp mission authorize MISSION --as COORDINATOR --goal "..." [--contract FILE]
    mwp mission offer MISSION ITEM --as COORDINATOR --to AGENT
    mwp mission review MISSION ITEM --as COORDINATOR [--accept | --reject --reason "..."]
    mwp mission wait MISSION [ITEM] [--for STATE]
    mwp mission submit MISSION --as COORDINATOR
    mwp mission artifact MISSION HASH [--output FILE]
    mwp mission approve MISSION --as ada
    mwp mission request-changes MISSION --as ada --reason "..."
    mwp mission watch MISSION [--once]

Names are the key names of `mwp registry add-human` / `add-agent` (`ada` finds
`human-ada` or `agent-ada` under `<state>/keys/`). Missions created here are remembered in
`<state>/missions.json` so they can be named by a unique prefix of their ID.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mwp.cli import (
    defaults,
    watch,
    work,
)  # watch: the live display (cheap to import: rich loads when it runs)
from mwp.cli import mission_context as shared

if TYPE_CHECKING:
    from mwp.core.group.cooperation_limits import CooperationLimits


def register(subparsers: Any) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--address", default=defaults.address(), help=defaults.address_help())
    common.add_argument("--namespace", default="default", help="Temporal namespace")
    common.add_argument("--state-dir", type=Path, default=Path(".mwp"), help="state folder")
    common.add_argument(
        "--ui-url", default=defaults.ui_url(), help="the Temporal UI, for the links printed"
    )
    parser = subparsers.add_parser(
        "mission",
        help="create, inspect and steer Missions",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="mission_command", metavar="ACTION", required=True)

    create = actions.add_parser("create", parents=[common], help="mission.create by a human")
    create.add_argument("--owner", required=True, help="the MissionOwner's name (a human)")
    create.add_argument("--coordinator", required=True, help="the Coordinator agent's name")
    create.add_argument("--objective", required=True, help="the bounded objective")
    create.add_argument(
        "--done",
        action="append",
        default=[],
        metavar="CRITERION",
        help="a definition-of-done criterion (repeatable)",
    )
    create.add_argument("--deadline-days", type=int, default=7)
    create.add_argument("--budget-usd", type=float, default=1000.0)
    create.add_argument(
        "--follow-up-to",
        metavar="MISSION",
        help="mission.create_follow_up: link to this approved Mission (ID or unique prefix)",
    )
    create.add_argument(
        "--cooperation-limits",
        type=Path,
        metavar="FILE",
        help="the Organization's runaway-control limits, as JSON (docs/operations.md)",
    )
    create.set_defaults(handler=shared.handler(_create))

    listing = actions.add_parser("list", parents=[common], help="Missions created here")
    listing.set_defaults(handler=shared.handler(_list))

    show = actions.add_parser("show", parents=[common], help="a Mission's current state")
    show.add_argument("mission", help="Mission ID (or a unique prefix)")
    show.add_argument("--json", action="store_true", help="the full Mission view as JSON")
    show.set_defaults(handler=shared.handler(_show))

    send = actions.add_parser("send", parents=[common], help="sign and send any Command")
    send.add_argument("mission")
    send.add_argument("kind", help="Command kind, e.g. message.post")
    send.add_argument("--as", dest="actor", required=True, help="who signs (key name)")
    send.add_argument("--payload", default="{}", help="JSON object, or @FILE")
    send.add_argument("--work-item", help="target WorkItem ID")
    send.add_argument("--conversation", help="target Conversation ID")
    send.add_argument("--expected-revision", type=int)
    send.add_argument("--action-id", help="the Command's Action ID (default: a new one)")
    send.add_argument(
        "--override-grant", metavar="GRANT", help="cite a Cooperation Override Grant by its ID"
    )
    send.set_defaults(handler=shared.handler(_send))

    override = actions.add_parser(
        "grant-override",
        parents=[common],
        help="policy.grant_cooperation_override: let one Command past a cooperation limit",
    )
    override.add_argument("mission")
    override.add_argument("--as", dest="actor", required=True, help="the MissionOwner")
    override.add_argument(
        "--policy", required=True, help="the exceeded limit (RATE_LIMITED's details.policy)"
    )
    override.add_argument(
        "--for", dest="beneficiary", required=True, help="who sends the target (key name)"
    )
    override.add_argument("--kind", required=True, help="the target Command's kind")
    override.add_argument("--action-id", required=True, help="the target Command's Action ID")
    override.add_argument("--reason", required=True)
    override.add_argument("--expires-in", type=int, default=600, metavar="SECONDS")
    override.set_defaults(handler=shared.handler(_grant_override))

    publish = actions.add_parser(
        "publish",
        parents=[common],
        help="store a file as an Artifact and publish its signed manifest (artifact.publish)",
    )
    publish.add_argument("mission")
    publish.add_argument("file", type=Path, help="the Artifact's content")
    publish.add_argument("--as", dest="actor", required=True, help="the WorkItem's owner")
    publish.add_argument("--work-item", required=True, help="the active WorkItem")
    publish.add_argument("--media-type", default="application/octet-stream")
    publish.add_argument("--schema-uri", default="urn:mwp:schema:opaque")
    publish.add_argument(
        "--store", help="object store: folder or s3://bucket/prefix (default: <state>/objects)"
    )
    publish.set_defaults(handler=shared.handler(_publish))

    approve = actions.add_parser(
        "approve", parents=[common], help="approve the submitted revision and Artifact set"
    )
    approve.add_argument("mission")
    approve.add_argument("--as", dest="actor", required=True, help="the MissionOwner")
    approve.add_argument("--comments", default=None)
    approve.set_defaults(handler=shared.handler(_approve))

    changes = actions.add_parser(
        "request-changes", parents=[common], help="send the submission back with a reason"
    )
    changes.add_argument("mission")
    changes.add_argument("--as", dest="actor", required=True, help="the MissionOwner")
    changes.add_argument("--reason", required=True)
    changes.set_defaults(handler=shared.handler(_request_changes))

    work.register(actions, common)

    follow = actions.add_parser(
        "watch",
        parents=[common],
        help="a Mission's WorkItems, owners and states, live until it ends",
        description=watch.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    follow.add_argument("mission", help="Mission ID (or a unique prefix of one created here)")
    follow.add_argument("--once", action="store_true", help="print the current table and exit")
    follow.add_argument(
        "--interval", type=float, default=watch.POLL_SECONDS, help="seconds between polls"
    )
    follow.set_defaults(handler=watch.interruptible(shared.handler(_watch)))


# --- actions --------------------------------------------------------------------------------


async def _create(args: argparse.Namespace) -> int:
    from mwp.client.missions import MissionClient, in_seconds
    from mwp.dev.scenario import definition_of_done

    owner = shared.signer(args.state_dir, args.owner)
    coordinator = shared.signer(args.state_dir, args.coordinator)
    limits = _cooperation_limits(args.cooperation_limits)
    client = await shared.connect_to(args)
    missions = MissionClient(
        client, shared.organization_id(args.state_dir), cooperation_limits=limits
    )
    follow_up_to = None
    if args.follow_up_to is not None:
        follow_up_to = shared.unique_mission(args.state_dir, args.follow_up_to)
    mission, result = await missions.create(
        owner,
        follow_up_to=follow_up_to,
        objective=args.objective,
        coordinator_agent_id=coordinator.principal.id,
        definition_of_done=definition_of_done(*args.done),
        budget={"currency": "USD", "financialLimit": args.budget_usd},
        deadline=in_seconds(args.deadline_days * 86400),
    )
    shared.remember(args.state_dir, mission.mission_id, mission.group_id)
    print(f"Mission   {mission.mission_id}")
    print(f"Group     {mission.group_id}")
    print(f"Workflow  {mission.workflow_id}")
    shared.print_result(result)
    _print_links(args, mission.mission_id, mission.group_id)
    return 0


def _cooperation_limits(path: Path | None) -> CooperationLimits | None:
    """The limits in ``path``, checked before any Mission starts (None: the defaults)."""
    from mwp.core.group.cooperation_limits import CooperationLimits

    if path is None:
        return None
    try:
        return CooperationLimits.from_json(json.loads(path.read_text(encoding="utf-8")))
    except ValueError as exc:  # not JSON, or not valid limits
        raise shared.MissionCliError(f"--cooperation-limits {path}: {exc}") from None


async def _list(args: argparse.Namespace) -> int:
    client = await shared.connect_to(args)
    from mwp.client.missions import MissionClient

    missions = MissionClient(client, shared.organization_id(args.state_dir))
    for mission_id, group_id in shared.remembered(args.state_dir).items():
        view = await missions.mission(mission_id, group_id).view()
        print(f"{mission_id}  {view.get('state', '?'):<18} {view.get('objective', '')[:60]}")
    return 0


async def _show(args: argparse.Namespace) -> int:
    client = await shared.connect_to(args)
    view = await (await shared.mission_of(args, client)).view()
    if args.json:
        print(json.dumps(view, indent=2))
        return 0
    coordinator = view.get("coordinator", {})
    print(f"Mission      {view['missionId']}  ({view['state']}, revision {view['revision']})")
    print(f"Objective    {view['objective']}")
    print(f"Owner        {view['missionOwner']['id']}")
    print(
        f"Coordinator  {coordinator.get('agentId')} (epoch {coordinator.get('coordinatorEpoch')})"
    )
    print(f"Sequence     {view.get('sequence')}")
    items = view.get("workItems", [])
    print(f"WorkItems    {len(items)}")
    for item in items:
        owner = item.get("owner") or "-"
        print(f"  {item['workItemId']}  {item['state']:<10} rev {item['revision']:<3} {owner}")
    if view.get("submission"):
        submission = view["submission"]
        print(
            f"Submitted    revision {submission['missionRevision']}: "
            f"{len(submission['artifactHashes'])} Artifacts"
        )
    _print_links(args, view["missionId"], view["groupId"])
    return 0


def _print_links(args: argparse.Namespace, mission_id: str, group_id: str) -> None:
    from mwp.cli.ui_links import mission_links

    for line in mission_links(args.ui_url, args.namespace, mission_id, group_id).lines():
        print(line)


async def _send(args: argparse.Namespace) -> int:
    payload_text = args.payload
    if payload_text.startswith("@"):
        payload_text = Path(payload_text[1:]).read_text()
    from mwp.core.wire.strict_json import JsonSyntaxError, parse_text

    try:
        # The protocol's own parser: duplicate member names, NaN and Infinity are refused here,
        # not sent to be refused by the Authority (or accepted with one value silently kept).
        payload = parse_text(payload_text)
    except JsonSyntaxError as exc:
        raise shared.MissionCliError(f"--payload is not strict JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise shared.MissionCliError("--payload must be a JSON object")
    _require_known_kind(args.kind)
    identity = shared.signer(args.state_dir, args.actor)
    client = await shared.connect_to(args)
    mission = await shared.mission_of(args, client)
    result = await mission.send(
        identity,
        args.kind,
        payload,
        session_epoch=await shared.session_epoch(client, args.state_dir, identity),
        work_item_id=args.work_item,
        conversation_id=args.conversation,
        expected_revision=args.expected_revision,
        action_id=args.action_id,
        override_grant_id=args.override_grant,
    )
    shared.print_result(result)
    return 0


async def _grant_override(args: argparse.Namespace) -> int:
    from mwp.client.missions import in_seconds
    from mwp.client.override_grants import CooperationOverride

    _require_known_kind(args.kind)
    identity = shared.signer(args.state_dir, args.actor)
    beneficiary = shared.signer(args.state_dir, args.beneficiary).principal
    client = await shared.connect_to(args)
    mission = await shared.mission_of(args, client)
    grant = CooperationOverride(
        args.policy,
        beneficiary,
        args.kind,
        args.action_id,
        reason=args.reason,
        expires_at=in_seconds(args.expires_in),
    )
    epoch = await shared.session_epoch(client, args.state_dir, identity)
    grant_id, result = await mission.grant_cooperation_override(
        identity, grant, session_epoch=epoch
    )
    shared.print_result(result)
    print(f"grant {grant_id}: cite it with `mwp mission send ... --override-grant {grant_id}`")
    return 0


def _require_known_kind(kind: str) -> None:
    """Name a mistyped kind here: the Authority would only say the Command fails its schema."""
    import difflib

    from mwp.core.kinds import COMMAND_KINDS

    if kind in COMMAND_KINDS:
        return
    close = difflib.get_close_matches(kind, COMMAND_KINDS, n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    raise shared.MissionCliError(
        f"unknown Command kind {kind!r}{hint} (known: {', '.join(sorted(COMMAND_KINDS))})"
    )


async def _publish(args: argparse.Namespace) -> int:
    from mwp.client import utc_now
    from mwp.stores.artifacts import ArtifactStore, new_manifest, sign_manifest
    from mwp.stores.objects import open_store

    identity = shared.signer(args.state_dir, args.actor)
    client = await shared.connect_to(args)
    mission = await shared.mission_of(args, client)
    item = await mission.work_item(args.work_item)
    lease, owner = item.get("executionLease"), item.get("owner")
    if item.get("state") != "active" or not lease or not owner:
        raise shared.MissionCliError(
            f"the WorkItem is {item.get('state')}, not active under a lease"
        )
    if owner["agentId"] != identity.principal.id:
        raise shared.MissionCliError(
            f"the WorkItem's owner is {owner['agentId']}, not {args.actor}"
        )
    store = ArtifactStore(open_store(args.store or args.state_dir / "objects"))
    with args.file.open("rb") as handle:  # streamed: a large file is never held whole
        content = store.put_stream(iter(lambda: handle.read(1 << 20), b""))
    manifest = new_manifest(
        content,
        media_type=args.media_type,
        schema_uri=args.schema_uri,
        producer_agent_id=identity.principal.id,
        agent_card_version=owner["agentCardVersion"],
        capabilities=owner["capabilityPins"],
        mission_id=mission.mission_id,
        group_id=mission.group_id,
        work_item_id=args.work_item,
        created_at=utc_now(),
    )
    payload = {
        "ownershipEpoch": item["ownershipEpoch"],
        "leaseId": lease["leaseId"],
        "manifest": sign_manifest(manifest, identity.key_id, identity.key),
    }
    result = await mission.send(
        identity,
        "artifact.publish",
        payload,
        session_epoch=await shared.session_epoch(client, args.state_dir, identity),
        work_item_id=args.work_item,
    )
    print(f"Artifact  {content.content_hash} ({content.size_bytes} bytes, {content.uri})")
    shared.print_result(result)
    return 0


async def _decide_submission(args: argparse.Namespace, kind: str, extra: dict[str, Any]) -> int:
    identity = shared.signer(args.state_dir, args.actor)
    client = await shared.connect_to(args)
    mission = await shared.mission_of(args, client)
    view = await mission.view()
    submission = view.get("submission")
    if view.get("state") != "awaiting_approval" or not submission:
        raise shared.MissionCliError(f"the Mission is {view.get('state')}, not awaiting approval")
    payload: dict[str, Any] = {"missionRevision": submission["missionRevision"], **extra}
    if kind == "mission.approve":
        from mwp.client.review import approve_payload, signed_approval

        # The Command carries the Approval itself, signed by the approver (spec 7.3).
        comments = payload.pop("comments", "")
        payload = approve_payload(signed_approval(view, identity, comments=comments))
    elif kind == "mission.request_changes":
        from mwp.client.review import changes_payload, signed_approval

        reason = payload.pop("reason")
        decided = signed_approval(view, identity, comments=reason, decision="changes_requested")
        payload = changes_payload(decided)
    result = await mission.send(identity, kind, payload)
    shared.print_result(result)
    return 0


async def _approve(args: argparse.Namespace) -> int:
    extra = {"comments": args.comments} if args.comments else {}
    return await _decide_submission(args, "mission.approve", extra)


async def _request_changes(args: argparse.Namespace) -> int:
    return await _decide_submission(args, "mission.request_changes", {"reason": args.reason})


async def _watch(args: argparse.Namespace) -> int:
    from mwp.client.missions import MissionHandle

    remembered = shared.remembered(args.state_dir)
    if args.mission.startswith("urn:") and not any(m.startswith(args.mission) for m in remembered):
        # A Mission created elsewhere (another folder, a child Mission), named in full: it is
        # only queried, so its Group ID is not needed.
        mission_id, group_id = args.mission, ""
    else:
        mission_id = shared.unique_mission(args.state_dir, args.mission)
        group_id = remembered[mission_id]
    mission = MissionHandle(await shared.connect_to(args), mission_id, group_id)
    return await watch.follow(mission, once=args.once, interval=args.interval, where=args.address)
