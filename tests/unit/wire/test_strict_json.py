"""Text that cannot be UTF-8 and integers too long for Python get typed errors (spec 6.4, 17.4).

Both used to escape as untyped exceptions (``UnicodeEncodeError`` from the shell's encoding of
the Update text, ``ValueError`` from Python's int-parsing limit).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from mwp.core.errors import ErrorCode, MwpError
from mwp.core.trust.signed_document import VerificationError, verify
from mwp.core.wire.jcs import JcsDataModelError, canonicalize
from mwp.core.wire.strict_json import OutOfRangeNumber, encode_wire_text, parse_bytes
from tests.unit.group.harness import W1, Harness
from tests.unit.group.signing import EVIDENCE, signed, wire


def _command_text(text: str) -> str:
    """A signed Command's JSON text whose payload holds ``text`` raw, unescaped."""
    command = Harness().command(W1, "message.post", {"note": "PLACEHOLDER"}, membershipEpoch=1)
    document = signed(command)
    return canonicalize(document).decode("utf-8").replace("PLACEHOLDER", text)


def test_text_encodes_to_its_utf8_bytes() -> None:
    text = '{"a": "Résumé 東京 🚀", "b": "\\ud83d\\ude80"}'
    assert encode_wire_text(text) == text.encode("utf-8")


@pytest.mark.parametrize("surrogate", ["\ud800", "\udfff", "\ude80\ud83d", "x\udc00y"])
def test_a_lone_surrogate_in_the_text_is_a_protocol_violation_at_parse(surrogate: str) -> None:
    with pytest.raises(MwpError) as raised:
        encode_wire_text(_command_text(surrogate))
    assert raised.value.code == ErrorCode.PROTOCOL_VIOLATION
    assert raised.value.diagnostic is not None and raised.value.diagnostic.stage == "parse"


def test_a_surrogate_spelled_as_an_escape_parses_and_fails_canonicalization() -> None:
    data = encode_wire_text(_command_text("\\ud800"))
    with pytest.raises(VerificationError) as raised:
        verify(data, "command", EVIDENCE)
    assert (raised.value.code, raised.value.stage) == (
        ErrorCode.PROTOCOL_VIOLATION,
        "canonicalization",
    )


@pytest.fixture(params=[0, 640, 4300])
def int_limit(request: pytest.FixtureRequest) -> Iterator[None]:
    """Python's process-wide int-parsing limit (0: unlimited) must not change the verdict."""
    before = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(request.param)
    yield
    sys.set_int_max_str_digits(before)


@pytest.mark.usefixtures("int_limit")
@pytest.mark.parametrize("digits", [4301, 5000, 100_000])
def test_an_integer_too_long_for_int_is_out_of_range(digits: int) -> None:
    for sign in ("", "-"):
        value = parse_bytes(f'{{"n": {sign}{"9" * digits}}}'.encode())
        assert isinstance(value["n"], OutOfRangeNumber)
        assert value["n"].text == sign + "9" * digits
        with pytest.raises(JcsDataModelError):
            canonicalize(value)


def test_long_integers_within_the_limit_stay_integers() -> None:
    assert parse_bytes(b'{"n": 12}') == {"n": 12}
    value = parse_bytes(b'{"n": -' + b"7" * 4300 + b"}")
    assert type(value["n"]) is int
    with pytest.raises(JcsDataModelError):  # far outside binary64 all the same
        canonicalize(value)


@pytest.mark.parametrize(
    ("member", "code", "stage"),
    [
        ("payload", ErrorCode.PROTOCOL_VIOLATION, "canonicalization"),
        ("expectedRevision", ErrorCode.SCHEMA_VALIDATION_FAILED, "schema"),
    ],
)
def test_a_signed_command_with_a_huge_integer_is_refused_at_its_stage(
    member: str, code: ErrorCode, stage: str
) -> None:
    command = Harness().command(W1, "message.post", {"n": 1}, membershipEpoch=1, expectedRevision=1)
    data = wire(command)
    huge = b"1" * 5000
    target = b'"n":1' if member == "payload" else b'"expectedRevision":1'
    assert target in data
    with pytest.raises(VerificationError) as raised:
        verify(data.replace(target, target[:-1] + huge), "command", EVIDENCE)
    assert (raised.value.code, raised.value.stage) == (code, stage)
