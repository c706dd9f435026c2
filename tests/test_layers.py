"""The library's layers (chapter 96_layers): every import of one `fedlearn_nb` module by another points down a layer or
stays in its own, nothing imports in a circle, and algorithm modules import each other only for a base class.

The checks read the installed package's source; a new module must be placed in `fedlearn_nb.tools.layers.LAYERS`.
"""
from __future__ import annotations

from fedlearn_nb.tools.layers import (LAYERS, Import, import_cycles, import_graph, layer_of, module_files,
                                      sideways_algorithm_imports, upward_imports)


def test_every_module_has_a_layer():
    unplaced = []
    for module in module_files():
        try: layer_of(module)
        except KeyError: unplaced.append(module)
    assert not unplaced, f"place these modules in fedlearn_nb.tools.layers.LAYERS (chapter 96_layers): {unplaced}"


def test_imports_point_down():
    bad = upward_imports(import_graph())
    assert not bad, "imports that point up a layer:\n" + "\n".join(
        f"{i.source} (layer {layer_of(i.source)}) line {i.line} imports {i.target} (layer {layer_of(i.target)})" for i in bad)


def test_no_import_cycles():
    assert import_cycles(import_graph()) == []


def test_algorithms_import_each_other_only_for_a_base_class():
    bad = sideways_algorithm_imports()
    assert not bad, "algorithm modules importing from each other (move the shared piece down a layer):\n" + "\n".join(
        f"{i.source} line {i.line} imports {list(i.names)} from {i.target}" for i in bad)


def test_the_engine_reaches_algorithms_only_through_entry_points():
    """The registry loads algorithms by entry point: no module of the engine (messages, history, execution, loop, experiment)
    imports the algorithms package."""
    engine = ("engine", "history", "execution", "loop", "experiment")
    assert all(layer_of(module) < layer_of("algorithms") for module in engine)
    assert not [i for i in import_graph() if i.source in engine and i.target.startswith("algorithms")]
    from fedlearn_nb.engine import get_algorithm
    assert get_algorithm("fcclplus").__module__ == "fedlearn_nb.algorithms.fccl"   # a name registered in a module of another name


def test_the_checks_catch_what_they_must():
    "On a made-up graph: one upward import and the cycle it closes are found; the library's own ranks order the layers."
    graph = [Import("models", "core", 1), Import("core", "models", 2)]
    assert [(i.source, i.target) for i in upward_imports(graph)] == [("core", "models")]
    assert import_cycles(graph) == [["core", "models", "core"]]
    assert LAYERS["core"] < LAYERS["federation"] < LAYERS["engine"] < LAYERS["algorithms"] < LAYERS["tools"]
    assert LAYERS["engine"] < LAYERS["execution"] < LAYERS["loop"] < LAYERS["experiment"] < LAYERS["reporting"]


def test_chapter_numbers_follow_the_layers():
    "Sorted by number, the chapters' modules never step down a layer: a reader meets each layer before what builds on it."
    import json
    import re
    from pathlib import Path
    ranks = []
    for notebook in sorted((Path(__file__).resolve().parents[1] / "nbs").glob("[0-9]*.ipynb")):
        source = "\n".join("".join(c["source"]) for c in json.loads(notebook.read_text())["cells"] if c["cell_type"] == "code")
        found = re.search(r"^#\|\s*default_exp\s+(\S+)", source, re.M)
        if found: ranks.append((notebook.name, found.group(1), layer_of(found.group(1))))
    assert len(ranks) > 40
    steps_down = [(a, b) for a, b in zip(ranks, ranks[1:]) if b[2] < a[2]]
    assert not steps_down, f"chapters whose number puts a lower layer after a higher one: {steps_down}"
