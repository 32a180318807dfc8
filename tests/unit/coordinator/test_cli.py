"""`mwp coordinator run` refuses what is not a Coordinator before it connects anywhere."""

from __future__ import annotations

import pytest

from mwp.cli import main


@pytest.mark.parametrize(
    ("target", "said"),
    [
        ("no-colon", "expected MODULE:ATTR"),
        ("mwp.nothing_here:coordinator", "cannot import module"),
        ("mwp.coordinator:nothing", "has no attribute"),
        ("mwp.coordinator:Plan", "not an mwp.coordinator.Coordinator declaration"),
    ],
)
def test_a_target_that_is_not_a_coordinator_is_refused(
    target: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["coordinator", "run", target]) == 1
    assert said in capsys.readouterr().err
