"""The wire models against a Draft 2020-12 validator (format assertion on, all schemas by $id).

* the hand-written value rules get the validator's verdict, where the library is exact;
* every mutation of every valid document (drop a member, add one, change a type) gets it;
* every model mirrors its schema: members, required set, constants and enums, nesting;
* every length, range and item bound of every member gets it on both sides of the bound,
  and every string member gets it for a fixed set of spellings around its pattern or format.
"""

from __future__ import annotations

import enum
import json
import typing
from collections.abc import Callable, Iterator
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

from mwp.core.errors import ErrorCode
from mwp.core.kinds import (
    COORDINATOR_ONLY_KINDS,
    CORE_COMMAND_KINDS,
    CORE_EVENT_KINDS,
    ORGANIZATION_COMMAND_KINDS,
    ORGANIZATION_EVENT_KINDS,
)
from mwp.core.models import SCHEMA_MODELS
from mwp.core.models._base import WireModel
from mwp.core.models.websocket_frame import (
    AckFrame,
    CommandFrame,
    ErrorFrame,
    EventFrame,
    HelloClientInit,
    HelloClientResponse,
    HelloServerAccept,
    HelloServerChallenge,
    PingFrame,
    SubscribeFrame,
)
from mwp.core.wire.strict_json import OutOfRangeNumber
from tests.unit.test_models import (
    DROP,
    HASH,
    ROOT,
    ROUND_TRIP,
    VALUE_RULES,
    edited,
    file_name,
    load,
    schema_of,
    validator,
    vector,
    verdict,
)

JsonPath = tuple[str | int, ...]

# Where the jsonschema library is not exact (its date-time check lacks the protocol profile,
# and Python's `$` accepts a final line feed) the model follows the schema, not the library.
LIBRARY_GAPS = {"ts-year-0000", "ts-signature", "ts-unknown-offset", "ts-trailing-lf"}


@pytest.mark.parametrize(
    ("document", "edits", "valid"),
    [c[1:] for c in VALUE_RULES if c[0] not in LIBRARY_GAPS],
    ids=[c[0] for c in VALUE_RULES if c[0] not in LIBRARY_GAPS],
)
def test_value_rule_agrees_with_json_schema(
    document: str, edits: dict[str, Any], valid: bool
) -> None:
    value = edited(vector(document), edits)
    if any(isinstance(v, OutOfRangeNumber) for v in edits.values()):
        pytest.skip("a binary64 validator reads 1e400 as infinity, not as a large integer")
    assert validator(schema_of(document)).is_valid(value) is valid


# --- every mutation of every valid document -------------------------------------------------


def _paths(value: Any, path: JsonPath = ()) -> Iterator[tuple[JsonPath, Any]]:
    yield path, value
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*path, index))


def _other_types(value: Any) -> list[Any]:
    """Values of another JSON type (for integers, also the near misses JSON Schema refuses)."""
    if isinstance(value, bool):
        return [0, "true"]
    if isinstance(value, int):
        return [str(value), value + 0.5, True, -1]
    if isinstance(value, float):
        return [str(value), False]
    if isinstance(value, str):
        return [7, [value]]
    if isinstance(value, list):
        return [{}, "[]"]
    if isinstance(value, dict):
        return [[], "{}"]
    return [0]


def _pointer(path: JsonPath) -> str:
    return "".join(f"/{step}" for step in path)


def _mutations(value: Any) -> Iterator[Any]:
    for path, node in _paths(value):
        if isinstance(node, dict):
            yield edited(value, {_pointer((*path, "zzUnknownMember")): 1})
            for key in node:
                yield edited(value, {_pointer((*path, key)): DROP})
        if path:
            for other in _other_types(node):
                yield edited(value, {_pointer(path): other})


@pytest.mark.parametrize(("schema", "instance"), ROUND_TRIP, ids=[i for _, i in ROUND_TRIP])
def test_mutations_agree_with_json_schema(schema: str, instance: str) -> None:
    # Exhaustive, not sampled: about 3,400 mutations in all, under two seconds.
    check = validator(file_name(schema))
    disagreements = [
        (json.dumps(m)[:160], ours)
        for m in _mutations(load(instance))
        if (ours := verdict(schema, m)) is not check.is_valid(m)
    ]
    assert disagreements == []


