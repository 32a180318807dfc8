"""`mwp mission` actions that drive a WorkItem from authorization to the MissionOwner's Approval.

    mwp mission authorize MISSION --as planner --goal "Write the report" [--criterion TEXT ...]
    mwp mission authorize MISSION --as planner --contract item.toml
    mwp mission offer MISSION ITEM --as planner --to writer
    mwp mission review MISSION ITEM --as planner (--accept | --reject --reason TEXT [--failed C])
    mwp mission submit MISSION --as planner [--summary TEXT]
    mwp mission wait MISSION [ITEM] [--for STATE]
    mwp mission artifact MISSION HASH [--output FILE]

Each prints what it signed and the Group's receipt, or why it was refused. A WorkItem is named
by its ID or a unique prefix of it within the Mission. ``authorize`` fills in a complete Work
Contract from a goal (the defaults are those of ``mwp.dev.scenario.work_contract``); a contract
file (TOML or JSON) may set the short keys below or any Work Contract member under
``[contract]``. ``offer`` pins the candidate's current Agent Card version and checks, before
sending, that the card declares every capability the contract requires (MWP-IDN-003); an
offer to an agent new to the Group carries a signed Context Package citing the WorkItem's
contract Events, unless ``--context-package`` names one the Group published.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mwp.cli import mission_context as shared

CLAUSES: tuple[str, ...] = ("MWP-IDN-003",)

if TYPE_CHECKING:
    from mwp.client import MwpClient
    from mwp.client.missions import MissionHandle

# The short keys of a contract file; anything else goes under [contract] as Work Contract members.
SHORT_KEYS = ("goal", "criteria", "capability", "deadline", "deadline_hours", "depends_on")
DEFAULT_DEADLINE_HOURS = 24.0
DEFAULT_OFFER_MINUTES = 60.0


def register(actions: Any, common: argparse.ArgumentParser) -> None:
    """Add the WorkItem actions to `mwp mission`'s ``actions``."""
    authorize = actions.add_parser(
        "authorize", parents=[common], help="work.authorize: a WorkItem with a full contract"
    )
    authorize.add_argument("mission")
    authorize.add_argument("--as", dest="actor", required=True, help="the Coordinator")
    authorize.add_argument("--goal", help="what the WorkItem must achieve")
    authorize.add_argument(
        "--criterion", action="append", default=[], help="an acceptance criterion (repeatable)"
    )
    authorize.add_argument("--capability", help="required capability ID[@VERSION]")
    authorize.add_argument("--deadline-hours", type=float, help="hours from now (default 24)")
    authorize.add_argument(
        "--depends-on", action="append", default=[], metavar="ITEM", help="a WorkItem it needs"
    )
    authorize.add_argument("--contract", type=Path, help="a contract file (.toml or .json)")
    authorize.add_argument("--work-item", help="the new WorkItem's ID (default: a new UUID URN)")
    authorize.set_defaults(handler=shared.handler(_authorize))

    offer = actions.add_parser(
        "offer", parents=[common], help="work.offer: offer a WorkItem to agents"
    )
    offer.add_argument("mission")
    offer.add_argument("work_item", metavar="ITEM", help="WorkItem ID or unique prefix")
    offer.add_argument("--as", dest="actor", required=True, help="the Coordinator")
    offer.add_argument(
        "--to", dest="candidates", action="append", required=True, help="an agent (repeatable)"
    )
    offer.add_argument("--expires-minutes", type=float, default=DEFAULT_OFFER_MINUTES)
    offer.add_argument(
        "--card-version",
        type=int,
        help="pin this Agent Card version instead of the current one (it must serve the offer)",
    )
    offer.add_argument(
        "--context-package",
        help="a Context Package the Group published, for a new Worker (default: the offer "
        "carries a new one, signed by the Coordinator, citing the WorkItem's contract Events)",
    )
    offer.set_defaults(handler=shared.handler(_offer))

    review = actions.add_parser(
        "review", parents=[common], help="show a submitted result; accept or reject it"
    )
    review.add_argument("mission")
    review.add_argument("work_item", metavar="ITEM", help="WorkItem ID or unique prefix")
    review.add_argument("--as", dest="actor", required=True, help="the Coordinator")
    verdict = review.add_mutually_exclusive_group()
    verdict.add_argument("--accept", action="store_true", help="work.accept_result")
    verdict.add_argument("--reject", action="store_true", help="work.fail with --reason")
    review.add_argument("--reason", help="why the result is rejected")
    review.add_argument(
        "--failed",
        action="append",
        default=[],
        metavar="CRITERION",
        help="an acceptance criterion the result fails (repeatable; default: those whose "
        "submitted Evidence did not pass)",
    )
    review.add_argument("--comments", help="review comments when accepting")
    review.set_defaults(handler=shared.handler(_review))

    submit = actions.add_parser(
        "submit",
        parents=[common],
        help="mission.submit_for_approval: every verified WorkItem's Artifacts",
    )
    submit.add_argument("mission")
    submit.add_argument("--as", dest="actor", required=True, help="the Coordinator")
    submit.add_argument("--summary", help="a summary for the MissionOwner")
    submit.set_defaults(handler=shared.handler(_submit))

    wait = actions.add_parser(
        "wait",
        parents=[common],
        help="wait until a WorkItem (or, without ITEM, the Mission) reaches a state",
    )
    wait.add_argument("mission")
    wait.add_argument(
        "work_item", metavar="ITEM", nargs="?", help="WorkItem ID or unique prefix (optional)"
    )
    wait.add_argument(
        "--for",
        dest="state",
        help="state (a WorkItem's: submitted; the Mission's: awaiting_approval)",
    )
    wait.add_argument("--timeout", type=float, default=120.0, help="seconds (120)")
    wait.set_defaults(handler=shared.handler(_wait))

    artifact = actions.add_parser(
        "artifact", parents=[common], help="read an Artifact (its content hash is checked)"
    )
    artifact.add_argument("mission")
    artifact.add_argument("content_hash", metavar="HASH", help="sha256:… (or a unique prefix)")
    artifact.add_argument("--output", "-o", type=Path, help="write here instead of stdout")
    artifact.add_argument(
        "--store", help="object store: folder or s3://bucket/prefix (default: <state>/objects)"
    )
    artifact.set_defaults(handler=shared.handler(_artifact))


