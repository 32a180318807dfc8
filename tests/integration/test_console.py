"""The human Approval console in a real headless browser (Debian's Chromium, driven by
Playwright): a MissionOwner logs in with their own key file, sees their Mission waiting,
reads its WorkItems' Evidence per criterion, opens an Artifact (its hash checked in the
browser), requests changes, and approves the revised Mission; each decision is a Command
their browser signed. Without a browser: what the console refuses, typed, changing nothing."""

from __future__ import annotations

import asyncio
import copy
import json
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from mwp.client import Identity, MwpClient, new_id
from mwp.console.server import HEADER, Console
from mwp.core.errors import ErrorCode
from mwp.core.trust.registry import Principal
from mwp.core.trust.signed_document import signing_hash
from mwp.dev.scenario import result_content
from mwp.stores.artifacts import ArtifactStore
from mwp.stores.objects import open_store
from tests.integration.conftest import stack_log_location
from tests.integration.missions_helper import MissionRig, event_of, new_mission
from tests.integration.test_temporal_ui import CHROMIUM, needs_chromium


async def waiting_mission(client: MwpClient) -> tuple[MissionRig, list[str]]:
    """A Mission awaiting its owner's Approval, its result Artifact's bytes in the store."""
    rig = await new_mission(client)
    item = await rig.authorize("Write the release notes")
    store = ArtifactStore(open_store(stack_log_location()))
    store.put(result_content(item.work_item_id, item.contract["goal"]))
    events = await rig.complete(item, rig.crew.workers[0])
    hashes: list[str] = event_of({"events": events}, "work.submitted")["payload"]["submission"][
        "artifactHashes"
    ]
    await rig.coordinate("mission.submit_for_approval", {"artifactHashes": hashes})
    return rig, hashes


@pytest.fixture
async def console_of(mwp_client: MwpClient) -> AsyncIterator[Any]:
    consoles: list[Any] = []

    async def start(rig: MissionRig) -> str:
        console = Console(
            mwp_client,
            lambda: rig.crew.organization.organization_id,
            open_store(stack_log_location()),
        )
        context = console.listening()
        url = await context.__aenter__()
        consoles.append(context)
        return url

    yield start
    for context in consoles:
        await context.__aexit__(None, None, None)


def key_file(identity: Identity, folder: Path) -> Path:
    path = folder / f"{identity.principal.id.rsplit(':', 1)[-1]}.json"
    path.write_text(json.dumps(identity.to_key_file()))
    return path


