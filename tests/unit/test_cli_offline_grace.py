"""``mwp agent run --offline-grace``: a grace outside the policy's bound, or not a number, is a
usage error before anything is imported or connected."""

from __future__ import annotations

import pytest

from mwp.cli import build_parser, main


@pytest.mark.parametrize("grace", ["301", "-1", "soon"])
def test_a_grace_outside_the_policy_is_a_usage_error(
    grace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["agent", "run", "no.such:agent", "--offline-grace", grace]) == 2
    assert "--offline-grace" in capsys.readouterr().err


def test_a_grace_within_the_policy_is_taken() -> None:
    args = build_parser().parse_args(["agent", "run", "m:a", "--offline-grace", "300"])
    assert args.offline_grace == 300
    assert build_parser().parse_args(["agent", "run", "m:a"]).offline_grace == 60