# --- authorize ------------------------------------------------------------------------------


async def _authorize(args: argparse.Namespace) -> int:
    from mwp.client import new_id

    contract = contract_from(args)
    work_item_id = args.work_item or new_id()
    coordinator = shared.signer(args.state_dir, args.actor)
    client = await shared.connect_to(args)
    mission = await shared.mission_of(args, client)
    if args.depends_on or contract["dependencyWorkItemIds"]:
        items = await _items(mission)
        named = [_unique_item(items, d) for d in contract["dependencyWorkItemIds"]]
        contract["dependencyWorkItemIds"] = named + [
            _unique_item(items, d) for d in args.depends_on
        ]
    result = await mission.send(
        coordinator,
        "work.authorize",
        {"contract": contract},
        session_epoch=await shared.session_epoch(client, args.state_dir, coordinator),
        work_item_id=work_item_id,
    )
    print(f"WorkItem  {work_item_id}")
    print(f"Goal      {contract['goal']}")
    needs = ", ".join(f"{c['id']}@{c['version']}" for c in contract["requiredCapabilities"])
    print(f"Needs     {needs}; deadline {contract['deadline']}")
    shared.print_result(result)
    return 0


def contract_from(args: argparse.Namespace) -> dict[str, Any]:
    """A complete Work Contract from the flags and the optional contract file (flags win)."""
    from mwp.client.missions import in_seconds
    from mwp.dev.scenario import CAPABILITY, work_contract

    short, members = _contract_file(args.contract) if args.contract else ({}, {})
    goal = args.goal or short.get("goal")
    if not isinstance(goal, str) or not goal.strip():
        raise shared.MissionCliError("a WorkItem needs a goal: --goal TEXT, or goal in --contract")
    criteria = args.criterion or short.get("criteria") or ["The deliverable meets the goal."]
    if not isinstance(criteria, list) or not all(isinstance(c, str) and c for c in criteria):
        raise shared.MissionCliError("criteria must be a list of non-empty strings")
    capability = dict(CAPABILITY)
    if args.capability or short.get("capability"):
        capability = _capability(str(args.capability or short["capability"]))
    hours = args.deadline_hours or short.get("deadline_hours") or DEFAULT_DEADLINE_HOURS
    if not isinstance(hours, int | float) or hours <= 0:
        raise shared.MissionCliError("deadline_hours must be a positive number")
    deadline = short.get("deadline") or in_seconds(int(hours * 3600))
    depends = short.get("depends_on", [])
    if not isinstance(depends, list):
        raise shared.MissionCliError("depends_on must be a list of WorkItem IDs")
    contract = work_contract(
        goal, deadline=str(deadline), capability=capability, criteria=criteria, dependencies=depends
    )
    contract.update(members)
    return contract


