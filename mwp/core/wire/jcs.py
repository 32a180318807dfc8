"""RFC 8785 JSON Canonicalization Scheme under the I-JSON data model (spec 2, 17.4)."""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any

CLAUSES: tuple[str, ...] = ("MWP-EVT-012", "MWP-FND-006")


class JcsDataModelError(ValueError):
    """The value cannot enter the JCS data model (non-finite number, lone surrogate, ...)."""


def canonicalize(value: Any) -> bytes:
    """Canonical UTF-8 bytes of a JSON value."""
    if _standard_form_is_canonical(value):
        try:
            return _STANDARD_FORM(value).encode("utf-8")
        except UnicodeEncodeError:
            pass  # a lone surrogate: refused below with the data-model error
    parts: list[str] = []
    _emit(value, parts)
    return "".join(parts).encode("utf-8")


# The standard library's C encoder writes JCS's exact bytes for the values nearly every
# signed document holds (strings, exactly representable integers, booleans, null, objects with
# member names ordered alike in code points and UTF-16 code units), at a fraction of the cost
# of emitting them here: this is most of the CPU a Command, an Event or a frame costs to sign,
# verify and send. Anything else (numbers with a fraction or beyond 2**53, other member names,
# other types) takes the general path below.
_STANDARD_FORM = json.JSONEncoder(
    ensure_ascii=False,
    allow_nan=False,
    check_circular=False,
    sort_keys=True,
    separators=(",", ":"),
).encode


def _standard_form_is_canonical(value: Any) -> bool:
    pending = [value]
    pop, extend = pending.pop, pending.extend
    while pending:
        item = pop()
        kind = type(item)
        if kind is str or kind is bool or item is None:
            continue
        if kind is int:
            if not -_EXACT_INTEGER <= item <= _EXACT_INTEGER:
                return False
        elif kind is dict:
            for key in item:
                # Below U+D800 code points and UTF-16 code units order member names alike.
                if type(key) is not str or not (key.isascii() or max(key) < "\ud800"):
                    return False
            extend(item.values())
        elif kind is list or kind is tuple:
            extend(item)
        elif not isinstance(item, str):
            return False
    return True


def sha256_ref(data: bytes) -> str:
    """``sha256:<lower-case hex>`` of exact bytes."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def jcs_hash(value: Any) -> str:
    return sha256_ref(canonicalize(value))


_EXACT_INTEGER = 2**53


def _emit(value: Any, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(_string(value))
    elif isinstance(value, int):
        # Exactly representable integers print as their digits in ECMAScript form too.
        if -_EXACT_INTEGER <= value <= _EXACT_INTEGER:
            out.append(str(int(value)))
        else:
            out.append(_number(_int_to_binary64(value)))
    elif isinstance(value, float):
        out.append(_number(value))
    elif isinstance(value, dict):
        out.append("{")
        first = True
        for key in _sorted_keys(value):
            if not isinstance(key, str):
                raise JcsDataModelError("object member names must be strings")
            if not first:
                out.append(",")
            first = False
            out.append(_string(key))
            out.append(":")
            _emit(value[key], out)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _emit(item, out)
        out.append("]")
    else:
        raise JcsDataModelError(f"not a JSON value: {type(value).__name__}")


def _sorted_keys(value: dict[Any, Any]) -> list[Any]:
    try:
        if "".join(value).isascii():
            return sorted(value)  # for ASCII, code-point order is UTF-16 code-unit order
    except TypeError:
        pass  # a member name that is not a string: refused below, as before
    return sorted(value, key=_utf16_key)


def _utf16_key(key: str) -> bytes:
    # RFC 8785 sorts member names by their UTF-16 code units.
    return key.encode("utf-16-be", errors="surrogatepass")


def _int_to_binary64(value: int) -> float:
    try:
        return float(value)  # correctly rounded, as I-JSON requires
    except OverflowError as exc:
        raise JcsDataModelError("integer outside the finite binary64 domain") from exc


_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}


# Strings with nothing to escape and no surrogate (nearly all of them) are copied as they are.
_PLAIN_STRING = re.compile(r'[^"\\\x00-\x1f\ud800-\udfff]*')


def _string(text: str) -> str:
    if _PLAIN_STRING.fullmatch(text):
        return f'"{text}"'
    out = ['"']
    for char in text:
        code = ord(char)
        if 0xD800 <= code <= 0xDFFF:
            raise JcsDataModelError("string contains an unpaired surrogate")
        escaped = _ESCAPES.get(char)
        if escaped is not None:
            out.append(escaped)
        elif code < 0x20:
            out.append(f"\\u{code:04x}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _number(value: float) -> str:
    """ECMAScript Number::toString for a finite binary64 value."""
    if not math.isfinite(value):
        raise JcsDataModelError("number outside the finite binary64 domain")
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    # repr gives the shortest round-trip digits; reformat them the ECMAScript way.
    mantissa, _, exp_text = repr(abs(value)).partition("e")
    int_part, _, frac_part = mantissa.partition(".")
    digits = (int_part + frac_part).lstrip("0")
    # n: position of the decimal point relative to the start of the digit string.
    point = len(int_part) + (int(exp_text) if exp_text else 0)
    if int_part == "0":
        stripped = frac_part.lstrip("0")
        point = -(len(frac_part) - len(stripped)) + (int(exp_text) if exp_text else 0)
        digits = stripped
    digits = digits.rstrip("0") or "0"
    k = len(digits)
    if k <= point <= 21:
        return sign + digits + "0" * (point - k)
    if 0 < point <= 21:
        return sign + digits[:point] + "." + digits[point:]
    if -6 < point <= 0:
        return sign + "0." + "0" * (-point) + digits
    exponent = point - 1
    exp_sign = "+" if exponent >= 0 else "-"
    head = digits[0] + ("." + digits[1:] if k > 1 else "")
    return f"{sign}{head}e{exp_sign}{abs(exponent)}"
