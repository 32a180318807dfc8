"""The Worker build ID the plugin gives: computed from the code that can change a decision,
kept when a Worker names its own or uses worker versioning."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

from mwp.workers.build_id import build_id
from mwp.workers.plugin import MwpPlugin


def _configured(**config: Any) -> Any:
    return MwpPlugin().configure_worker(config)  # type: ignore[arg-type]


def test_a_worker_without_a_build_id_gets_the_products() -> None:
    assert _configured(build_id=None)["build_id"] == build_id()
    assert _configured()["build_id"] == build_id()
    assert build_id().startswith("mwp-")


def test_a_build_id_given_or_worker_versioning_is_left_alone() -> None:
    assert _configured(build_id="mine")["build_id"] == "mine"
    assert not _configured(use_worker_versioning=True).get("build_id")
    assert not _configured(deployment_config=object()).get("build_id")


def test_the_id_changes_with_the_source_of_a_loaded_module_of_ones_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "startup_probe_agent.py"
    source.write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("startup_probe_agent")
    try:
        before = build_id.__wrapped__()
        assert build_id.__wrapped__() == before  # the same code, the same ID
        source.write_text("VALUE = 2\n")
        assert build_id.__wrapped__() != before
    finally:
        sys.modules.pop(module.__name__, None)
    assert build_id.__wrapped__() != before  # unloaded: no longer part of the code
