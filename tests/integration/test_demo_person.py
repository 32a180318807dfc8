"""`mwp demo --interactive`: the demo tells a person what to decide in the Approval console and
waits for it. Here the person is Debian's Chromium driven by Playwright, deciding in the real
console; the demo's side (`PersonAtConsole`) must return what the Group recorded, signed with
the owner's key, and nothing it recorded before it started waiting."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from mwp.client import MwpClient
from mwp.demo.human import PersonAtConsole
from tests.integration.test_console import console_of, key_file, waiting_mission
from tests.integration.test_temporal_ui import CHROMIUM, needs_chromium

__all__ = ["console_of"]  # the fixture, used by name


@needs_chromium
async def test_the_demo_waits_for_the_person_deciding_in_the_browser(
    mwp_client: MwpClient, console_of: Any, tmp_path: Path
) -> None:
    from playwright.async_api import async_playwright, expect

    rig, hashes = await waiting_mission(mwp_client)
    url = await console_of(rig)
    owner, mission = rig.crew.owner, rig.mission
    said: list[str] = []
    person = PersonAtConsole(url, str(key_file(owner, tmp_path)), said.append)
    assert url in said[0] and str(tmp_path) in said[0]
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        page = await browser.new_page()
        await page.goto(url)
        await page.set_input_files("#key-file", str(key_file(owner, tmp_path)))
        await page.click("#login-button")
        await expect(page.locator("#who-name")).to_have_text(owner.principal.id)
        # Straight to the Mission's page: the list queries the namespace's latest Missions,
        # which in a shared test server are many.
        mission_page = f"{url}#/missions/{mission.mission_id}"

        async def decided_in_the_browser(decision: str, button: str) -> Any:
            waiting = asyncio.create_task(person.decide(mission, decision))
            await asyncio.sleep(0.5)
            assert not waiting.done()  # nothing is decided until the person decides
            await page.goto(mission_page)
            await page.reload()  # the Mission as it is now
            if decision == "request_changes":
                assert "request changes" in said[-1]
                await page.fill("#reason", "Say which release this is.")
            await page.click(button)
            await expect(page.locator("#notice")).to_contain_text("mission.")
            return await asyncio.wait_for(waiting, 60)

        asked = await decided_in_the_browser("request_changes", "#request-changes")
        assert asked.events == ["mission.changes_requested"]
        assert asked.key_id == owner.key_id
        # Each wait takes only what the Group records after it began: a second change
        # request is not the first one again.
        await rig.coordinate("mission.submit_for_approval", {"artifactHashes": hashes})
        again = await decided_in_the_browser("request_changes", "#request-changes")
        assert again.events == asked.events and again.proof["eventId"] != asked.proof["eventId"]
        await rig.coordinate("mission.submit_for_approval", {"artifactHashes": hashes})
        approved = await decided_in_the_browser("approve", "#approve")
        await browser.close()
    assert approved.events == ["mission.approved"] and approved.key_id == owner.key_id
    assert approved.proof["eventId"] != asked.proof["eventId"]
    assert (await mission.view())["state"] == "approved"