def _contract_file(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The short keys and the ``contract`` table of a TOML or JSON contract file."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise shared.MissionCliError(f"cannot read {path}: {exc}") from None
    value = _parse_contract_text(path, text)
    if not isinstance(value, dict):
        raise shared.MissionCliError(f"{path}: the contract file must hold an object")
    members = value.pop("contract", {})
    if not isinstance(members, dict):
        raise shared.MissionCliError(f"{path}: 'contract' must be a table of Work Contract members")
    unknown = sorted(set(value) - set(SHORT_KEYS))
    if unknown:
        raise shared.MissionCliError(
            f"{path}: unknown keys {', '.join(unknown)} (short keys: {', '.join(SHORT_KEYS)}; "
            "put Work Contract members under [contract])"
        )
    return value, members


def _parse_contract_text(path: Path, text: str) -> Any:
    if path.suffix == ".toml":
        import tomllib

        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise shared.MissionCliError(f"{path}: not valid TOML: {exc}") from None
    from mwp.core.wire.strict_json import JsonSyntaxError, parse_text

    try:
        return parse_text(text)
    except JsonSyntaxError as exc:
        raise shared.MissionCliError(f"{path}: not strict JSON: {exc}") from None


def _capability(text: str) -> dict[str, str]:
    capability_id, _, version = text.partition("@")
    if not capability_id:
        raise shared.MissionCliError(f"capability {text!r}: expected ID[@VERSION]")
    return {"id": capability_id, "version": version or "1.0.0"}


# --- offer ----------------------------------------------------------------------------------


async def _offer(args: argparse.Namespace) -> int:
    from mwp.client.context_packages import needs_context_package
    from mwp.client.missions import in_seconds
    from mwp.dev.scenario import selection_basis

    coordinator = shared.signer(args.state_dir, args.actor)
    client = await shared.connect_to(args)
    mission = await shared.mission_of(args, client)
    view = await mission.view()
    work_item_id = _unique_item(view.get("workItems", []), args.work_item)
    item_view = await mission.work_item(work_item_id)
    required = item_view["contract"]["requiredCapabilities"]
    candidates: list[dict[str, Any]] = []
    for name in args.candidates:
        principal = shared.signer(args.state_dir, name).principal
        if principal.type != "agent":
            raise shared.MissionCliError(
                f"offers go to agents; {principal.id} is a {principal.type}"
            )
        agent_id = principal.id
        card_version, matches = await _card_matching(client, args.state_dir, agent_id, required)
        card_version = args.card_version or card_version
        basis = selection_basis(in_seconds(60), required[0])
        basis["requiredCapabilities"], basis["verifiedMatches"] = required, matches
        candidates.append(
            {"agentId": agent_id, "agentCardVersion": card_version, "selectionBasis": basis}
        )
    payload: dict[str, Any] = {
        "candidates": candidates,
        "expiresAt": in_seconds(int(args.expires_minutes * 60)),
    }
    if args.context_package:
        payload["contextPackageId"] = args.context_package
    elif needs_context_package(view, item_view, [c["agentId"] for c in candidates]):
        # The offer publishes the package a Worker new to the Group (or to the item) is handed.
        payload["contextPackage"] = await mission.offer_context_package(coordinator, work_item_id)
    result = await mission.send(
        coordinator,
        "work.offer",
        payload,
        session_epoch=await shared.session_epoch(client, args.state_dir, coordinator),
        work_item_id=work_item_id,
    )
    for candidate in candidates:
        print(
            f"Offered   {work_item_id} to {candidate['agentId']} "
            f"(Agent Card v{candidate['agentCardVersion']})"
        )
    shared.print_result(result)
    return 0


async def _card_matching(
    client: MwpClient, state_dir: Path, agent_id: str, required: list[dict[str, str]]
) -> tuple[int, list[dict[str, str]]]:
    """The agent's current Agent Card version and, per required capability, the version it
    declares: an offer pins both (MWP-IDN-003), so a card that cannot serve is named here."""
    card = await client.registry(shared.organization_id(state_dir)).agent_card(agent_id)
    if card is None:
        raise shared.MissionCliError(
            f"{agent_id} has no Agent Card: start it with `mwp agent run` "
            "(or register one with `mwp registry add-agent`)"
        )
    declared = {(c["id"], c["version"]) for c in card.get("capabilities", [])}
    matches, missing = [], []
    for need in required:
        served = [v for cap, v in declared if cap == need["id"] and compatible(v, need["version"])]
        if served:
            matches.append({"id": need["id"], "version": max(served, key=_version)})
        else:
            missing.append(f"{need['id']}@{need['version']}")
    if missing:
        offered = ", ".join(sorted(f"{c}@{v}" for c, v in declared)) or "nothing"
        raise shared.MissionCliError(
            f"{agent_id}'s Agent Card v{card['cardVersion']} does not serve "
            f"{', '.join(missing)} (it declares {offered})"
        )
    return int(card["cardVersion"]), matches


def compatible(served: str, required: str) -> bool:
    """Same major version, at least the required one (semantic versions)."""
    try:
        have, need = _version(served), _version(required)
    except ValueError:
        return served == required
    return have[0] == need[0] and have >= need


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("+", 1)[0].split("-", 1)[0].split("."))