# --- models mirror their schemas ------------------------------------------------------------

FRAME_DEFS: dict[str, type[WireModel]] = {
    "helloClientInit": HelloClientInit,
    "helloServerChallenge": HelloServerChallenge,
    "helloClientResponse": HelloClientResponse,
    "helloServerAccept": HelloServerAccept,
    "subscribe": SubscribeFrame,
    "command": CommandFrame,
    "event": EventFrame,
    "ack": AckFrame,
    "ping": PingFrame,
    "error": ErrorFrame,
}

Located = tuple[dict[str, Any], str]  # a schema node and the schema file it is written in


def _resolve(node: dict[str, Any], file: str) -> Located:
    while "$ref" in node:
        target, _, pointer = node["$ref"].partition("#")
        file = target or file
        node = load(f"schemas/{file}")
        for part in filter(None, pointer.split("/")):
            node = node[part]
    return node, file


def _object_shape(node: dict[str, Any], file: str) -> tuple[dict[str, Located], set[str]]:
    """Properties and required members of an object schema with its `allOf` parts (a later
    part narrows an earlier one)."""
    node, file = _resolve(node, file)
    properties = {name: (prop, file) for name, prop in node.get("properties", {}).items()}
    required = set(node.get("required", []))
    for part in node.get("allOf", []):
        if "properties" in part or "$ref" in part:
            more, more_required = _object_shape(part, file)
            properties.update(more)
            required |= more_required
    return properties, required


def _annotation_parts(annotation: Any) -> Iterator[Any]:
    yield annotation
    for arg in typing.get_args(annotation):
        yield from _annotation_parts(arg)


def _models_in(annotation: Any) -> list[type[WireModel]]:
    parts = _annotation_parts(annotation)
    return [a for a in parts if isinstance(a, type) and issubclass(a, WireModel)]


def _constants_in(annotation: Any) -> set[Any] | None:
    values: set[Any] = set()
    for part in _annotation_parts(annotation):
        if typing.get_origin(part) is typing.Literal:
            values.update(typing.get_args(part))
        elif isinstance(part, type) and issubclass(part, enum.Enum):
            values.update(member.value for member in part)
    return values or None


def _schema_constants(node: dict[str, Any], file: str) -> set[Any] | None:
    node, file = _resolve(node, file)
    if "items" in node:
        return _schema_constants(node["items"], file)
    if "const" in node:
        return {node["const"]}
    return set(node["enum"]) if "enum" in node else None


class ObjectPair(typing.NamedTuple):
    where: str
    model: type[WireModel]
    properties: dict[str, Located]
    required: set[str]


def _pairs(
    model: type[WireModel], node: dict[str, Any], file: str, where: str
) -> Iterator[ObjectPair]:
    """Each model with the object schema it stands for, recursively through its members."""
    properties, required = _object_shape(node, file)
    yield ObjectPair(where, model, properties, required)
    for name, field in model.model_fields.items():
        alias = field.alias or name
        if alias not in properties:
            continue  # reported by the mirror test
        prop, prop_file = _resolve(*properties[alias])
        target, target_file = _resolve(prop.get("items", prop), prop_file)
        nested = _models_in(field.annotation)
        if "oneOf" in target:
            branches = [_resolve(b, target_file)[0] for b in target["oneOf"]]
            for sub in nested:
                (tag,) = typing.get_args(sub.model_fields["type"].annotation)
                (branch,) = [b for b in branches if b["properties"]["type"]["const"] == tag]
                yield from _pairs(sub, branch, target_file, f"{where}/{alias}[{tag}]")
        elif "properties" in target or "allOf" in target:
            (sub,) = nested
            yield from _pairs(sub, target, target_file, f"{where}/{alias}")
        elif isinstance(target.get("additionalProperties"), dict):
            (sub,) = nested
            yield from _pairs(sub, target["additionalProperties"], target_file, f"{where}/{alias}")
        else:
            assert not nested, f"{where}/{alias} is a model but the schema has no object there"


