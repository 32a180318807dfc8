"""`mwp log`: the signed Group Event log in an object store.

    mwp log verify GROUP [--store LOCATION] [--evidence FILE]
    mwp log rebuild GROUP --into DEST        (from Temporal workflow history alone)
    mwp log tail GROUP [--after SEQ] [--follow] [--restore] [--json]
    mwp log compact GROUP --through SEQ --key-name NAME
    mwp log archive GROUP --key-name NAME

``tail`` prints the verified Events after a sequence, in Group order (``--follow`` keeps
polling; a gap holds it). ``compact`` snapshots the Group through a sequence, signed with the
Group Authority's key, and moves those entries to the archive; ``archive`` writes the signed
final snapshot of a closed Group. The key is a named key file (``--key-name``) in the key
folder (``<state>/keys``, or ``--keys-dir``), as ``mwp registry`` writes them.

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
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from mwp.cli import defaults

EXIT_OK, EXIT_FAULT, EXIT_UNUSABLE = 0, 1, 2
T = TypeVar("T")
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
    _store_and_evidence(verify)
    verify.add_argument("--json", action="store_true", help="print the verdict as JSON")
    verify.set_defaults(handler=_verify)

    tail = actions.add_parser(
        "tail",
        help="print the verified Events after a sequence",
        description=(
            "Print a Group's Events after a sequence, each verified (signature and hash chain), "
            "in Group order, stopping before a gap. Exits 0 when every Event printed verified, "
            "1 on a fault or CURSOR_TOO_OLD, 2 when the store or the evidence cannot be used."
        ),
    )
    tail.add_argument("group", metavar="GROUP", help="the Group ID")
    tail.add_argument(
        "--after", type=int, default=0, metavar="SEQ", help="print Events after SEQ (default 0)"
    )
    tail.add_argument("--follow", action="store_true", help="keep polling for new Events")
    tail.add_argument(
        "--poll", type=float, default=1.0, metavar="SECONDS", help="polling interval (--follow)"
    )
    tail.add_argument(
        "--restore",
        action="store_true",
        help="when the log was compacted past SEQ, verify the snapshot and continue after it",
    )
    _store_and_evidence(tail)
    tail.add_argument("--json", action="store_true", help="print each signed Event as JSON")
    tail.set_defaults(handler=_tail)

    compact = actions.add_parser(
        "compact",
        help="snapshot a Group and move its older entries to the archive",
        description=(
            "Verify the Group's history through SEQ, write a signed Group Snapshot of its state "
            "there, copy the online entries up to SEQ to the archive and remove them from the "
            "online log (the last entry always stays online). Exits 0 when done, 1 when "
            "refused (the log does not verify, SEQ is out of range), 2 when unusable."
        ),
    )
    compact.add_argument("group", metavar="GROUP", help="the Group ID")
    compact.add_argument("--through", type=int, required=True, metavar="SEQ")
    _signing_key(compact)
    _store_and_evidence(compact)
    compact.add_argument("--json", action="store_true", help="print the result as JSON")
    compact.set_defaults(handler=_compact)

    archive = actions.add_parser(
        "archive",
        help="write the signed final snapshot of a closed Group and record its archival",
        description=(
            "Verify a closed Group's whole history, write its signed final snapshot (the "
            "Mission, WorkItems, decisions, approvals and Artifact references), then send the "
            "Group the archive Command, which records group.snapshot.created and "
            "group.archived; the Group then refuses every Command. Sign with the Group "
            "Authority's key (the default). The Command is accepted while the closed "
            "Mission's workflow still answers (its retention window). Deletes nothing. Exits "
            "0 when recorded, 1 when refused, 2 when unusable."
        ),
    )
    archive.add_argument("group", metavar="GROUP", help="the Group ID")
    archive.add_argument(
        "--allow-open",
        action="store_true",
        help="write the snapshot of a Group whose Mission is not closed (records nothing)",
    )
    archive.add_argument(
        "--snapshot-only",
        action="store_true",
        help="write the final snapshot without sending the archive Command",
    )
    _signing_key(archive)
    _store_and_evidence(archive)
    archive.add_argument("--json", action="store_true", help="print the reference as JSON")
    archive.set_defaults(handler=_archive)

    from mwp.cli.log_rebuild import add_rebuild_parser

    add_rebuild_parser(actions, os.environ.get(STORE_ENV) or DEFAULT_STORE)


def _store_and_evidence(parser: Any) -> None:
    parser.add_argument(
        "--store",
        default=None,
        help=f"folder or s3://bucket[/prefix] (default ${STORE_ENV}, else {DEFAULT_STORE})",
    )
    parser.add_argument(
        "--evidence",
        type=Path,
        help="Registry evidence JSON, or the output of `mwp registry show --json`",
    )
    parser.add_argument(
        "--authority", metavar="SERVICE_ID", help="require this acceptedBy service on every Event"
    )
    registry = parser.add_argument_group("evidence from the running registry (no --evidence)")
    registry.add_argument("--address", default=defaults.address(), help=defaults.address_help())
    registry.add_argument("--namespace", default="default", help="Temporal namespace")
    registry.add_argument("--state-dir", type=Path, default=Path(".mwp"), help="state folder")
    registry.add_argument("--org", help="Organization ID (default: from the state folder)")


def _signing_key(parser: Any) -> None:
    parser.add_argument(
        "--key-name",
        metavar="NAME",
        help="sign with key file NAME.json of the key folder (default: the Organization's "
        "Group Authority key, <state-dir>/authority-keys, as `mwp registry init` made it)",
    )
    parser.add_argument("--keys-dir", type=Path, help="the key folder (default: <state-dir>/keys)")


def _verify(args: argparse.Namespace) -> int:
    from mwp.log.group_log import GroupEventLog
    from mwp.stores.objects import ObjectStoreError, open_store

    location = _location(args)
    try:
        evidence = _evidence(args)
        log = GroupEventLog(open_store(location), args.group)
        verdict = log.verify_all(evidence, authority=_authority(args))
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
    from mwp.core.trust.registry import RegistryEvidence, RegistryEvidenceError

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

    organization_id = _organization(args, "no Registry evidence (pass --evidence FILE)")
    try:
        client = await connect(args.address, args.namespace)
        return await client.registry(organization_id).evidence_json()
    except ClientError as exc:
        raise LogCliError(str(exc)) from None


def _location(args: argparse.Namespace) -> str:
    return str(args.store or os.environ.get(STORE_ENV) or DEFAULT_STORE)


def _authority(args: argparse.Namespace) -> Any:
    from mwp.core.trust.registry import Principal

    return Principal("service", args.authority) if args.authority else None


def _identity(args: argparse.Namespace) -> Any:
    from mwp.client import ClientError, KeyStore

    if args.key_name is None:
        return _group_authority_identity(args)
    keys = KeyStore(args.keys_dir) if args.keys_dir else KeyStore.in_state_dir(args.state_dir)
    try:
        return keys.load(args.key_name)
    except (ClientError, OSError, ValueError, KeyError) as exc:
        raise LogCliError(f"cannot use key {args.key_name!r}: {exc}") from None


def _organization(args: argparse.Namespace, why: str) -> str:
    from mwp.client.state_dir import StateDirError, organization_id_of

    try:
        return organization_id_of(args.state_dir, args.org)
    except StateDirError as exc:
        raise LogCliError(f"{why}: {exc}") from None


def _group_authority_identity(args: argparse.Namespace) -> Any:
    from mwp.contracts.messages import group_authority
    from mwp.log.keys import AuthorityKeyring

    organization_id = _organization(args, "no --key-name")
    principal_id = group_authority(organization_id).id
    identity = AuthorityKeyring.in_state_dir(args.state_dir).get(principal_id)
    if identity is None:
        raise LogCliError(f"no Group Authority key of {organization_id} in {args.state_dir}")
    return identity


# --- tail -----------------------------------------------------------------------------------


def _tail(args: argparse.Namespace) -> int:
    from mwp.core.errors import MwpError
    from mwp.stores.objects import ObjectStoreError, open_store

    if args.after < 0 or args.poll <= 0:
        print("mwp log tail: --after >= 0 and --poll > 0", file=sys.stderr)
        return EXIT_UNUSABLE
    try:
        evidence = _evidence(args)
        store = open_store(_location(args))
        return asyncio.run(_follow(args, store, evidence))
    except KeyboardInterrupt:
        return EXIT_OK
    except MwpError as exc:
        print(f"mwp log tail: {exc}", file=sys.stderr)
        return EXIT_FAULT
    except (LogCliError, ObjectStoreError, OSError, ValueError) as exc:
        print(f"mwp log tail: {exc}", file=sys.stderr)
        return EXIT_UNUSABLE


async def _follow(args: argparse.Namespace, store: Any, evidence: Any) -> int:
    from mwp.core.errors import ErrorCode, MwpError
    from mwp.core.log.group_snapshot import SnapshotReference
    from mwp.log.delivery import subscribe

    after = await asyncio.to_thread(_anchor, store, args.group, args.after, evidence, args)
    subscription = subscribe(
        store,
        args.group,
        evidence,
        after=after,
        poll_interval=args.poll,
        authority=_authority(args),
        follow=args.follow,
    )
    while True:
        try:
            async for item in subscription:
                if args.json:
                    print(json.dumps(item.event, ensure_ascii=False, separators=(",", ":")))
                else:
                    event = item.event
                    print(f"{item.sequence} {item.kind} {item.event_id} {event['occurredAt']}")
                sys.stdout.flush()
            return EXIT_OK
        except MwpError as exc:
            if exc.code is not ErrorCode.CURSOR_TOO_OLD:
                raise
            try:
                reference = SnapshotReference.from_error(exc)
            except MwpError:
                raise exc from None
            if not args.restore:
                print(
                    f"mwp log tail: {exc.message}; signed snapshot {reference.key} through "
                    f"{reference.through_sequence} ({reference.snapshot_hash}); "
                    "pass --restore to continue after it",
                    file=sys.stderr,
                )
                return EXIT_FAULT
            restored, subscription = await subscription.recover(exc)
            print(
                f"# restored the verified snapshot through {restored.cursor.sequence} "
                f"({reference.snapshot_hash})",
                file=sys.stderr,
            )


def _anchor(store: Any, group_id: str, after: int, evidence: Any, args: argparse.Namespace) -> Any:
    """A Cursor at ``after``: the entry there (online or archived), its signature verified."""
    from mwp.core.log.cursor import Cursor
    from mwp.core.log.event_log import ChainVerifier
    from mwp.core.log.group_snapshot import archive_entry_key
    from mwp.log.group_log import GroupEventLog

    if after == 0:
        return Cursor.start(group_id)
    log = GroupEventLog(store, group_id)
    data = store.get(log.key(after)) or store.get(archive_entry_key(group_id, after))
    if data is None:
        raise LogCliError(f"no entry at sequence {after} to continue after")
    verifier = ChainVerifier(group_id, evidence, start_sequence=after, authority=_authority(args))
    fault = verifier.feed(data, key_sequence=after)
    if fault is not None:
        from mwp.log.delivery import DeliveryError

        raise DeliveryError(group_id, fault)
    head = verifier.verdict().head_hash
    return Cursor(group_id, after, head)


# --- compact and archive --------------------------------------------------------------------


def _signed_action(
    args: argparse.Namespace, name: str, action: Callable[[Any, Any, Any], T]
) -> T | int:
    """Run ``action(log, identity, evidence)`` for ``compact`` and ``archive``; a refusal is
    printed and becomes its exit code (an ``int``), anything else is the action's result."""
    from mwp.core.errors import MwpError
    from mwp.log.group_log import GroupEventLog
    from mwp.stores.objects import ObjectStoreError, open_store

    try:
        evidence = _evidence(args)
        identity = _identity(args)
        log = GroupEventLog(open_store(_location(args)), args.group)
        return action(log, identity, evidence)
    except MwpError as exc:
        print(f"mwp log {name}: {exc}", file=sys.stderr)
        return EXIT_FAULT
    except (LogCliError, ObjectStoreError, OSError, ValueError) as exc:
        print(f"mwp log {name}: {exc}", file=sys.stderr)
        return EXIT_UNUSABLE