@needs_chromium
async def test_an_owner_requests_changes_then_approves_in_the_browser(
    mwp_client: MwpClient, console_of: Any, tmp_path: Path
) -> None:
    from playwright.async_api import async_playwright, expect

    rig, hashes = await waiting_mission(mwp_client)
    url = await console_of(rig)
    owner = rig.crew.owner
    mission_id = rig.mission.mission_id
    first = (await rig.mission.view())["submission"]["missionRevision"]
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        page = await browser.new_page()
        await page.goto(url)

        await page.set_input_files("#key-file", str(key_file(owner, tmp_path)))
        await page.click("#login-button")
        await expect(page.locator("#who-name")).to_have_text(owner.principal.id)
        row = page.locator(f'tr[data-mission-id="{mission_id}"]')
        await expect(row).to_contain_text("awaiting_approval")
        await row.locator("a").click()

        # The exact revision, each criterion with the Evidence mapped to it, the Artifacts.
        await expect(page.locator("#submission-facts")).to_contain_text(
            f"Revision {first}, 1 Artifacts"
        )
        (listed,) = (await rig.mission.view())["workItems"]
        item = await rig.mission.work_item(listed["workItemId"])
        assert item["submissionEvidence"]
        for evidence in item["submissionEvidence"]:
            (criterion,) = evidence["criterionIds"]
            shown = page.locator(
                f'[data-criterion-id="{criterion}"] [data-evidence-id="{evidence["evidenceId"]}"]'
            )
            await expect(shown).to_contain_text("passed")
        artifact = page.locator(f'tr[data-content-hash="{hashes[0]}"]')
        await artifact.locator("button").click()
        await expect(page.locator("#viewer-check")).to_have_text(
            f"Hash verified in your browser: {hashes[0]}"
        )
        await expect(page.locator("#viewer-text")).to_contain_text("Write the release notes")

        await page.fill("#reason", "Name the owner of each change.")
        await page.click("#request-changes")
        await expect(page.locator("#notice")).to_contain_text("mission.changes_requested")
        view = await rig.mission.view()
        assert view["state"] == "active"
        changes = view["approval"]
        assert changes["decision"] == "changes_requested"
        assert changes["comments"] == "Name the owner of each change."
        assert changes["signature"]["keyId"] == owner.key_id

        # The Coordinator submits the revised Mission; the owner approves it.
        await rig.coordinate("mission.submit_for_approval", {"artifactHashes": hashes})
        second = (await rig.mission.view())["submission"]["missionRevision"]
        assert second > first
        # A reload keeps the login and the key the browser imported (not the key file).
        await page.reload()
        await expect(page.locator("#who-name")).to_have_text(owner.principal.id)
        await page.click("text=← All Missions")
        await expect(row).to_contain_text("awaiting_approval")
        await row.locator("a").click()
        await expect(page.locator("#submission-facts")).to_contain_text(f"Revision {second},")
        await page.click("#approve")
        await expect(page.locator("#notice")).to_contain_text("mission.approved")
        await expect(page.locator("#decided-text")).to_contain_text("approved by")
        # Logging out forgets the key: logged in again without the file, nothing can sign.
        await page.click("#logout")
        await expect(page.locator("#login")).to_be_visible()
        kept = await page.evaluate(
            """() => new Promise((done) => {
                 const o = indexedDB.open("mwp-console", 1);
                 o.onsuccess = () => {
                   const r = o.result.transaction("keys").objectStore("keys").get("current");
                   r.onsuccess = () => done(r.result === undefined ? "none" : "kept");
                 };
               })"""
        )
        assert kept == "none"
        await browser.close()

    view = await rig.mission.view()
    assert view["state"] == "approved"
    approval = view["approval"]
    assert (approval["decision"], approval["missionRevision"]) == ("approved", second)
    assert approval["approver"] == owner.principal.to_json()
    # The Group Event log holds the decisions, signed and verified like every Event.
    log, through = await rig.verified_log()
    kinds = [e.event["kind"] for e in log.read(0, through)]
    assert kinds[-1] == "mission.approved" and "mission.changes_requested" in kinds


async def _post(session: aiohttp.ClientSession, url: str, body: Any, **headers: str) -> Any:
    async with session.post(url, json=body, headers={HEADER: "1", **headers}) as response:
        return response.status, await response.json()


def _code(answer: Any) -> str:
    return str(answer[1]["error"]["code"])


async def _log_in(session: aiohttp.ClientSession, url: str, identity: Identity) -> Any:
    from mwp.core.wire.jcs import canonicalize
    from mwp.core.wire.values import b64url_encode

    principal = identity.principal
    _, challenge = await _post(
        session, url + "api/login/challenge", {"humanId": principal.id, "keyId": identity.key_id}
    )
    signature = b64url_encode(identity.key.sign(canonicalize(challenge)))
    return await _post(
        session,
        url + "api/login",
        {"challengeId": challenge["challengeId"], "signature": signature},
    )


