"""The door: what a Command may not carry, whatever its kind (spec 17.4, 18, 20).

These refusals came with rules revision ``RULES_DOOR`` (``api.py``). The Authority step applies
them only from that revision on, so a Group that accepted such a Command under the 0.1.0 rules
decides it the same way when it replays.

* An extension the Command marks critical and this Authority does not interpret
  (``UNKNOWN_CRITICAL_EXTENSION``): it implements no Extension Profile, and from rules
  ``RULES_OVERSIGHT`` on it interprets the bounded-offline-execution binding on
  ``work.checkpoint`` only (``offline_execution.py``). Noncritical ones pass
  uninterpreted. Extensions inside the core objects a payload carries (a Work Contract, an
  Artifact manifest) are addressed to those objects' readers, not to the Authority.
* A payload member its kind does not define, at any depth the kind reads member by member
  (``INVALID_COMMAND``, ``details.member`` naming the object, ``details.unknown`` the members).
  Deeper objects are core objects whose own strict schemas refuse unknown members.
* A cited Cooperation Override Grant, under rules ``RULES_DOOR`` to ``RULES_LEDGER``: they
  know no ``policy.grant_cooperation_override``, so no grant exists and every citation names
  an unknown one. A missing grant is missing policy eligibility (``AUTH_FORBIDDEN``), as for a
  Delegation Grant (``delegation.py``). From ``RULES_OVERSIGHT`` on grants exist and
  ``override_grant.py`` checks the citation instead.
"""

from __future__ import annotations

from mwp.core.errors import ErrorCode
from mwp.core.group.incoming import Incoming
from mwp.core.group.offline_execution import interprets
from mwp.core.group.payload import Members
from mwp.core.group.rejection import forbidden, invalid, reject

CLAUSES: tuple[str, ...] = ("MWP-EXT-002", "MWP-EXT-009", "MWP-EXT-010")


def check_extensions(cmd: Incoming, rules: int) -> None:
    unknown = [e for e in cmd.critical_extensions if not interprets(e, cmd.kind, rules)]
    if unknown:
        reject(
            ErrorCode.UNKNOWN_CRITICAL_EXTENSION,
            "the Command depends on an extension this Authority cannot interpret",
            extensions=unknown,
        )


def check_members(cmd: Incoming, declared: Members) -> None:
    found = declared.unknown(cmd.payload.data)
    if found is not None:
        path, unknown = found
        invalid(
            f"{path} has members {cmd.kind} does not define",
            member=path,
            unknown=[name[:200] for name in unknown[:20]],
        )


def check_override_grant(cmd: Incoming) -> None:
    if cmd.override_grant_id is not None:
        forbidden(
            "no Cooperation Override Grant has this ID",
            reason="unknown_override_grant",
            cooperationOverrideGrantId=cmd.override_grant_id,
        )
