"""Algorithms are found by their declared entry points (group `fedlearn_nb.algorithm_classes`, `name = "module:Class"`):
pyproject.toml declares every registered algorithm, a name imports the one module its entry names, and a plug-in
declares its own the same way. The lookups run in fresh processes over metadata written here from pyproject.toml, so
they test the declarations of this tree whatever metadata the environment's install holds."""
import importlib
import json
import pkgutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GROUP = "fedlearn_nb.algorithm_classes"


def declared() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"][GROUP]


def write_metadata(folder: Path, distribution: str, groups: dict) -> None:
    "A minimal installed distribution in `folder`: its name and its entry points."
    info = folder / f"{distribution}-0.0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 0.0.1\n")
    (info / "entry_points.txt").write_text("".join(f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in entries.items()) + "\n"
                                                   for group, entries in groups.items()))


def fresh(code: str, folder: Path, *arguments: str) -> dict:
    "Run `code` in a fresh interpreter that finds the metadata in `folder` first; it prints one JSON line."
    env = {"PYTHONPATH": f"{folder}:{ROOT}", "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-W", "always", "-c", code, *arguments], capture_output=True, text=True, timeout=300, env=env, cwd=folder)
    assert result.returncode == 0, result.stderr
    return {**json.loads(result.stdout.strip().splitlines()[-1]), "stderr": result.stderr}


def test_every_registered_algorithm_is_declared_by_its_class():
    "Importing every algorithm module registers exactly the declared names, each by the class its entry point names."
    from fedlearn_nb import algorithms
    from fedlearn_nb.engine import ALGORITHMS
    for info in pkgutil.iter_modules(algorithms.__path__): importlib.import_module(f"fedlearn_nb.algorithms.{info.name}")
    ours = {name: f"{cls.__module__}:{cls.__qualname__}" for name, cls in ALGORITHMS.items() if cls.__module__.startswith("fedlearn_nb.")}
    assert declared() == ours


PROBE = """
import json, sys
from fedlearn_nb.engine import get_algorithm
def modules(): return sorted(m for m in sys.modules if m.startswith("fedlearn_nb.algorithms"))
result = {"plug_in": get_algorithm("ToyPlugin").__module__, "modules_for_plug_in": modules()}
found = get_algorithm("fedcclplus")
result.update(found=f"{found.__module__}:{found.__name__}", modules=modules(), errors=[])
for name in sys.argv[1:]:
    try: get_algorithm(name)
    except KeyError as error: result["errors"].append(str(error))
print(json.dumps(result))
"""

PLUG_IN = """
from fedlearn_nb.engine import Algorithm, register_algorithm

@register_algorithm
class ToyPlugIn(Algorithm):
    name = "toyplugin"
"""


def test_a_name_imports_only_the_module_its_entry_point_names(tmp_path):
    """FedCCL+ lives in fedccl.py: its entry point says so, and no other algorithm module is imported (not all of them); a
    plug-in's class in a module of any name is found the same way; an entry whose class registers another name is refused."""
    write_metadata(tmp_path, "fedlearn_nb", {GROUP: declared()})
    write_metadata(tmp_path, "toy_plugin", {GROUP: {"toyplugin": "toy_plugin_code:ToyPlugIn", "toywrong": "toy_plugin_code:ToyPlugIn"}})
    (tmp_path / "toy_plugin_code.py").write_text(PLUG_IN)
    result = fresh(PROBE, tmp_path, "toywrong", "nosuchmethod")
    assert result["plug_in"] == "toy_plugin_code" and result["modules_for_plug_in"] == []
    assert result["found"] == "fedlearn_nb.algorithms.fedccl:FedCCLPlus"
    assert result["modules"] == ["fedlearn_nb.algorithms", "fedlearn_nb.algorithms.fedavg", "fedlearn_nb.algorithms.fedccl"]
    assert "Warning" not in result["stderr"]
    wrong, unknown = result["errors"]
    assert "the entry point 'toywrong' names toy_plugin_code:ToyPlugIn, which is not registered as 'toywrong'" in wrong
    assert "unknown algorithm 'nosuchmethod'; known: [" in unknown
    assert all(f"'{name}'" in unknown for name in ["fedavg", "fedcclplus", "scfc", "toyplugin"])


def test_metadata_that_predates_the_declarations_still_finds_every_algorithm_and_says_so(tmp_path):
    "An install whose metadata names only the whole package (before the entries above): every module is imported, with a warning."
    write_metadata(tmp_path, "fedlearn_nb", {"fedlearn_nb.algorithms": {"fedlearn_nb": "fedlearn_nb.algorithms"}})
    result = fresh(PROBE.replace('get_algorithm("ToyPlugin").__module__', '"none"'), tmp_path)
    assert result["found"] == "fedlearn_nb.algorithms.fedccl:FedCCLPlus" and "fedlearn_nb.algorithms.ccfc" in result["modules"]
    assert "pip install -e . --no-deps" in result["stderr"] and result["stderr"].count("Warning") == 1
