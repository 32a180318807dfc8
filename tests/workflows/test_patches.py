"""Versioning: every patch ID in workflow code is declared once in ``mwp.workflows.patches``,
and a behaviour change shipped without its patch fails the replay of recorded histories."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.worker import Replayer

from mwp.workers.plugin import MwpPlugin
from mwp.workers.registry import ALL_WORKFLOWS
from mwp.workflows import patches
from tests.histories import RecordedHistory, production_replayer, recorded_histories
from tests.workflows.variants import DEMO_PATCH, ChangedBehindPatch, ChangedWithoutPatch

WORKFLOW_SOURCES = sorted(Path(patches.__file__).parent.glob("*.py"))
PATCH_CALLS = {"patched", "deprecate_patch"}


def _patch_calls(path: Path) -> Iterator[ast.Call]:
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in PATCH_CALLS
        ):
            yield node


def _named_patch(call: ast.Call) -> str:
    """``X`` of ``workflow.patched(patches.X.id)``; anything else is refused."""
    (argument,) = call.args
    assert (
        isinstance(argument, ast.Attribute)
        and argument.attr == "id"
        and isinstance(argument.value, ast.Attribute)
        and isinstance(argument.value.value, ast.Name)
        and argument.value.value.id == "patches"
    ), f"line {call.lineno}: name the patch as patches.NAME.id, never a bare string"
    return argument.value.attr


def test_every_patch_checked_in_workflow_code_is_declared_and_every_declared_one_is_checked() -> (
    None
):
    declared = {
        name: value for name, value in vars(patches).items() if isinstance(value, patches.Patch)
    }
    assert set(declared.values()) == set(patches.PATCHES)
    assert len({p.id for p in patches.PATCHES}) == len(patches.PATCHES), "a patch ID is reused"
    used = {_named_patch(call) for path in WORKFLOW_SOURCES for call in _patch_calls(path)}
    assert used == set(declared), "patches declared but unchecked, or checked but undeclared"
    for patch in patches.PATCHES:
        assert len(patch.added) == 10 and patch.added[4] == "-", patch


def test_a_bare_patch_id_is_refused() -> None:
    (call,) = _patch_calls_of("workflow.patched('my-change')")
    with pytest.raises(AssertionError, match="never a bare string"):
        _named_patch(call)


def _patch_calls_of(source: str) -> list[ast.Call]:
    return [
        n
        for n in ast.walk(ast.parse(source))
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
    ]


WORK_ITEM_HISTORIES = [r for r in recorded_histories() if r.workflow_type == "WorkItemWorkflow"]


def _replayer_with(variant: type) -> Replayer:
    others = [w for w in ALL_WORKFLOWS if w.__name__ != "WorkItemWorkflow"]
    return Replayer(workflows=[*others, variant], plugins=[MwpPlugin()])


@pytest.mark.parametrize("recorded", WORK_ITEM_HISTORIES, ids=lambda r: r.name)
async def test_a_behaviour_change_without_its_patch_fails_the_replay(
    recorded: RecordedHistory,
) -> None:
    result = await _replayer_with(ChangedWithoutPatch).replay_workflow(
        recorded.history, raise_on_replay_failure=False
    )
    assert isinstance(result.replay_failure, workflow.NondeterminismError)


@pytest.mark.parametrize("recorded", WORK_ITEM_HISTORIES, ids=lambda r: r.name)
async def test_the_same_change_behind_a_patch_replays(recorded: RecordedHistory) -> None:
    await _replayer_with(ChangedBehindPatch).replay_workflow(recorded.history)


def _has_marker(recorded: RecordedHistory, patch_id: str) -> bool:
    for event in recorded.history.events:
        details = event.marker_recorded_event_attributes.details
        if (
            "patch_data" in details
            and patch_id.encode() in details["patch_data"].SerializeToString()
        ):
            return True
    return False


async def _failures_with_check_removed(
    histories: list[RecordedHistory],
    patch_id: str,
    replayer: Replayer,
    monkeypatch: pytest.MonkeyPatch,
) -> list[BaseException | None]:
    """Replay ``histories`` as if the code took the patched branch unconditionally."""
    real = workflow.patched
    monkeypatch.setattr(workflow, "patched", lambda i: True if i == patch_id else real(i))
    results = [
        await replayer.replay_workflow(r.history, raise_on_replay_failure=False) for r in histories
    ]
    return [r.replay_failure for r in results]


async def test_removing_the_check_of_a_patch_fails_the_histories_from_before_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the test below does for every live patch, shown on the variant's patch."""
    assert not any(_has_marker(r, DEMO_PATCH) for r in WORK_ITEM_HISTORIES)
    failures = await _failures_with_check_removed(
        WORK_ITEM_HISTORIES, DEMO_PATCH, _replayer_with(ChangedBehindPatch), monkeypatch
    )
    assert all(isinstance(f, workflow.NondeterminismError) for f in failures)


LIVE = [p for p in patches.PATCHES if p.deprecated is None]


@pytest.mark.parametrize("patch", LIVE, ids=lambda p: p.id)
async def test_each_live_patch_is_needed_by_the_histories_from_before_it(
    patch: patches.Patch, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the patch's check removed (it always takes the new branch), some history recorded
    before the patch no longer replays: the patch guards a real change of commands. A patch
    whose change acts only on what no earlier run sent names the test that shows it instead,
    on a history recorded with the patch; that test must exist."""
    if patch.shown_by is not None:
        path, _, name = patch.shown_by.partition("::")
        source = Path(__file__).parents[2] / path
        defined = {
            n.name
            for n in ast.walk(ast.parse(source.read_text("utf-8")))
            if isinstance(n, ast.AsyncFunctionDef | ast.FunctionDef)
        }
        assert name in defined, f"{patch.id}: {patch.shown_by} does not exist"
        return
    before = [
        r
        for r in recorded_histories()
        if r.workflow_type == patch.workflow and not _has_marker(r, patch.id)
    ]
    assert before, f"no recorded {patch.workflow} history predates {patch.id}"
    failures = await _failures_with_check_removed(
        before, patch.id, production_replayer(), monkeypatch
    )
    assert any(f is not None for f in failures), f"{patch.id} changes nothing a history shows"