def _schema_pairs(schema_name: str) -> Iterator[ObjectPair]:
    schema = load(f"schemas/{schema_name}")
    if schema_name == "websocket-frame.schema.json":
        assert [b["$ref"] for b in schema["oneOf"]] == [f"#/$defs/{n}" for n in FRAME_DEFS]
        for name, frame in FRAME_DEFS.items():
            yield from _pairs(frame, schema["$defs"][name], schema_name, name)
    else:
        model = SCHEMA_MODELS[schema_name]
        assert issubclass(model, WireModel)
        yield from _pairs(model, schema, schema_name, schema_name)


def _fields_by_alias(model: type[BaseModel]) -> dict[str, FieldInfo]:
    return {(f.alias or name): f for name, f in model.model_fields.items()}


@pytest.mark.parametrize("schema_name", sorted(SCHEMA_MODELS))
def test_model_mirrors_schema(schema_name: str) -> None:
    for where, model, properties, required in _schema_pairs(schema_name):
        fields = _fields_by_alias(model)
        assert set(fields) == set(properties), where
        assert {a for a, f in fields.items() if f.is_required()} == required, where
        assert model.model_config.get("extra") == "forbid", where
        for alias, field in fields.items():
            constants = _schema_constants(*properties[alias])
            if constants is not None:
                assert _constants_in(field.annotation) == constants, f"{where}/{alias}"


# --- bounds and patterns, probed on both sides ---------------------------------------------

# Strings of exactly `n` characters shaped to satisfy the patterns that carry length bounds.
FILLERS: list[Callable[[int], str]] = [
    lambda n: "a" * n,
    lambda n: "urn:" + "a" * (n - 4),
    lambda n: "a." + "a" * (n - 2),
    lambda n: "ext.a.b." + "a" * (n - 8),
    lambda n: "1.0." + "1" * (n - 4),
    lambda n: "P" + "1" * (n - 2) + "D",
    lambda n: "A" * n,
    lambda n: "a.b" + "c" * (n - 3),
]
# Spellings that sit on either side of the patterns, formats and enums of string members
# (none ends in a line feed: Python's `$` would make the library disagree with ECMA-262).
STRING_PROBES: list[str] = [
    *["", "a", "A", "7", "a b", " a", "a.b", "a.b.c", "A.b", "a..b", "a.", "a_b.c", "a-b.c"],
    *["ext.a.b", "ext.a.b.c", "ext.A.b.c", "ext.a-b.c_d.e", "mission.create", "mission.fly"],
    *["0.1", "1.0.0", "01.0.0", "1.0", "1.0.0-rc.1+b.2", "1.0.0-", "1.0.0+"],
    *["P1D", "PT1H", "P1DT2H3M4.5S", "P", "PT", "P1DT", "PT1.S", "P1W", "p1d"],
    *["USD", "usd", "US", "USDX", "text/plain", "text/", "a/b/c", "application/ld+json"],
    *["code.review", "code-review", "codereview", "Code.review", "x:y", "a:b-c.d"],
    *["AB", "AB_1", "A_", "ABC_DEF", "a_b", "AUTH_REQUIRED", "AUTH_STALE_COORDINATOR"],
    *["c2lnbmF0dXJl", "ab+/", "ab==", "a-_b"],
    *[HASH, "sha256:" + "A" * 64, "sha256:" + "a" * 63, "sha512:" + "a" * 64],
    *["urn:a", "https://x.test/a?b#c", "wss://x.test/a", "ws://x.test", "a:", "//x.test"],
    *["http://exa mple.test", "urn:%zz", "urn:%41", "urn:\u00e9", "http://[::1]:80/"],
    *["2026-07-15T00:00:00Z", "2026-07-15t00:00:00z", "2026-07-15T00:00:00.5+01:00"],
    *["2026-07-15", "2026-13-01T00:00:00Z", "2026-07-15T00:00:00"],
    *["\t", "\u3000", "x\u3000"],
]
ITEM_CANDIDATES: list[Any] = [
    "urn:a",
    "urn:b",
    HASH,
    "sha256:" + "b" * 64,
    "a.b",
    "a.c",
    "AB",
    "ext.a.b.c",
]


def _string_probes(check: Callable[[Any], bool], prop: dict[str, Any]) -> list[str]:
    probes = []
    for key, step in (("maxLength", 1), ("minLength", -1)):
        if key not in prop:
            continue
        bound = prop[key]
        for fill in FILLERS:
            at, beyond = fill(bound), fill(bound + step)
            if len(at) == bound and len(beyond) == bound + step and check(at):
                probes += [at, beyond]
                break
        else:
            pytest.fail(f"no probe found for {key}={bound}")
    return probes


