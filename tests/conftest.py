from __future__ import annotations

from pathlib import Path

import pytest

from tests.protocol_root import protocol_root


@pytest.fixture(scope="session")
def protocol_root_path() -> Path:
    return protocol_root()
