"""A clause is found in one hop, and the map says where.

The code names the MWP 0.1 clauses it decides: each Command rule in its ``clauses``, every
other deciding module in a module-level ``CLAUSES`` tuple. ``docs/conformance.md`` gives each
clause row a code column naming those modules. The two must agree both ways, pair by pair:
every (clause, module) the code names is listed on a row of that clause, and every module a
row lists exists (with the ``:Name`` it cites) and names the row's clauses. A code entry
followed by clause IDs in parentheses claims only those of its row's clauses. Every clause ID
on either side must be one of the protocol bundle's ``clauses.json``.

Modules are read with ``ast``, never imported, except the Command table itself.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from mwp.core.group.kinds import RULES
from tests.layout.imports import modules
from tests.protocol_root import REPO, protocol_root

CONFORMANCE = REPO / "docs" / "conformance.md"
NO_CODE = "—"

# Clauses decided only by the bundle runners in mwp/conformance/, which carry no ``CLAUSES``
# constant yet: their rows say "—" in the code column.
UNANCHORED = frozenset({"MWP-EXT-011", "MWP-EXT-012"})

_FULL_ID = re.compile(r"MWP-([A-Z]{3})-(\d{3})")
_SHORT_ID = re.compile(r"(?:MWP-)?([A-Z]{3}-\d{3})")
_CODE_REF = re.compile(r"`([^`]+)`(?:\s*\(([^)]*)\))?")
_DOTTED = re.compile(r"[a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)*")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


@dataclass(frozen=True)
class CodeRef:
    """One entry of a code cell: a module, optionally ``module:Name``, optionally restricted
    to some of its row's clauses (None: all of them)."""

    module: str
    name: str | None = None
    only: frozenset[str] | None = None


@dataclass(frozen=True)
class Row:
    line: int
    clauses: frozenset[str]  # empty on rows that are not about clauses (the bundles)
    code: tuple[CodeRef, ...]
    no_code: bool = False  # the cell says NO_CODE


# --- reading the map ---------------------------------------------------------------------------


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def clause_ids(cell: str) -> frozenset[str]:
    """``MWP-SDV-007, 008, 009 (note)`` -> three IDs; a bare number keeps the area before it."""
    found: set[str] = set()
    area = None
    for token in re.sub(r"\([^)]*\)", "", cell).split(","):
        token = token.strip()
        full = _FULL_ID.fullmatch(token)
        if full is not None:
            area = full[1]
            found.add(token)
        elif re.fullmatch(r"\d{3}", token) and area is not None:
            found.add(f"MWP-{area}-{token}")
        elif token:
            raise ValueError(f"not a clause ID: {token!r}")
    return frozenset(found)


def code_refs(cell: str) -> tuple[CodeRef, ...]:
    refs = []
    for match in _CODE_REF.finditer(cell):
        module, _, name = match[1].partition(":")
        if not _DOTTED.fullmatch(module) or (name and not _NAME.fullmatch(name)):
            raise ValueError(f"not a module or module:Name: {match[1]!r}")
        only = None
        if match[2] is not None:
            only = frozenset("MWP-" + m[1] for m in _SHORT_ID.finditer(match[2]))
            if not only:
                raise ValueError(f"a code entry's parentheses name no clause: {match[2]!r}")
        refs.append(CodeRef(module, name or None, only))
    if _CODE_REF.sub("", cell).strip(" ,;"):
        raise ValueError(f"text outside code entries: {cell!r}")
    return tuple(refs)


def parse_map(text: str) -> tuple[list[Row], list[str]]:
    """Every row of every table, and the problems met reading them (each names its line)."""
    rows: list[Row] = []
    problems: list[str] = []
    lines = text.splitlines()
    number = 0
    while number < len(lines) - 1:
        header, rule = lines[number], lines[number + 1]
        number += 1
        if not (header.startswith("|") and re.fullmatch(r"\|(\s*-+\s*\|)+", rule.strip())):
            continue
        columns = [c.lower() for c in _cells(header)]
        if "code" not in columns:
            problems.append(f"line {number}: this table has no code column")
            continue
        clause_at = columns.index("clause") if "clause" in columns else None
        code_at = columns.index("code")
        number += 1
        while number < len(lines) and lines[number].startswith("|"):
            number += 1
            cells = _cells(lines[number - 1])
            try:
                clauses = clause_ids(cells[clause_at]) if clause_at is not None else frozenset()
                cell = cells[code_at]
                refs = () if cell == NO_CODE else code_refs(cell)
            except (ValueError, IndexError) as exc:
                problems.append(f"line {number}: {exc}")
                continue
            rows.append(Row(number, clauses, refs, no_code=cell == NO_CODE))
    return rows, problems


