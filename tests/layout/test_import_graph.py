"""The layout holds: no import cycle between modules or between the package's folders, the
pure core stays pure, and nothing imports the linked folders by their top-level names."""

from __future__ import annotations

from tests.layout.imports import cycles, graph, imported_names, modules, package_graph

MODULES = modules()
EDGES = graph(MODULES)


def test_the_graph_is_read_from_every_module() -> None:
    assert {"mwp.core.group.authority", "mwp.workflows.mission", "mwp.workers.authority"} <= set(
        MODULES
    )
    assert "mwp.core.group.state" in EDGES["mwp.core.group.authority"]


def test_no_module_is_part_of_an_import_cycle() -> None:
    assert cycles(EDGES) == []


def test_no_folder_of_the_package_imports_another_that_imports_it_back() -> None:
    for depth in (2, 3):
        assert cycles(package_graph(EDGES, depth)) == [], f"cycle between folders at depth {depth}"


def test_a_cycle_is_found_when_there_is_one() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(edges) == [["a", "b", "c"]]


def test_the_core_imports_neither_temporal_nor_anything_outside_itself() -> None:
    for name, path in MODULES.items():
        if not name.startswith("mwp.core"):
            continue
        for module, _ in imported_names(path):
            assert not module.startswith("temporalio"), f"{name} imports {module}"
            if module.startswith("mwp."):
                assert module.startswith("mwp.core"), f"{name} imports {module}"


def test_the_linked_folders_are_imported_only_inside_the_package() -> None:
    for name, path in MODULES.items():
        for module, _ in imported_names(path):
            top = module.split(".")[0]
            assert top not in {"workflows", "activities", "workers"}, f"{name} imports {module}"