# --- review, submit, artifact ---------------------------------------------------------------


async def _review(args: argparse.Namespace) -> int:
    from mwp.client.review import rejection_payload, review_record

    if args.reject and not args.reason:
        raise shared.MissionCliError("--reject needs --reason (it is recorded in work.failed)")
    coordinator = shared.signer(args.state_dir, args.actor)
    client = await shared.connect_to(args)
    mission = await shared.mission_of(args, client)
    work_item_id = _unique_item(await _items(mission), args.work_item)
    item = await mission.work_item(work_item_id)
    submission = item.get("submission")
    _print_submission(item, submission, item.get("submissionEvidence", []))
    if not (args.accept or args.reject):
        return 0
    if item.get("state") != "submitted" or not submission:
        raise shared.MissionCliError(f"the WorkItem is {item.get('state')}, not submitted")
    # The verdict is a review record citing, per criterion, the Evidence submitted for it.
    kind = "work.accept_result"
    payload: dict[str, Any] = {
        "comments": args.comments or "Evidence reviewed.",
        "review": review_record(item),
    }
    if args.reject:
        kind = "work.fail"
        payload = rejection_payload(item, args.reason, _failed_criteria(args, item))
    result = await mission.send(
        coordinator,
        kind,
        payload,
        session_epoch=await shared.session_epoch(client, args.state_dir, coordinator),
        work_item_id=work_item_id,
    )
    shared.print_result(result)
    if args.reject:
        print(f"Rejected: offer it again with `mwp mission offer {args.mission} {work_item_id}`")
    return 0