def _compact(args: argparse.Namespace) -> int:
    from mwp.log.compaction import compact
    from mwp.workers.progress import Progress

    # Every entry through --through is verified, then each online one is removed.
    with Progress(f"compacting {args.group}", unit="steps", enabled=not args.json) as shown:
        result = _signed_action(
            args,
            "compact",
            lambda log, identity, evidence: compact(
                log,
                args.through,
                identity.key_id,
                identity.key,
                evidence=evidence,
                authority=_authority(args),
                progress=shown.report,
            ),
        )
    if isinstance(result, int):
        return result
    if args.json:
        print(
            json.dumps(
                {
                    "groupId": args.group,
                    "snapshot": result.snapshot.to_json(),
                    "headSigningHash": result.head_hash,
                    "archived": result.archived,
                    "removed": result.deleted,
                    "oldestOnlineSequence": result.oldest_online,
                }
            )
        )
    else:
        print(
            f"compacted through {result.snapshot.through_sequence}: snapshot "
            f"{result.snapshot.key} ({result.snapshot.snapshot_hash})"
        )
        print(
            f"archived {result.archived}, removed {result.deleted}; "
            f"the online log starts at {result.oldest_online}"
        )
    return EXIT_OK


def _archive(args: argparse.Namespace) -> int:
    from mwp.log.compaction import archive_group
    from mwp.workers.progress import Progress

    with Progress(f"verifying {args.group}", unit="entries", enabled=not args.json) as shown:
        reference = _signed_action(
            args,
            "archive",
            lambda log, identity, evidence: archive_group(
                log,
                identity.key_id,
                identity.key,
                evidence=evidence,
                authority=_authority(args),
                require_closed=not args.allow_open,
                progress=shown.report,
            ),
        )
    if isinstance(reference, int):
        return reference
    recorded: dict[str, Any] | None = None
    if not (args.allow_open or args.snapshot_only):
        outcome = _signed_action(
            args,
            "archive",
            lambda log, identity, evidence: asyncio.run(
                _record_archive(args, log, identity, reference)
            ),
        )
        if isinstance(outcome, int):
            print(
                f"mwp log archive: the final snapshot {reference.key} is stored; its archival "
                "is not recorded",
                file=sys.stderr,
            )
            return outcome
        recorded = outcome
    if args.json:
        result: dict[str, Any] = {"groupId": args.group, "snapshot": reference.to_json()}
        if recorded is not None:
            result["archived"] = recorded
        print(json.dumps(result))
    else:
        print(
            f"archived through {reference.through_sequence}: final snapshot {reference.key} "
            f"({reference.snapshot_hash})"
        )
        if recorded is not None:
            print(f"recorded group.archived at sequence {recorded['sequence']}")
    return EXIT_OK


