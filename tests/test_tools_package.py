"The tools (docs builder, paper runner, main job, Flower adapter) live in `fedlearn_nb.tools`, above the library: importing the library never loads them or their dependencies."
import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOOL_DEPENDENCIES = {"flwr", "nbdev", "nbclient", "nbconvert", "nbformat", "papermill", "yaml", "execnb"}

PROBE = """
import importlib, pkgutil, sys
import fedlearn_nb, fedlearn_nb.engine, fedlearn_nb.algorithms as algorithms
for module in pkgutil.iter_modules(algorithms.__path__): importlib.import_module("fedlearn_nb.algorithms." + module.name)
print(sorted(m for m in sys.modules if m.startswith("fedlearn_nb.tools")))
print(sorted({m.split(".")[0] for m in sys.modules} & set(sys.argv[1:])))
"""


def test_library_and_algorithms_import_no_tool():
    result = subprocess.run([sys.executable, "-c", PROBE, *sorted(TOOL_DEPENDENCIES)], capture_output=True, text=True,
                            cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr
    tools, dependencies = result.stdout.strip().splitlines()[-2:]
    assert tools == "[]", f"importing the library loaded tool modules: {tools}"
    assert dependencies == "[]", f"importing the library loaded the tools' dependencies: {dependencies}"


def test_the_tools_package_imports_nothing():
    "tools/__init__.py holds a docstring only, so `import fedlearn_nb.tools.runner` loads its own parts and not the Flower adapter."
    tree = ast.parse((ROOT / "fedlearn_nb" / "tools" / "__init__.py").read_text())
    assert not [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]
    probe = "import sys, fedlearn_nb.tools.runner; print(sorted(m for m in sys.modules if m.startswith('fedlearn_nb.tools')))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr
    parts = ["catalogue", "notebook_execution", "planning", "publishing", "runner", "status", "tables"]  # the runner and its parts
    assert result.stdout.strip().splitlines()[-1] == str(["fedlearn_nb.tools"] + [f"fedlearn_nb.tools.{p}" for p in parts])


def test_console_scripts_point_into_tools():
    import tomllib
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"fedlearn-repro": "fedlearn_nb.tools.runner:main", "fedlearn-docs": "fedlearn_nb.tools.docs:main",
                       "fedlearn-main": "fedlearn_nb.tools.main:main"}
    for target in scripts.values():
        module, function = target.split(":")
        result = subprocess.run([sys.executable, "-c", f"import {module} as m; assert callable(m.{function})"], cwd=ROOT,
                                capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr


def test_the_run_path_does_not_import_scikit_learn():
    """scikit-learn is imported where a clustering is scored, not by `import fedlearn_nb.experiment`: otherwise every chapter,
    paper kernel, Flower node and runner process pays its import, which takes longer than torch's."""
    probe = "import sys, fedlearn_nb.experiment, fedlearn_nb.metrics as m; print('sklearn' in sys.modules); m.nmi([0, 0, 1], [1, 1, 0]); print('sklearn' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "True"], result.stdout
