"""RFC 8785 canonical bytes and the strict parser (spec 2, 17.4)."""

from __future__ import annotations

import json
import math
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mwp.core.wire import jcs
from mwp.core.wire.jcs import JcsDataModelError, canonicalize
from mwp.core.wire.strict_json import JsonSyntaxError, OutOfRangeNumber, parse_bytes

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=30,
)


def _reordered(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _reordered(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reordered(v) for v in value]
    return value


@settings(max_examples=300)
@given(json_values)
def test_member_order_does_not_change_canonical_bytes(value: Any) -> None:
    assert canonicalize(_reordered(value)) == canonicalize(value)


@settings(max_examples=300)
@given(json_values)
def test_canonical_bytes_round_trip(value: Any) -> None:
    data = canonicalize(value)
    reparsed = parse_bytes(data)
    assert canonicalize(reparsed) == data


@settings(max_examples=500)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_numbers_round_trip_to_the_same_binary64(number: float) -> None:
    text = canonicalize(number).decode()
    assert struct.pack(">d", float(text)) == struct.pack(">d", number + 0.0)


@pytest.mark.parametrize(
    ("number", "text"),
    [
        (0.0, "0"),
        (-0.0, "0"),
        (1.0, "1"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (1e-6, "0.000001"),
        (1e-7, "1e-7"),
        (5e-324, "5e-324"),
        (-1.5, "-1.5"),
        (333333333.33333329, "333333333.3333333"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
    ],
)
def test_ecmascript_number_form(number: float, text: str) -> None:
    assert canonicalize(number) == text.encode()


def test_large_integer_is_rounded_to_binary64() -> None:
    assert canonicalize(2**53 + 1) == b"9007199254740992"


def test_sorting_uses_utf16_code_units() -> None:
    # U+1F600 (surrogates D83D DE00) sorts before U+FB33 in UTF-16, after it in code points.
    value = {"\ufb33": 1, "\U0001f600": 2, "a": 3}
    assert canonicalize(value) == '{"a":3,"\U0001f600":2,"\ufb33":1}'.encode()


def test_control_characters_escape_as_ecmascript_does() -> None:
    assert canonicalize('\u0001\n"\\\u007f') == b'"\\u0001\\n\\"\\\\\x7f"'


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan, 10**400])
def test_values_outside_finite_binary64_are_rejected(bad: Any) -> None:
    with pytest.raises(JcsDataModelError):
        canonicalize({"n": bad})


def test_unpaired_surrogate_is_rejected() -> None:
    with pytest.raises(JcsDataModelError):
        canonicalize({"s": json.loads('"\\ud800"')})


def test_out_of_range_number_parses_then_fails_canonicalization() -> None:
    value = parse_bytes(b'{"n": 1e400}')
    assert isinstance(value["n"], OutOfRangeNumber)
    assert value["n"].text == "1e400"
    with pytest.raises(JcsDataModelError):
        canonicalize(value)


@pytest.mark.parametrize(
    "data",
    [
        b"\xef\xbb\xbf{}",
        b'{"a": "\xff"}',
        b'{"a": 1} x',
        b'{"a": 1}{"b": 2}',
        b'{"a": 1, "a": 2}',
        b'{"a": {"b": 1, "b": 1}}',
        b'{"a": NaN}',
        b'{"a": Infinity}',
        b"",
        b'{"a": "\xed\xa0\x80"}',
    ],
)
def test_strict_parser_rejects(data: bytes) -> None:
    with pytest.raises(JsonSyntaxError):
        parse_bytes(data)


def test_strict_parser_accepts_surrounding_whitespace() -> None:
    assert parse_bytes(b' \n{"a": [1, 2.5, "x"]}\r\n') == {"a": [1, 2.5, "x"]}


def test_rfc8785_official_vector(protocol_root_path: Any) -> None:
    folder = protocol_root_path / "cryptography/vectors/canonicalization"
    value = parse_bytes((folder / "rfc8785-section-3.2.2-input.json").read_bytes())
    assert canonicalize(value) == (folder / "rfc8785-section-3.2.2.jcs").read_bytes()


def _general_path(value: Any) -> bytes:
    parts: list[str] = []
    jcs._emit(value, parts)
    return "".join(parts).encode("utf-8")


# Member names and strings that stress the standard-form shortcut: escapes, controls, U+2028,
# characters either side of the surrogate block, astral characters (UTF-16 pairs).
tricky_text = st.text(
    alphabet=st.sampled_from(
        [
            '"',
            "\\",
            "\x00",
            "\x1f",
            "\x7f",
            "\u2028",
            "\ud7ff",
            "\ue000",
            "\uffff",
            "\U0001f600",
            "a",
            "é",
        ]
    )
    | st.characters(exclude_categories=["Cs"]),
    max_size=6,
)
standard_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) - 2, max_value=2**53 + 2)
    | st.floats(allow_nan=False, allow_infinity=False)
    | tricky_text,
    lambda children: (
        st.lists(children, max_size=4)
        | st.tuples(children, children)
        | st.dictionaries(tricky_text, children, max_size=5)
    ),
    max_leaves=25,
)


@settings(max_examples=1000)
@given(standard_values)
def test_the_standard_form_shortcut_writes_the_general_paths_bytes(value: Any) -> None:
    assert canonicalize(value) == _general_path(value)


@pytest.mark.parametrize(
    "value",
    [
        {"\ue000": 1, "\U0001f600": 2},  # code points and UTF-16 code units order these apart
        {"a": 2**53 + 1},
        {"a": [1.5, 1e21]},
    ],
)
def test_values_the_standard_form_would_get_wrong_take_the_general_path(value: Any) -> None:
    assert not jcs._standard_form_is_canonical(value)
    assert canonicalize(value) == _general_path(value)