async def _record_archive(
    args: argparse.Namespace, log: Any, identity: Any, reference: Any
) -> dict[str, Any]:
    """Send the Group its archive Command carrying the stored final snapshot; the Events."""
    from mwp.client import ClientError, connect
    from mwp.client.identity import wire_text
    from mwp.client.missions import MissionHandle
    from mwp.contracts.command_size import MAX_COMMAND_BYTES, command_payload_bytes
    from mwp.core.group.archive import GROUP_ARCHIVE_KIND, compact_snapshot
    from mwp.log.compaction import final_snapshot

    final = final_snapshot(log, reference)
    command = identity.command(
        GROUP_ARCHIVE_KIND, {"snapshot": final.document}, group_id=args.group
    )
    if command_payload_bytes(wire_text(command)) > MAX_COMMAND_BYTES:
        # A large Group's Event IDs do not fit: the Group derives them (rules from oversight).
        command = identity.command(
            GROUP_ARCHIVE_KIND, {"snapshot": compact_snapshot(final.document)}, group_id=args.group
        )
    try:
        client = await connect(args.address, args.namespace)
        result = await MissionHandle(client, final.mission_id, args.group).send_signed(command)
    except ClientError as exc:
        raise LogCliError(str(exc)) from None
    receipt = result["receipt"]  # group.archived is the Command's last Event
    return {
        "sequence": receipt["lastSequence"],
        "eventId": receipt["eventIds"][-1],
        "signingHash": receipt["signingHash"],
    }
