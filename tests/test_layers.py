"""The library's layers: every import of one `fedlearn_nb` module by another points down (or stays in its layer), with no cycles.

The drawing, bottom to top (STYLE.md):

    core -> data / metrics -> partition -> federation -> models -> clustering / losses / adversarial / toys
         -> selfsupervised -> engine -> reporting -> algorithms -> tools

A module that is not in `LAYERS` fails the test: a new module has to be placed in the drawing. Algorithm modules do not
import each other except for a base class they extend.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "fedlearn_nb"

LAYERS = {  # module (relative to fedlearn_nb) -> rank; a module may import modules of its own rank or lower
    "core": 0, "data": 1, "metrics": 1, "partition": 2, "federation": 3, "models": 4,
    "clustering": 5, "losses": 5, "adversarial": 5, "toys": 5,
    "selfsupervised": 6, "engine": 7, "reporting": 8, "algorithms": 9, "tools": 10,
}
SKIP = {"_modidx", "__init__"}


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE).with_suffix("").parts)


def rank(module: str) -> int:
    "The layer of `module` (dotted, relative to the package): its own entry, else its top-level package's."
    for key in (module, module.split(".")[0]):
        if key in LAYERS: return LAYERS[key]
    raise KeyError(module)


def library_modules() -> dict[str, Path]:
    "Every module of the package but its top-level `__init__` and nbdev's index: dotted name -> file."
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if not (p.parent == PACKAGE and p.stem in SKIP)}


def imports_of(path: Path, module: str) -> list[tuple[str, int, list[str]]]:
    "Every `fedlearn_nb` module that `path` imports anywhere (top level or inside functions): (module, line, names)."
    tree = ast.parse(path.read_text())
    package = module.split(".")[:-1] if path.stem != "__init__" else module.split(".")
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("fedlearn_nb."): found.append((alias.name[len("fedlearn_nb."):], node.lineno, []))
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                target = ".".join(base + ([node.module] if node.module else []))
            elif node.module and (node.module == "fedlearn_nb" or node.module.startswith("fedlearn_nb.")):
                target = node.module[len("fedlearn_nb"):].lstrip(".")
            else: continue
            names = [a.name for a in node.names]
            if not target:  # `from fedlearn_nb import data, partition`: each name is a module
                found.extend((name, node.lineno, []) for name in names)
            else: found.append((target, node.lineno, names))
    return found


def strip_init(module: str) -> str:
    return module[: -len(".__init__")] if module.endswith(".__init__") else module


def test_every_module_has_a_layer():
    missing = [m for m in map(strip_init, library_modules()) if m and m != "__init__" and not _has_rank(m)]
    assert not missing, f"place these modules in tests/test_layers.py LAYERS (and the drawing): {missing}"


def _has_rank(module: str) -> bool:
    try: rank(module); return True
    except KeyError: return False


def upward_imports() -> list[str]:
    bad = []
    for module, path in library_modules().items():
        module = strip_init(module)
        if module in ("", "__init__") or not _has_rank(module): continue
        for target, line, _ in imports_of(path, module if path.stem != "__init__" else module + ".__init__"):
            target = strip_init(target)
            if target and _has_rank(target) and rank(target) > rank(module):
                bad.append(f"{path.relative_to(PACKAGE.parent)}:{line} {module} (layer {rank(module)}) imports {target} (layer {rank(target)})")
    return bad


def test_imports_point_down():
    bad = upward_imports()
    assert not bad, "imports that point up a layer:\n" + "\n".join(bad)


def test_no_import_cycles():
    graph = {}
    for module, path in library_modules().items():
        name = strip_init(module)
        if path.stem == "__init__": continue  # a package's __init__ gathers its modules; it is not a dependency of them
        graph[name] = {strip_init(t) for t, _, _ in imports_of(path, name) if strip_init(t) and strip_init(t) != name}
    state, cycles = {}, []

    def visit(node, stack):
        state[node] = "open"
        for nxt in graph.get(node, ()):
            if nxt not in graph: continue
            if state.get(nxt) == "open": cycles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]) if nxt in stack else f"{node} -> {nxt}")
            elif nxt not in state: visit(nxt, stack + [nxt])
        state[node] = "done"

    for node in graph:
        if node not in state: visit(node, [node])
    assert not cycles, f"import cycles: {cycles}"


def test_algorithms_import_each_other_only_for_a_base_class():
    "An algorithm module may import another algorithm module only for a class it extends."
    bad = []
    for module, path in library_modules().items():
        if not module.startswith("algorithms.") or path.stem == "__init__": continue
        tree = ast.parse(path.read_text())
        bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", None)
                 for node in ast.walk(tree) if isinstance(node, ast.ClassDef) for b in node.bases}
        for target, line, names in imports_of(path, module):
            if target.startswith("algorithms") and target != module:
                extra = [n for n in names if n not in bases] or ([] if names else ["<module>"])
                if extra: bad.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {extra} from {target}")
    assert not bad, "algorithm modules importing from each other (move the shared piece down a layer):\n" + "\n".join(bad)


def test_the_checker_catches_an_upward_import(tmp_path):
    "The checker itself: a relative import from a low layer to a high one is seen, resolved and ranked."
    path = tmp_path / "models.py"
    path.write_text("from .engine import run\nimport fedlearn_nb.algorithms.fedavg\nfrom . import losses\n")
    found = imports_of(path, "models")
    assert [t for t, _, _ in found] == ["engine", "algorithms.fedavg", "losses"]
    assert rank("engine") > rank("models") and rank("algorithms.fedavg") > rank("models") and rank("losses") > rank("models")
    with pytest.raises(KeyError): rank("nowhere")
