"""The Temporal UI at a glance, in a real headless browser: an approved Mission is listed
Completed and its failed WorkItem Failed, on the list pages of the links ``mwp.cli.ui_links``
builds (search-attribute queries).

Needs the system Chromium (Debian's ``chromium`` package) and the ``playwright`` package; the
browser is the system one, never a download of Playwright's own. The session's dev server
runs headless, so this module starts its own, with the UI.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

import pytest
from temporalio.client import WorkflowFailureError

if TYPE_CHECKING:
    from playwright.async_api import Page

from mwp.cli.ui_links import mission_links, missions_url
from mwp.client import MwpClient, connect
from mwp.dev.stack import BackgroundStack, StackConfig, free_port
from mwp.log.keys import AuthorityKeyring
from tests.integration import conftest
from tests.integration.missions_helper import event_of
from tests.integration.test_mission_completion import RETENTION, closing_mission, fail

CHROMIUM = os.environ.get("MWP_CHROMIUM") or shutil.which("chromium")

needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="no Chromium: apt-get install chromium (the Debian package)"
)


def test_links_quote_the_values_of_their_queries() -> None:
    links = mission_links("http://ui:8233/", "team a", 'urn:x:"q"', "urn:g")
    assert (
        links.mission
        == "http://ui:8233/namespaces/team%20a/workflows/mwp-mission%2Furn%3Ax%3A%22q%22"
    )
    query = parse_qs(urlsplit(links.everything).query)["query"]
    assert query == ['MissionId="urn:x:\\"q\\""']
    work_items = parse_qs(urlsplit(links.failed_work_items).query)["query"]
    assert work_items == [
        'WorkflowType="WorkItemWorkflow" AND MissionId="urn:x:\\"q\\"" AND WorkItemState="failed"'
    ]
    assert links.group is not None and "GroupId%3D%22urn%3Ag%22" in links.group
    assert len(links.lines()) == 4


@pytest.fixture(scope="module")
def ui_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackgroundStack]:
    config = StackConfig(
        state_dir=tmp_path_factory.mktemp("mwp-ui-stack"), port=free_port(), ui_port=free_port()
    )
    stack = BackgroundStack(config).start()
    try:
        yield stack
    finally:
        stack.stop()


async def shown(page: Page, text: str, timeout: float = 30.0) -> bool:
    """Whether ``text`` appears on the page within ``timeout`` seconds. The UI renders
    summaries and details (markdown) in frames of their own, so every frame is searched."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        for frame in page.frames:
            try:
                if await frame.get_by_text(text).count():
                    return True
            except Exception as error:  # the UI replaced that frame while it was searched
                if "detached" not in str(error):
                    raise
                continue
        await asyncio.sleep(0.2)
    return False


@needs_chromium
async def test_the_ui_lists_an_approved_mission_completed_and_a_failed_work_item_failed(
    ui_stack: BackgroundStack, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from playwright.async_api import async_playwright, expect

    # This stack's worker signs the Group Event log with keys of its own state folder.
    keyring = AuthorityKeyring.in_state_dir(ui_stack.stack.config.state_dir)
    monkeypatch.setitem(conftest._STACK, "keyring", keyring)
    client: MwpClient = await connect(ui_stack.address, ui_stack.namespace)
    rig = await closing_mission(client)
    verified = await rig.authorize("Write the report for the UI")
    failed = await rig.authorize("Fetch the sources for the UI")
    events = await rig.complete(verified, rig.crew.workers[0])
    await fail(rig, failed)
    hashes = event_of({"events": events}, "work.submitted")["payload"]["submission"][
        "artifactHashes"
    ]
    submitted = await rig.coordinate("mission.submit_for_approval", {"artifactHashes": hashes})
    assert event_of(submitted, "mission.submitted_for_approval")["payload"]["missionRevision"]
    await rig.approve()
    temporal = client.temporal
    await asyncio.wait_for(temporal.get_workflow_handle(rig.workflow_id).result(), RETENTION + 20)
    with pytest.raises(WorkflowFailureError):
        child = rig.mission.work_item_workflow_id(failed.work_item_id)
        await asyncio.wait_for(temporal.get_workflow_handle(child).result(), 10)

    assert ui_stack.ui_url is not None
    links = mission_links(
        ui_stack.ui_url, ui_stack.namespace, rig.mission.mission_id, rig.mission.group_id
    )
    screenshot = tmp_path / "temporal-ui.png"
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            page = await browser.new_page(viewport={"width": 1600, "height": 1000})
            # The failed WorkItem, among the Mission's WorkItems (state filter of the link).
            await page.goto(links.failed_work_items)
            row = page.get_by_role("row").filter(has_text=failed.work_item_id)
            await expect(row).to_contain_text("Failed", timeout=30_000)
            await expect(page.get_by_role("row").filter(has_text="Completed")).to_have_count(0)
            # The approved Mission, among this namespace's approved Missions.
            await page.goto(missions_url(ui_stack.ui_url, ui_stack.namespace, "approved"))
            row = page.get_by_role("row").filter(has_text=rig.mission.mission_id)
            await expect(row).to_contain_text("Completed", timeout=30_000)
            # Everything of the Mission: its workflow Completed, the two WorkItems'.
            await page.goto(links.everything)
            rows = page.get_by_role("row").filter(has_text=rig.mission.mission_id)
            await expect(rows).to_have_count(3, timeout=30_000)
            await expect(rows.filter(has_text="Failed")).to_have_count(1)
            await expect(rows.filter(has_text="Completed")).to_have_count(2)
            await page.screenshot(path=str(screenshot), full_page=True)
            # The Mission's own page: Completed; its summary names the objective and its
            # details hold the table of WorkItems.
            await page.goto(links.mission)
            await expect(page.get_by_text("Completed", exact=True).first).to_be_visible(
                timeout=30_000
            )
            await page.get_by_role("tab", name="User Metadata").click()
            assert await shown(page, "Mission: Deliver the quarterly report")
            assert await shown(page, "Fetch the sources for the UI")
            assert await shown(page, rig.crew.workers[0].principal.id)
            await page.screenshot(path=str(tmp_path / "temporal-ui-mission.png"), full_page=True)
        finally:
            await browser.close()
    assert screenshot.stat().st_size > 0
    print(f"screenshots: {screenshot} and {tmp_path / 'temporal-ui-mission.png'}")