async def test_the_console_refuses_strangers_forgeries_and_other_missions(
    mwp_client: MwpClient, console_of: Any
) -> None:
    rig, hashes = await waiting_mission(mwp_client)
    url = await console_of(rig)
    mission_id = rig.mission.mission_id
    before = await rig.state()
    stranger = Identity.generate(Principal("human", f"urn:mwp:human:stranger-{new_id()[-8:]}"))
    await rig.crew.organization.registry.register_binding(stranger)

    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as anonymous:
        async with anonymous.get(url + "api/missions") as response:
            assert response.status == 401
            assert (await response.json())["error"]["code"] == ErrorCode.AUTH_REQUIRED.value
        # A key the human does not hold: signed by another key, the login is refused.
        owner = rig.crew.owner
        impostor = Identity(owner.principal, owner.key_id, stranger.key, owner.valid_from)
        refused = await _log_in(anonymous, url, impostor)
        assert refused[0] == 403 and _code(refused) == ErrorCode.AUTH_INVALID_SIGNATURE.value
        # A challenge answers once.
        _, challenge = await _post(
            anonymous,
            url + "api/login/challenge",
            {"humanId": owner.principal.id, "keyId": owner.key_id},
        )
        from mwp.core.wire.jcs import canonicalize
        from mwp.core.wire.values import b64url_encode

        answer = {
            "challengeId": challenge["challengeId"],
            "signature": b64url_encode(owner.key.sign(canonicalize(challenge))),
        }
        assert (await _post(anonymous, url + "api/login", answer))[0] == 200
        again = await _post(anonymous, url + "api/login", answer)
        assert _code(again) == ErrorCode.AUTH_INVALID_SIGNATURE.value

    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as session:
        assert (await _log_in(session, url, stranger))[0] == 200
        async with session.get(url + "api/missions") as response:
            body = await response.json()
            assert "missions" in body, body
            listed = body["missions"]
        assert mission_id not in [m["missionId"] for m in listed]
        for path in (
            f"api/missions/{mission_id}",
            f"api/missions/{mission_id}/artifacts/{hashes[0]}",
        ):
            async with session.get(url + path) as response:
                assert response.status == 404
                assert (await response.json())["error"]["code"] == ErrorCode.GROUP_NOT_FOUND.value

    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as session:
        assert (await _log_in(session, url, rig.crew.owner))[0] == 200
        base = f"{url}api/missions/{mission_id}"
        # A request a cross-site form could send (no console header) changes nothing.
        async with session.post(base + "/drafts", json={"decision": "approve"}) as response:
            assert response.status == 403
        _, drafted = await _post(session, base + "/drafts", {"decision": "approve"})
        assert _code(await _post(session, base + "/drafts", {"decision": "request_changes"})) == (
            ErrorCode.INVALID_COMMAND.value  # a change request needs its reason
        )
        owner = rig.crew.owner
        approval = owner.sign(drafted["approval"], "approval")
        command = {
            **drafted["command"],
            "payload": {**drafted["command"]["payload"], "approval": approval},
        }
        by_stranger = stranger.sign({**command, "actor": stranger.principal.to_json()}, "command")
        assert _code(await _post(session, base + "/decisions", {"command": by_stranger})) == (
            ErrorCode.AUTH_FORBIDDEN.value
        )
        tampered = copy.deepcopy(owner.sign(command, "command"))
        tampered["payload"]["approval"]["comments"] = "altered after signing"
        assert _code(await _post(session, base + "/decisions", {"command": tampered})) == (
            ErrorCode.AUTH_INVALID_SIGNATURE.value
        )
        unsigned = {k: v for k, v in command.items() if k != "signature"}
        assert _code(await _post(session, base + "/decisions", {"command": unsigned})) == (
            ErrorCode.AUTH_INVALID_SIGNATURE.value
        )
        assert await rig.state() == before
        # The Artifact is served sandboxed, as text, with its content hash.
        async with session.get(f"{base}/artifacts/{hashes[0]}") as response:
            assert response.headers["Content-Security-Policy"].startswith("sandbox")
            assert response.headers["X-MWP-Content-Hash"] == hashes[0]
            assert response.content_type == "text/plain"
        # The owner's own signed decision goes through, once.
        signed = owner.sign(command, "command")
        status, accepted = await _post(session, base + "/decisions", {"command": signed})
        assert status == 200 and accepted["events"] == ["mission.approved"]
        assert accepted["receipt"]["signingHash"] == signing_hash(signed)
        assert (await rig.mission.view())["state"] == "approved"


async def test_mwp_console_serves_the_state_folders_organization_and_stops_on_sigint(
    temporal_stack: Any, mwp_client: MwpClient, tmp_path: Path
) -> None:
    from mwp.client.state_dir import ORGANIZATION_FILE
    from mwp.dev.stack import free_port

    rig, _ = await waiting_mission(mwp_client)
    state = tmp_path / "state"
    state.mkdir()
    (state / ORGANIZATION_FILE).write_text(
        json.dumps({"organizationId": rig.crew.organization.organization_id})
    )
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "mwp",
        "console",
        "--address",
        temporal_stack.address,
        "--namespace",
        temporal_stack.namespace,
        "--state-dir",
        str(state),
        "--store",
        stack_log_location(),
        "--listen",
        f"127.0.0.1:{port}",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), 30)
        url = f"http://127.0.0.1:{port}/"
        assert line.decode().startswith(f"Approval console on {url}"), line
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as session:
            async with session.get(url) as response:
                assert "Approval console" in await response.text()
            assert (await _log_in(session, url, rig.crew.owner))[0] == 200
            async with session.get(url + "api/missions") as response:
                listed = (await response.json())["missions"]
        assert [m["missionId"] for m in listed] == [rig.mission.mission_id]
        assert listed[0]["awaitingApproval"] is True
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
        code = await asyncio.wait_for(process.wait(), 15)
    assert code == 0


def test_mwp_console_refuses_a_listen_address_that_is_not_host_port() -> None:
    from mwp.cli import main

    assert main(["console", "--listen", "7480"]) == 2
