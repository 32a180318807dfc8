"""What a state folder (``.mwp`` by default) remembers for the CLI: the Organization's ID."""

from __future__ import annotations

import json
from pathlib import Path

ORGANIZATION_FILE = "organization.json"
# The key name of the registry service key `mwp registry init` creates (under keys/).
REGISTRY_KEY_NAME = "registry-service"


class StateDirError(LookupError):
    """The state folder lacks what was asked for (the message says how to fix it)."""


def organization_id_of(state_dir: Path, organization_id: str | None = None) -> str:
    """``organization_id``, else the one `mwp registry init` remembered in ``state_dir``."""
    if organization_id:
        return organization_id
    path = state_dir / ORGANIZATION_FILE
    try:
        value = json.loads(path.read_text())["organizationId"]
    except (OSError, ValueError, KeyError, TypeError):
        value = None
    if not isinstance(value, str):
        raise StateDirError(
            f"no Organization in {path}: pass --org or run `mwp registry init` first"
        )
    return value
