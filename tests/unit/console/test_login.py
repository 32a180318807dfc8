"""The console's login (mwp.console.login) and the decision it drafts (mwp.console.decisions),
without a server: a challenge answers once, within its time, with the human's own valid key."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from mwp.client import Identity
from mwp.console.decisions import draft, forwardable
from mwp.console.login import CHALLENGE_SECONDS, Logins
from mwp.core.errors import ErrorCode, MwpError
from mwp.core.trust.registry import Principal
from mwp.core.wire.jcs import canonicalize
from mwp.core.wire.values import b64url_encode
from tests.unit.gateway.test_hello import NOW, evidence


def human(name: str) -> Identity:
    return Identity.generate(
        Principal("human", f"urn:mwp:human:{name}"), valid_from="2026-01-01T00:00:00Z"
    )


ADA, BOB = human("ada"), human("bob")


def signature(identity: Identity, transcript: dict[str, Any]) -> str:
    return b64url_encode(identity.key.sign(canonicalize(transcript)))


def refused(call: Any) -> ErrorCode:
    with pytest.raises(MwpError) as caught:
        call()
    return caught.value.code


def test_a_signed_challenge_opens_a_session_once() -> None:
    logins = Logins("http://console/")
    transcript = logins.challenge(ADA.principal.id, ADA.key_id, NOW)
    assert transcript["console"] == "http://console/"

    token, login = logins.answer(
        transcript["challengeId"], signature(ADA, transcript), evidence(ADA), NOW
    )

    assert logins.who(token, NOW).principal == ADA.principal == login.principal
    again = refused(
        lambda: logins.answer(
            transcript["challengeId"], signature(ADA, transcript), evidence(ADA), NOW
        )
    )
    assert again == ErrorCode.AUTH_INVALID_SIGNATURE


@pytest.mark.parametrize(
    "how",
    ["another-key", "another-human", "late", "revoked", "unknown-key", "bad-encoding"],
)
def test_a_login_is_refused(how: str) -> None:
    logins = Logins("http://console/")
    transcript = logins.challenge(ADA.principal.id, ADA.key_id, NOW)
    signer, known, now, revoked = ADA, evidence(ADA, BOB), NOW, None
    if how == "another-key":
        signer = BOB
    elif how == "another-human":  # Bob's key, claimed as Ada's
        transcript = logins.challenge(ADA.principal.id, BOB.key_id, NOW)
        signer = BOB
    elif how == "late":
        now = NOW + timedelta(seconds=CHALLENGE_SECONDS)
    elif how == "revoked":
        revoked = {ADA.key_id: "2026-06-01T00:00:00Z"}
        known = evidence(ADA, revoked=revoked)
    elif how == "unknown-key":
        known = evidence(BOB)
    value = "not base64url!" if how == "bad-encoding" else signature(signer, transcript)

    code = refused(lambda: logins.answer(transcript["challengeId"], value, known, now))

    assert code == ErrorCode.AUTH_INVALID_SIGNATURE
    assert logins.sessions == {}


def test_a_session_ends_at_its_expiry_and_at_logout() -> None:
    logins = Logins("http://console/", session_seconds=60)
    transcript = logins.challenge(ADA.principal.id, ADA.key_id, NOW)
    token, _ = logins.answer(
        transcript["challengeId"], signature(ADA, transcript), evidence(ADA), NOW
    )
    later = NOW + timedelta(seconds=60)
    assert refused(lambda: logins.who(token, later)) == ErrorCode.AUTH_REQUIRED
    assert logins.who(token, NOW).principal == ADA.principal
    logins.logout(token)
    assert refused(lambda: logins.who(token, NOW)) == ErrorCode.AUTH_REQUIRED
    assert refused(lambda: logins.who(None, NOW)) == ErrorCode.AUTH_REQUIRED


VIEW = {
    "missionId": "urn:mwp:mission:m",
    "groupId": "urn:mwp:group:g",
    "state": "awaiting_approval",
    "submission": {"missionRevision": 3, "artifactHashes": ["sha256:" + "a" * 64]},
}


def test_the_draft_names_the_submitted_revision_and_artifacts() -> None:
    drafted = draft(VIEW, ADA.principal, "approve", 2)
    approval, command = drafted["approval"], drafted["command"]
    assert (approval["decision"], approval["missionRevision"]) == ("approved", 3)
    assert approval["artifactHashes"] == VIEW["submission"]["artifactHashes"]  # type: ignore[index]
    assert command["kind"] == "mission.approve"
    assert command["payload"]["artifactHashes"] == approval["artifactHashes"]
    assert (command["membershipEpoch"], command["groupId"]) == (2, "urn:mwp:group:g")
    changes = draft(VIEW, ADA.principal, "request_changes", 2, "Fix the title.")
    assert changes["approval"]["comments"] == "Fix the title."
    assert changes["command"]["kind"] == "mission.request_changes"
    assert "artifactHashes" not in changes["command"]["payload"]


def test_a_draft_is_refused_when_nothing_awaits_or_no_reason_is_given() -> None:
    active = {**VIEW, "state": "active", "submission": None}
    assert refused(lambda: draft(active, ADA.principal, "approve", 2)) == (
        ErrorCode.INVALID_STATE_TRANSITION
    )
    assert refused(lambda: draft(VIEW, ADA.principal, "request_changes", 2, "  ")) == (
        ErrorCode.INVALID_COMMAND
    )
    assert refused(lambda: draft(VIEW, ADA.principal, "delete", 2)) == ErrorCode.INVALID_COMMAND


def test_only_the_humans_own_signed_decision_on_this_mission_is_forwarded() -> None:
    command = ADA.sign(draft(VIEW, ADA.principal, "approve", 2)["command"], "command")
    assert forwardable(command, ADA.principal, VIEW) == command
    assert refused(lambda: forwardable(command, BOB.principal, VIEW)) == ErrorCode.AUTH_FORBIDDEN
    other = {**VIEW, "groupId": "urn:mwp:group:other"}
    assert refused(lambda: forwardable(command, ADA.principal, other)) == ErrorCode.INVALID_COMMAND
    wrong_kind = {**command, "kind": "work.cancel"}
    assert refused(lambda: forwardable(wrong_kind, ADA.principal, VIEW)) == (
        ErrorCode.INVALID_COMMAND
    )
    unsigned = {k: v for k, v in command.items() if k != "signature"}
    assert refused(lambda: forwardable(unsigned, ADA.principal, VIEW)) == (
        ErrorCode.AUTH_INVALID_SIGNATURE
    )