# --- reading the code --------------------------------------------------------------------------


def _top_level(tree: ast.Module) -> Iterable[tuple[str, ast.stmt]]:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield node.name, node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    yield target.id, node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            yield node.target.id, node


def read_module(path: Path) -> tuple[frozenset[str], frozenset[str]]:
    """A module's top-level names and the clause IDs of its ``CLAUSES`` constant."""
    tree = ast.parse(path.read_text("utf-8"))
    names = set()
    clauses: frozenset[str] = frozenset()
    for name, node in _top_level(tree):
        names.add(name)
        if name == "CLAUSES":
            assert isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None
            value = ast.literal_eval(node.value)
            assert isinstance(value, tuple) and all(isinstance(v, str) for v in value), path
            clauses = frozenset(value)
    return frozenset(names), clauses


def rule_clauses() -> dict[str, frozenset[str]]:
    """The clauses of every Command rule, by the module that defines the rule."""
    found: dict[str, set[str]] = {}
    for rule in RULES.values():
        found.setdefault(rule.decide.__module__, set()).update(rule.clauses)
    return {module: frozenset(clauses) for module, clauses in found.items()}


def code_map() -> tuple[dict[str, frozenset[str]], dict[str, frozenset[str]]]:
    """(module -> clauses its code names, module -> its top-level names), for every module."""
    defined: dict[str, frozenset[str]] = {}
    named: dict[str, frozenset[str]] = {}
    for module, path in modules().items():
        defined[module], clauses = read_module(path)
        if clauses:
            named[module] = clauses
    for module, clauses in rule_clauses().items():
        assert "RULES" in defined[module], f"{module} defines rules but no RULES"
        named[module] = named.get(module, frozenset()) | clauses
    return named, defined


def protocol_clauses() -> frozenset[str]:
    clauses = json.loads((protocol_root() / "clauses.json").read_text("utf-8"))
    return frozenset(clause["id"] for clause in clauses)


# --- the check ---------------------------------------------------------------------------------


def mismatches(
    named: Mapping[str, frozenset[str]],
    rows: Iterable[Row],
    known: frozenset[str],
    defined: Mapping[str, frozenset[str]],
    unanchored: frozenset[str] = UNANCHORED,
) -> list[str]:
    """Every disagreement between the code (``named``) and the map (``rows``): the map's by
    line, then the code's by module."""
    problems = []
    listed: set[tuple[str, str]] = set()
    for row in rows:
        at = f"line {row.line}"
        problems += [f"{at}: {c} is not an MWP 0.1 clause" for c in sorted(row.clauses - known)]
        if row.no_code:
            problems += [f"{at}: {c} has no code entry" for c in sorted(row.clauses - unanchored)]
        elif row.clauses and not row.code:
            problems.append(f"{at}: the code column is empty")
        for ref in row.code:
            if ref.module not in defined:
                problems.append(f"{at}: {ref.module} is not a module")
                continue
            if ref.name is not None and ref.name.split(".")[0] not in defined[ref.module]:
                problems.append(f"{at}: {ref.module} defines no {ref.name}")
            claimed = row.clauses if ref.only is None else ref.only
            problems += [
                f"{at}: {ref.module} is restricted to {c}, which the row does not name"
                for c in sorted(claimed - row.clauses)
            ]
            for clause in sorted(claimed & row.clauses):
                listed.add((clause, ref.module))
                if clause not in named.get(ref.module, frozenset()):
                    problems.append(f"{at}: {ref.module} does not name {clause} in its code")
    for module, clauses in sorted(named.items()):
        for clause in sorted(clauses):
            if clause not in known:
                problems.append(f"{module} names {clause}, which is not an MWP 0.1 clause")
            elif (clause, module) not in listed:
                problems.append(f"{module} names {clause}, but no row of the map lists it there")
    return sorted(problems, key=_order)


def _order(problem: str) -> tuple[int, str]:
    line = re.match(r"line (\d+): ", problem)
    return (int(line[1]), problem) if line else (1 << 30, problem)


# --- the tests ---------------------------------------------------------------------------------


def test_every_command_rule_names_the_clauses_it_implements() -> None:
    assert [kind for kind, rule in RULES.items() if not rule.clauses] == []
    for kind, rule in RULES.items():
        assert len(set(rule.clauses)) == len(rule.clauses), f"{kind} names a clause twice"


def test_the_conformance_map_is_read_whole() -> None:
    rows, problems = parse_map(CONFORMANCE.read_text("utf-8"))
    assert problems == []
    assert {"MWP-EVT-003", "MWP-SDV-008", "MWP-WRK-031"} <= {c for r in rows for c in r.clauses}