def _failed_criteria(args: argparse.Namespace, item: Mapping[str, Any]) -> dict[str, str]:
    """Criterion -> review result for a rejection: ``--failed``, else the criteria whose
    submitted Evidence did not pass."""
    known = [c["criterionId"] for c in item.get("contract", {}).get("acceptanceCriteria", [])]
    unknown = [c for c in args.failed if c not in known]
    if unknown:
        raise shared.MissionCliError(
            f"no acceptance criterion {', '.join(unknown)} (the contract has {', '.join(known)})"
        )
    failed = dict.fromkeys(args.failed, "failed")
    if not failed:
        for record in item.get("submissionEvidence", []):
            if record.get("result") in ("failed", "inconclusive"):
                failed.update(dict.fromkeys(record.get("criterionIds", []), record["result"]))
    if not failed:
        raise shared.MissionCliError(
            "name the criteria the result fails with --failed CRITERION "
            "(its Evidence reports every one passed)"
        )
    return failed


def _print_submission(
    item: Mapping[str, Any], submission: Mapping[str, Any] | None, evidence: list[Any]
) -> None:
    owner = (item.get("owner") or {}).get("agentId", "-")
    print(f"WorkItem  {item['workItemId']} ({item.get('state')}, owner {owner})")
    print(f"Goal      {item.get('contract', {}).get('goal', '')}")
    if not submission:
        print("Submitted nothing yet")
        return
    criteria = {c["criterionId"]: c for c in item.get("contract", {}).get("acceptanceCriteria", [])}
    for record in evidence:
        for criterion_id in record.get("criterionIds", []):
            text = criteria.get(criterion_id, {}).get("description", "")
            result = record.get("result", "-")
            print(f"  {criterion_id:<14} {result:<8} {text}  [{record['evidenceId']}]")
    for content_hash in submission.get("artifactHashes", []):
        print(f"  Artifact {content_hash}")


async def _submit(args: argparse.Namespace) -> int:
    coordinator = shared.signer(args.state_dir, args.actor)
    client = await shared.connect_to(args)
    mission = await shared.mission_of(args, client)
    verified = [i for i in await _items(mission) if i.get("state") == "verified"]
    if not verified:
        raise shared.MissionCliError("no WorkItem is verified yet (see `mwp mission review`)")
    hashes: list[str] = []
    for record in verified:
        item = await mission.work_item(record["workItemId"])
        for content_hash in (item.get("submission") or {}).get("artifactHashes", []):
            if content_hash not in hashes:
                hashes.append(content_hash)
    payload: dict[str, Any] = {"artifactHashes": hashes}
    if args.summary:
        payload["summary"] = args.summary
    result = await mission.send(
        coordinator,
        "mission.submit_for_approval",
        payload,
        session_epoch=await shared.session_epoch(client, args.state_dir, coordinator),
    )
    print(f"Submitted {len(hashes)} Artifacts of {len(verified)} verified WorkItems")
    shared.print_result(result)
    return 0


