"Every paper notebook's parameters: one name for the CPU threads, `device` and `progress` with help, and a type papermill shows."
import ast
import json
from pathlib import Path

import pytest

from fedlearn_nb.tools.runner import discover_papers, notebook_parameters

ROOT = Path(__file__).resolve().parents[1]
PAPERS = discover_papers(ROOT / "papers")


def parameters_source(path: Path) -> str:
    cells = json.loads(path.read_text())["cells"]
    return "".join(next(c for c in cells if "parameters" in c.get("metadata", {}).get("tags", []))["source"])


def test_every_paper_is_checked():
    assert {"fedccl", "fedplcc", "fedcrl", "ccfc", "cpcfl", "benchmark"} <= set(PAPERS)


@pytest.mark.parametrize("paper", sorted(PAPERS))
def test_one_thread_parameter_and_device_and_progress_with_help(paper):
    declared = notebook_parameters(PAPERS[paper])
    assert "cpu_threads" not in declared, f"{paper}: the CPU-thread parameter is called num_threads in every paper notebook"
    for name in ("num_threads", "device", "progress"):
        assert name in declared, f"{paper} has no parameter {name}"
        assert len(declared[name]["help"]) > 10, f"{paper}: parameter {name} has no help text"
    assert declared["num_threads"]["value"] is None and declared["progress"]["value"] is False


@pytest.mark.parametrize("paper", sorted(PAPERS))
def test_every_parameter_has_a_type_papermill_shows(paper):
    papermill = pytest.importorskip("papermill")
    source = parameters_source(PAPERS[paper])
    lines = [node for node in ast.parse(source).body]
    unannotated = [ast.get_source_segment(source, node).split("=")[0].strip() for node in lines if not isinstance(node, ast.AnnAssign)]
    assert not unannotated, f"{paper}: annotate {unannotated} (e.g. `rounds: \"Optional[int]\" = None`)"
    inferred = papermill.inspect_notebook(str(PAPERS[paper]))
    assert set(inferred) == set(notebook_parameters(PAPERS[paper])), f"{paper}: papermill misses {set(notebook_parameters(PAPERS[paper])) - set(inferred)}"
    unknown = {name: p["inferred_type_name"] for name, p in inferred.items() if p["inferred_type_name"] in ("None", "Unknown type", "")}
    assert not unknown, f"{paper}: papermill --help-notebook shows no type for {sorted(unknown)}"
    # the annotations say what the runner's -p checks: an int parameter is Optional[int] or int
    for name, info in notebook_parameters(PAPERS[paper]).items():
        if info["type"] is int: assert inferred[name]["inferred_type_name"] in ("int", "Optional[int]"), (paper, name, inferred[name])


def test_parallel_reaches_the_notebooks_that_run_side_by_side(tmp_path):
    "fedlearn-repro run <paper> --parallel N sets the notebook parameter `parallel` (an int); a notebook without it is refused by name."
    from fedlearn_nb.tools.runner import main, plan_runs
    for paper in ("fedccl", "fedplcc", "benchmark", "ccfc", "cpcfl", "fedcrl"):
        plan, = plan_runs(paper, "smoke", [("parallel", "2")], tmp_path, ROOT / "papers")
        assert plan.parameters["parallel"] == 2, paper
    # a notebook without the parameter (FedCRL's, with its `parallel` line taken out) is refused, not run one after another
    papers = tmp_path / "papers"
    papers.mkdir()
    notebook = json.loads((ROOT / "papers" / "fedcrl.ipynb").read_text())
    cell = next(c for c in notebook["cells"] if "parameters" in c["metadata"].get("tags", []))
    cell["source"] = [line for line in "".join(cell["source"]).splitlines(keepends=True) if not line.startswith("parallel:")]
    (papers / "fedcrl.ipynb").write_text(json.dumps(notebook))
    assert "parallel" not in notebook_parameters(papers / "fedcrl.ipynb")
    assert main(["--papers-dir", str(papers), "run", "fedcrl", "--parallel", "2", "--dry-run"]) == 2
