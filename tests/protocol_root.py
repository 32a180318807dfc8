"""Where the protocol bundle is: MWP_PROTOCOL_ROOT, else ../shared/mwp-0.1 beside the repo."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def protocol_root() -> Path:
    configured = os.environ.get("MWP_PROTOCOL_ROOT")
    root = Path(configured) if configured else REPO.parent / "shared" / "mwp-0.1"
    if not root.is_absolute():
        root = (REPO / root).resolve()
    if not (root / "clauses.json").is_file():
        raise RuntimeError(f"protocol bundle not found at {root}; set MWP_PROTOCOL_ROOT")
    return root