def test_the_code_and_the_conformance_map_agree() -> None:
    rows, problems = parse_map(CONFORMANCE.read_text("utf-8"))
    named, defined = code_map()
    known = protocol_clauses()
    assert sorted(UNANCHORED - known) == []
    assert problems + mismatches(named, rows, known, defined) == []


def test_clause_cells_expand_and_code_cells_restrict() -> None:
    assert clause_ids("MWP-SDV-007, 008, 009 (the Group's part)") == {
        "MWP-SDV-007",
        "MWP-SDV-008",
        "MWP-SDV-009",
    }
    assert clause_ids("MWP-MSN-017, MWP-FND-014") == {"MWP-MSN-017", "MWP-FND-014"}
    assert code_refs("`a.b`, `a.c:f` (WRK-010, MWP-WRK-009)") == (
        CodeRef("a.b"),
        CodeRef("a.c", "f", frozenset({"MWP-WRK-009", "MWP-WRK-010"})),
    )


_SMALL_MAP = """\
| clause | what is proven | code | tests |
| --- | --- | --- | --- |
| MWP-EVT-001 | agrees | `pkg.a` | t |
| MWP-EVT-003, 004 | partly | `pkg.a` (EVT-003), `pkg.b` (EVT-004) | t |
"""


def test_the_check_passes_a_consistent_map() -> None:
    rows, problems = parse_map(_SMALL_MAP)
    named = {
        "pkg.a": frozenset({"MWP-EVT-001", "MWP-EVT-003"}),
        "pkg.b": frozenset({"MWP-EVT-004"}),
    }
    known = frozenset({"MWP-EVT-001", "MWP-EVT-003", "MWP-EVT-004"})
    defined: dict[str, frozenset[str]] = {"pkg.a": frozenset(), "pkg.b": frozenset()}
    assert problems == []
    assert mismatches(named, rows, known, defined) == []


def test_the_check_reports_every_kind_of_mismatch() -> None:
    doc = """\
| clause | what is proven | code | tests |
| --- | --- | --- | --- |
| MWP-EVT-001 | named in code | `pkg.a` | t |
| MWP-EVT-002 | a module that is gone | `pkg.gone` | t |
| MWP-EVT-003, 009 | unknown clause, missing name, silent module | `pkg.b:missing` | t |
| MWP-EVT-004 | no code at all |  | t |
| MWP-EVT-001 | a restriction outside the row | `pkg.a` (EVT-003) | t |
| MWP-EXT-011 | left without code on purpose | — | t |
| MWP-EVT-001 | left without code by mistake | — | t |

| bundle | result | test |
| --- | --- | --- |
"""
    rows, problems = parse_map(doc)
    assert problems == ["line 11: this table has no code column"]
    named = {
        "pkg.a": frozenset({"MWP-EVT-001", "MWP-EVT-002"}),
        "pkg.b": frozenset({"MWP-EVT-005"}),
        "pkg.c": frozenset({"MWP-EXT-011"}),
    }
    known = frozenset({"MWP-EVT-001", "MWP-EVT-002", "MWP-EVT-003", "MWP-EVT-004", "MWP-EXT-011"})
    defined = {"pkg.a": frozenset(), "pkg.b": frozenset({"f"}), "pkg.c": frozenset()}
    assert mismatches(named, rows, known, defined) == [
        "line 4: pkg.gone is not a module",
        "line 5: MWP-EVT-009 is not an MWP 0.1 clause",
        "line 5: pkg.b defines no missing",
        "line 5: pkg.b does not name MWP-EVT-003 in its code",
        "line 5: pkg.b does not name MWP-EVT-009 in its code",
        "line 6: the code column is empty",
        "line 7: pkg.a is restricted to MWP-EVT-003, which the row does not name",
        "line 9: MWP-EVT-001 has no code entry",
        "pkg.a names MWP-EVT-002, but no row of the map lists it there",
        "pkg.b names MWP-EVT-005, which is not an MWP 0.1 clause",
        "pkg.c names MWP-EXT-011, but no row of the map lists it there",
    ]


def test_unreadable_cells_are_reported_not_skipped() -> None:
    doc = """\
| clause | code | tests |
| --- | --- | --- |
| MWP-EVT-001 | mwp.core.group.decision | t |
| EVT-001 | `mwp.core.group.decision` | t |
| MWP-EVT-001 | `mwp/core/group` | t |
"""
    rows, problems = parse_map(doc)
    assert rows == []
    assert problems == [
        "line 3: text outside code entries: 'mwp.core.group.decision'",
        "line 4: not a clause ID: 'EVT-001'",
        "line 5: not a module or module:Name: 'mwp/core/group'",
    ]