async def _wait(args: argparse.Namespace) -> int:
    """Poll the WorkItem until it is in ``--for``; a settled item that never will be is an
    error naming its state and, if it failed, why."""
    import asyncio
    import time

    from mwp.core.kinds import SETTLED_WORK_STATES, WORK_ITEM_STATES

    if args.work_item is None:
        return await _wait_mission(args)
    args.state = args.state or "submitted"
    if args.state not in WORK_ITEM_STATES:
        raise shared.MissionCliError(
            f"unknown WorkItem state {args.state!r} (states: {', '.join(WORK_ITEM_STATES)})"
        )
    client = await shared.connect_to(args)
    mission = await shared.mission_of(args, client)
    work_item_id = _unique_item(await _items(mission), args.work_item)
    deadline = time.monotonic() + args.timeout
    while True:
        item = await mission.work_item(work_item_id)
        state = item.get("state")
        if state == args.state:
            owner = (item.get("owner") or {}).get("agentId", "-")
            print(f"WorkItem  {work_item_id} is {state} (owner {owner})")
            return 0
        if state in SETTLED_WORK_STATES:
            failure = item.get("failure") or {}
            why = f": {failure.get('failureCode')} {failure.get('reason', '')}" if failure else ""
            raise shared.MissionCliError(
                f"the WorkItem is {state}, it will not be {args.state}{why}"
            )
        if time.monotonic() > deadline:
            raise shared.MissionCliError(
                f"the WorkItem is still {state} after {args.timeout:.0f} s "
                "(is its agent running? `mwp agent status AGENT_ID` shows its decisions)"
            )
        await asyncio.sleep(0.5)


async def _wait_mission(args: argparse.Namespace) -> int:
    """Poll the Mission until it is in ``--for``; one that closed otherwise is an error."""
    import asyncio
    import time

    from mwp.core.kinds import MISSION_STATES, TERMINAL_MISSION_STATES

    wanted = args.state or "awaiting_approval"
    if wanted not in MISSION_STATES:
        raise shared.MissionCliError(
            f"unknown Mission state {wanted!r} (states: {', '.join(MISSION_STATES)})"
        )
    client = await shared.connect_to(args)
    mission = await shared.mission_of(args, client)
    deadline = time.monotonic() + args.timeout
    while True:
        view = await mission.view()
        state = view.get("state")
        if state == wanted:
            print(f"Mission   {mission.mission_id} is {state} (revision {view.get('revision')})")
            return 0
        if state in TERMINAL_MISSION_STATES:
            raise shared.MissionCliError(f"the Mission is {state}, it will not be {wanted}")
        if time.monotonic() > deadline:
            raise shared.MissionCliError(
                f"the Mission is still {state} after {args.timeout:.0f} s (is its Coordinator "
                "running? `mwp coordinator run` prints what it decides)"
            )
        await asyncio.sleep(0.5)


async def _artifact(args: argparse.Namespace) -> int:
    import asyncio

    from mwp.stores.artifacts import ArtifactStore
    from mwp.stores.objects import open_store

    client = await shared.connect_to(args)
    mission = await shared.mission_of(args, client)
    published = [a["contentHash"] for a in (await mission.view()).get("artifacts", [])]
    matches = [h for h in published if shared.names(h, args.content_hash)]
    if len(matches) != 1:
        found = "no" if not matches else "several"
        raise shared.MissionCliError(
            f"{found} Artifacts of this Mission match {args.content_hash!r}"
        )
    store = ArtifactStore(open_store(args.store or args.state_dir / "objects"))
    data = await asyncio.to_thread(store.get, matches[0])  # raises if the bytes were altered
    if args.output:
        args.output.write_bytes(data)
        print(f"{matches[0]}: {len(data)} bytes (hash checked) → {args.output}")
    else:
        sys.stdout.buffer.write(data)
    return 0


# --- WorkItems by prefix --------------------------------------------------------------------


async def _items(mission: MissionHandle) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = (await mission.view()).get("workItems", [])
    return items


def _unique_item(items: list[dict[str, Any]], prefix: str) -> str:
    """The WorkItem of the Mission whose ID is ``prefix`` or starts with it."""
    ids: list[str] = [i["workItemId"] for i in items]
    matches = [i for i in ids if shared.names(i, prefix)]
    if len(matches) != 1:
        found = "no" if not matches else "several"
        raise shared.MissionCliError(
            f"{found} WorkItems of this Mission match {prefix!r} (see `mwp mission show`)"
        )
    return matches[0]