def _number_probes(prop: dict[str, Any]) -> list[Any]:
    probes: list[Any] = []
    for key in ("minimum", "maximum"):
        if key in prop:
            bound = prop[key]
            probes += [bound - 1, bound - 0.5, bound, bound + 0.5, bound + 1]
    return probes


def _array_probes(check_item: Callable[[Any], bool], prop: dict[str, Any], file: str) -> list[Any]:
    items, _ = _resolve(prop.get("items", {}), file)
    if items.get("type") == "object" or "properties" in items:
        return []  # object items are covered by the vectors and the mutations
    candidates = [*items.get("enum", []), *([items["const"]] if "const" in items else [])]
    good = [c for c in [*candidates, *ITEM_CANDIDATES] if check_item(c)]
    if not good:
        return []
    first, *rest = good
    probes: list[Any] = [[], [first], [first, first]]
    return [*probes, [first, rest[0]]] if rest else probes


def _adapter(field: FieldInfo) -> TypeAdapter[Any]:
    # The field's own type with its constraints put back (pydantic keeps them apart).
    annotation: Any = field.annotation
    if field.metadata:
        annotation = Annotated[annotation, *field.metadata]
    return TypeAdapter(annotation)


def _accepts(adapter: TypeAdapter[Any], value: Any) -> bool:
    try:
        adapter.validate_python(value, strict=True)
    except ValidationError:
        return False
    return True


@pytest.mark.parametrize("schema_name", sorted(SCHEMA_MODELS))
def test_bounds_and_patterns_agree_with_json_schema(schema_name: str) -> None:
    probed = 0
    for where, model, properties, _ in _schema_pairs(schema_name):
        fields = _fields_by_alias(model)
        for alias, located in properties.items():
            prop, file = _resolve(*located)
            check = validator(file).evolve(schema=prop)
            if prop.get("type") == "array":
                items = validator(file).evolve(schema=prop.get("items", {}))
                probes = _array_probes(items.is_valid, prop, file)
                item_schema, _ = _resolve(prop.get("items", {}), file)
                probes += [[s] for s in _string_probes(items.is_valid, item_schema)]
                if (
                    item_schema.get("type", "string") == "string"
                    and "properties" not in item_schema
                ):
                    probes += [[s] for s in STRING_PROBES]
            elif prop.get("type") in ("integer", "number"):
                probes = _number_probes(prop)
            else:
                probes = _string_probes(check.is_valid, prop)
                if prop.get("type", "string") == "string" and "properties" not in prop:
                    probes += STRING_PROBES
            adapter = _adapter(fields[alias]) if probes else None
            for probe in probes:
                assert adapter is not None
                expected = check.is_valid(probe)
                assert _accepts(adapter, probe) is expected, f"{where}/{alias}: {probe!r:.60}"
                probed += 1
    assert probed > 0


# --- tables kept in code --------------------------------------------------------------------


def test_kind_tables_match_the_schemas() -> None:
    command = load("schemas/command.schema.json")["$defs"]
    assert set(command["coreCommandKind"]["enum"]) == CORE_COMMAND_KINDS
    assert set(command["organizationScopedKind"]["enum"]) == ORGANIZATION_COMMAND_KINDS
    assert set(command["coordinatorOnlyKind"]["enum"]) == COORDINATOR_ONLY_KINDS
    event = load("schemas/event.schema.json")
    assert set(event["properties"]["kind"]["anyOf"][0]["enum"]) == CORE_EVENT_KINDS
    assert set(event["allOf"][0]["if"]["properties"]["kind"]["enum"]) == ORGANIZATION_EVENT_KINDS
    error = load("schemas/error.schema.json")
    assert set(error["properties"]["code"]["enum"]) == {code.value for code in ErrorCode}


def test_every_schema_but_common_has_a_model() -> None:
    names = {p.name for p in (ROOT / "schemas").glob("*.schema.json")}
    assert len(names) == 22
    assert names - set(SCHEMA_MODELS) == {"common.schema.json"}
    assert all(issubclass(m, BaseModel) for m in SCHEMA_MODELS.values())
