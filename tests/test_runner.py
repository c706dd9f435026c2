"End-to-end tests of the paper runner (`fedlearn-repro`, fedlearn_nb.tools.runner) on tiny generated notebooks and the real ones."
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pandas as pd
import pytest

from fedlearn_nb.tools import runner
from fedlearn_nb.tools.runner import (PAPERS, SCALES, discover_papers, main, notebook_parameters, notebook_scales,
                                publish_run, read_tables, write_example_paper)

ROOT = Path(__file__).resolve().parents[1]
CORE_PARAMETERS = {"scale", "seeds", "rounds", "methods", "datasets", "results_dir", "device"}


@pytest.fixture
def papers(tmp_path):
    "A papers folder with the example paper, a failing one and one whose parameters tag was stripped."
    folder = tmp_path / "papers"
    write_example_paper(folder / "example.ipynb")
    write_example_paper(folder / "failing.ipynb", fail=True)
    write_example_paper(folder / "untagged.ipynb", tagged=False)
    return folder


def call(capsys, *argv):
    status = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def only_run(results: Path, paper: str, scale: str = "smoke") -> Path:
    runs = sorted((results / "papers" / paper / scale).iterdir())
    assert len(runs) == 1, runs
    return runs[0]


def test_run_writes_a_dated_folder_and_prints_the_tables(papers, tmp_path, capsys):
    status, out, err = call(capsys, "--papers-dir", papers, "run", "example", "-p", "seeds", "0,1,2", "-p", "rounds", "5",
                            "--results-dir", tmp_path / "results", "--no-progress", "--threads", "1")
    assert status == 0, out + err
    folder = only_run(tmp_path / "results", "example")
    assert len(folder.name) == len("20250101-120000") and folder.name[8] == "-"
    assert sorted(p.name for p in folder.iterdir()) == ["example.ipynb", "runner.json", "table_1.csv"]
    table = pd.read_csv(folder / "table_1.csv").set_index("method")
    assert table.loc["FedAvg", "ours"] == 50 + 5 + 3          # rounds and seeds reached the notebook
    record = json.loads((folder / "runner.json").read_text())
    assert record["ok"] and record["parameters"]["seeds"] == "0,1,2" and record["scale"] == "smoke"
    executed = nbformat.read(folder / "example.ipynb", as_version=4)
    assert any("injected-parameters" in c.metadata.get("tags", []) for c in executed.cells)
    assert "Table 1 (ours vs the paper's)" in out and "not implemented: Theirs" in out
    assert "Summary" in out and "example: ok" in out


def test_the_kernel_runs_quietly(papers, tmp_path, capfd):
    "The notebook's kernel is started with our quiet arguments: no plain-TCP banner on the terminal (captured at the fd level)."
    status = main([str(a) for a in ("--papers-dir", papers, "run", "example", "--results-dir", tmp_path / "results", "--no-progress")])
    out, err = capfd.readouterr()
    assert status == 0, out + err
    assert "example: ok" in out and "Kernel is running over TCP" not in out + err


def test_an_untagged_parameters_cell_still_takes_the_values(papers, tmp_path, capsys):
    # nbdev-clean strips the `parameters` tag unless pyproject allows "tags": the runner tags the cell itself, so
    # that the given values are injected *after* the defaults instead of being overwritten by them
    status, out, err = call(capsys, "--papers-dir", papers, "run", "untagged", "-p", "rounds", "7",
                            "--results-dir", tmp_path / "results", "--no-progress")
    assert status == 0, out + err
    folder = only_run(tmp_path / "results", "untagged")
    assert pd.read_csv(folder / "table_1.csv").set_index("method").loc["Ours", "ours"] == 60 + 7


def test_a_failing_notebook_is_reported_and_kept(papers, tmp_path, capsys):
    status, out, err = call(capsys, "--papers-dir", papers, "run", "example,failing", "--results-dir", tmp_path / "results",
                            "--no-progress")
    assert status == 1
    assert "example: ok" in out and "failing: FAILED" in out and "fails on purpose" in out
    folder = only_run(tmp_path / "results", "failing")
    record = json.loads((folder / "runner.json").read_text())
    assert not record["ok"] and "fails on purpose" in record["error"]
    assert (folder / "failing.ipynb").is_file()  # the executed notebook, up to the failing cell
    with pytest.raises(ValueError, match="failed"): publish_run(folder)


@pytest.mark.parametrize("argv, message", [
    (["run", "nope"], "unknown paper(s) 'nope'; valid: example, failing, untagged, all"),
    (["run", "example", "--scale", "tiny"], "unknown scale for example: 'tiny'; valid: smoke, quick, paper"),
    (["run", "example", "-p", "epochs", "3"], "unknown parameter(s) for example: 'epochs'; valid: seeds, rounds, results_dir, device"),
    (["run", "example", "-p", "scale", "quick"], "set scale with --scale"),
    (["run", "example", "-p", "round", "3"], "unknown parameter(s) for example: 'round' (did you mean 'rounds'?); valid: seeds,"),
    (["run", "exampel"], "unknown paper(s) 'exampel' (did you mean 'example'?); valid: example, failing, untagged, all"),
    (["run", "example", "-p", "seeds", "x,y"], "example: parameter seeds: seeds must be comma-separated non-negative integers, "
                                               "e.g. '0,1,2'; got 'x,y'"),
    (["run", "example", "-p", "results_dir", "elsewhere"], "the base folder is given twice"),
])
def test_bad_requests_are_refused_with_the_valid_choices(papers, tmp_path, capsys, argv, message):
    "Refused before anything runs or is written (bad seeds used to fail only inside the kernel, after the run folder existed)."
    status, out, err = call(capsys, "--papers-dir", papers, *argv, "--results-dir", tmp_path / "results")
    assert status == 2 and message in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in out + err, err
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("how", ["--results-dir", "FEDLEARN_RESULTS_DIR"])
@pytest.mark.parametrize("dry_run", [True, False])
def test_a_results_folder_that_is_a_file_is_named_with_its_fix(papers, tmp_path, capsys, monkeypatch, how, dry_run):
    "A results folder through a file (it raised a raw NotADirectoryError) is one line naming what set it and the fix."
    afile = tmp_path / "afile"; afile.write_text("not a folder")
    where = ["--results-dir", afile] if how == "--results-dir" else []
    if how != "--results-dir": monkeypatch.setenv(how, str(afile))
    status, out, err = call(capsys, "--papers-dir", papers, "run", "example", *where, *(["--dry-run"] if dry_run else []))
    fix = "pass --results-dir a folder" if how == "--results-dir" else "point FEDLEARN_RESULTS_DIR at a folder, or unset it"
    assert status == 2 and f"{afile} is a file, not a folder; {fix}" in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in out + err
    assert afile.read_text() == "not a folder" and sorted(p.name for p in tmp_path.iterdir()) == ["afile", "papers"]


def test_p_results_dir_is_the_base_folder_as_listed(papers, tmp_path, capsys):
    "`list` shows results_dir as a parameter, and `-p results_dir` is accepted as the base folder (it used to be refused)."
    status, out, err = call(capsys, "--papers-dir", papers, "list")
    assert status == 0 and "results_dir" in out and "(the base folder of the dated run folders, as --results-dir)" in out
    status, out, err = call(capsys, "--papers-dir", papers, "run", "example", "-p", "results_dir", tmp_path / "base", "--dry-run")
    assert status == 0, err
    assert f"writes to:  {(tmp_path / 'base').resolve()}/papers/example/smoke/" in out and f"{tmp_path / 'base'} (-p results_dir)" in out
    assert not (tmp_path / "base").exists()


def test_a_torchvision_that_does_not_match_torch_is_named_before_anything_runs(papers, tmp_path, capsys, monkeypatch):
    "torchvision built for another torch fails at import ('operator torchvision::nms does not exist'); it used to kill the run "
    "in core.package_versions() after the run folder was made."
    def mismatched(): raise RuntimeError("operator torchvision::nms does not exist")
    monkeypatch.setattr(runner, "_import_torchvision", mismatched)
    status, out, err = call(capsys, "--papers-dir", papers, "run", "example", "--results-dir", tmp_path / "results")
    assert status == 2 and "torchvision" in err and "operator torchvision::nms does not exist" in err, err
    assert "pip install --force-reinstall \"torch==" in err and "torchvision==0." in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in out + err
    assert not (tmp_path / "results").exists()
    monkeypatch.undo()
    assert runner.torch_install_problem() == ""  # this machine's pair imports


def test_settings_come_from_the_project_not_the_working_folder(tmp_path, capsys, monkeypatch):
    "From /tmp (outside the checkout), results used to go to ./results and data was looked up from there."
    monkeypatch.delenv("FEDLEARN_SETTINGS", raising=False)
    for name in ("FEDLEARN_RESULTS_DIR", "FEDLEARN_DATA_ROOT"): monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    status, out, err = call(capsys, "run", "fedplcc", "--dry-run")
    assert status == 0, err
    assert f"settings: {ROOT / 'settings.ini'}" in out, out
    assert f"writes to:  {(ROOT / 'results').resolve()}/papers/fedplcc/smoke/" in out, out
    assert str(tmp_path) not in out and list(tmp_path.iterdir()) == []


def test_a_data_root_variable_pointing_nowhere_is_named(papers, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(PAPERS, "example", runner.PaperSpec("example", "Example", {s: ("mnist",) for s in SCALES}))
    monkeypatch.setenv("FEDLEARN_DATA_ROOT", str(tmp_path / "no-data"))
    status, out, err = call(capsys, "--papers-dir", papers, "run", "example", "--results-dir", tmp_path / "results")
    assert status == 2 and "none of its data is present" in err, err
    assert (f"The data folder {tmp_path / 'no-data'} does not exist (the environment variable FEDLEARN_DATA_ROOT set it): "
            "point FEDLEARN_DATA_ROOT at the folder that holds the datasets, or unset it") in err, err
    assert not (tmp_path / "results").exists()


def test_the_terminal_summary_is_one_line_per_table(papers, tmp_path, capsys, monkeypatch):
    "A table with no number of ours is one line (not 30 rows and '... 34 more rows'); no 'None' columns; notes cut at a word."
    def fake_execute(plan, **_):
        plan.output_dir.mkdir(parents=True)
        note = "stand-in: digits5lite (embedded, built from scikit-learn's digits) replaces digit5 (not available)"
        pd.DataFrame({"method": ["FedAvg", "FedPLCC"], "column": "MNIST", "ours": [18.0, 19.0], "paper": [90.1, 94.9],
                      "difference": [-72.1, -75.9], "note": note}).to_csv(plan.output_dir / "table_2.csv", index=False)
        for number in ("3", "4"):
            pd.DataFrame({"method": ["FedAvg"] * 64, "column": "Caltech", "ours": None, "paper": 62.5, "difference": None,
                          "note": "not run at smoke scale (its datasets: digits5lite)"}).to_csv(plan.output_dir / f"table_{number}.csv", index=False)
        return runner.RunOutcome(plan, True, 1.0)
    monkeypatch.setattr(runner, "execute_plan", fake_execute)
    status, out, err = call(capsys, "--papers-dir", papers, "run", "example", "--results-dir", tmp_path / "results")
    assert status == 0, err
    for number in ("3", "4"):
        assert f"Table {number}: none of its 64 entries has a number of ours (not run at smoke scale (its datasets: digits5lite))" in out
    assert "more rows" not in out and "not run at smoke scale" not in out.split("Table 4:")[1].split("=== Summary")[0].split("\n", 1)[1]
    summary = out.split("=== Summary")[1]
    assert "None" not in summary and "replaces digi\n" not in out and "digits) replaces ...\n" in out, out
    assert all(len(line) < 200 for line in summary.splitlines())


SLOW = ["run", "slow", "--no-progress"]


def test_ctrl_c_stops_cleanly_and_the_same_command_continues(tmp_path, capsys):
    "Ctrl-C (SIGINT to the command's process group, as a terminal sends it) during a run: no traceback (there were two, "
    "a ZMQError and a KeyboardInterrupt), a line saying how to continue, and the same command again continues the folder."
    import signal, time
    papers = tmp_path / "papers"
    write_example_paper(papers / "slow.ipynb", pause=300)
    argv = ["--papers-dir", str(papers), *SLOW, "--results-dir", str(tmp_path / "results")]
    process = subprocess.Popen([sys.executable, "-m", "fedlearn_nb.tools.runner", *argv], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True, cwd=ROOT)
    began = time.monotonic()
    while not list((tmp_path / "results").rglob("started")) and process.poll() is None and time.monotonic() - began < 300:
        time.sleep(0.2)  # until the notebook's waiting cell runs
    assert process.poll() is None, process.communicate()
    os.killpg(process.pid, signal.SIGINT)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 130, out + err
    assert "Traceback" not in out + err and "ZMQError" not in out + err, out + err
    folder = only_run(tmp_path / "results", "slow")
    assert f"interrupted: continue with fedlearn-repro --papers-dir {papers} run slow --no-progress --results-dir " in err
    assert "--resume" in err and str(folder) in err, err
    record = json.loads((folder / "runner.json").read_text())
    assert record["state"] == "interrupted" and not record["ok"] and (folder / "slow.ipynb").is_file()
    with pytest.raises(ValueError, match="did not finish"): publish_run(folder)
    status, out, err = call(capsys, *argv, "--dry-run")  # the same command, no --resume, would continue the interrupted folder
    assert status == 0, out + err
    assert f"writes to:  {folder} (continues the unfinished run of this command, interrupted at" in out, out
    status, out, err = call(capsys, *argv, "--new", "--dry-run")
    assert status == 0 and f"writes to:  {folder}" not in out


def test_dry_run_names_missing_data(papers, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(PAPERS, "example", runner.PaperSpec("example", "Example", {s: ("digits", "mnist") for s in SCALES}))
    monkeypatch.setenv("FEDLEARN_DATA_ROOT", str(tmp_path / "no-data"))
    status, out, err = call(capsys, "--papers-dir", papers, "run", "example", "--scale", "quick", "--dry-run",
                            "--results-dir", tmp_path / "results")
    assert status == 0, err
    assert "digits: present" in out and "mnist: missing" in out and str(tmp_path / "no-data") in out
    assert "dry run" in out and not (tmp_path / "results").exists()


def test_resume_reuses_the_newest_folder_and_publish_copies_the_tables(papers, tmp_path, capsys):
    results = tmp_path / "results"
    assert call(capsys, "--papers-dir", papers, "run", "example", "--results-dir", results, "--no-progress")[0] == 0
    first = only_run(results, "example")
    assert call(capsys, "--papers-dir", papers, "run", "example", "--resume", "--results-dir", results, "--no-progress")[0] == 0
    assert only_run(results, "example") == first
    target = publish_run(first, tmp_path / "papers" / "results" / "example" / "smoke")
    assert sorted(p.name for p in target.iterdir()) == ["example.ipynb", "runner.json", "table_1.csv"]  # the executed notebook too
    assert list(read_tables(target)) == ["1"]
    extra = tmp_path / "papers" / "results" / "example" / "smoke" / "more-rounds"   # a supplementary run beside the main one
    status, out, _ = call(capsys, "--papers-dir", papers, "publish", first, "--to", extra)
    assert status == 0 and str(extra) in out and (extra / "table_1.csv").is_file() and (target / "table_1.csv").is_file()
    assert runner.committed_results("example", tmp_path / "papers" / "results") == (target, "smoke")


def test_module_entry_point_lists_the_papers(papers):
    result = subprocess.run([sys.executable, "-m", "fedlearn_nb.tools.runner", "--papers-dir", str(papers), "list"],
                            capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert "example: Example paper" in result.stdout and "seeds" in result.stdout


# --- the real paper notebooks ------------------------------------------------------------------------------------

REAL = discover_papers(ROOT / "papers") if (ROOT / "papers").is_dir() else {}


@pytest.mark.parametrize("paper", sorted(PAPERS))
def test_papermill_reads_every_parameter_of_the_paper_notebook(paper, caplog):
    "Papermill's own inspection finds exactly the parameters our runner parses, without 'Unable to parse line' warnings."
    import logging, papermill
    with caplog.at_level(logging.WARNING, logger="papermill"):
        found = papermill.inspect_notebook(str(ROOT / "papers" / f"{paper}.ipynb"))
    assert not [r.getMessage() for r in caplog.records if "Unable to parse" in r.getMessage()]
    assert set(found) == set(notebook_parameters(ROOT / "papers" / f"{paper}.ipynb"))


@pytest.mark.parametrize("paper", sorted(PAPERS))
def test_registry_agrees_with_the_paper_notebook(paper):
    if paper not in REAL: pytest.skip(f"papers/{paper}.ipynb does not exist yet")
    path = REAL[paper]
    assert set(notebook_scales(path)) == set(PAPERS[paper].data), "the notebook's SCALES and runner.PAPERS disagree"
    missing = CORE_PARAMETERS - set(notebook_parameters(path))
    assert not missing, f"{path.name} lacks the core parameters {sorted(missing)}"


def test_every_paper_notebook_is_in_the_registry():
    unknown = sorted(set(REAL) - set(PAPERS))
    assert not unknown, f"add {unknown} to fedlearn_nb.tools.runner.PAPERS (data per scale and its tables)"


# the cheapest real paper at smoke scale, with the parameters that keep it to about a minute on 2 CPU cores
SMOKE_RUNS = {"fedplcc": ["-p", "rounds", "1", "-p", "sweeps", "none", "-p", "ablations", "False", "-p", "methods", "FedAvg,FedPLCC"]}


@pytest.mark.parametrize("paper", sorted(SMOKE_RUNS))
def test_a_real_paper_notebook_at_smoke_scale(paper, tmp_path, capsys):
    if paper not in REAL: pytest.skip(f"papers/{paper}.ipynb does not exist yet")
    status, out, err = call(capsys, "run", paper, "--scale", "smoke", *SMOKE_RUNS[paper], "--results-dir", tmp_path,
                            "--no-progress", "--threads", "1", "--max-rows", "5")
    folder = only_run(tmp_path, paper)
    assert status == 0, f"{out[-3000:]}\n{err[-3000:]}\nsee {folder / (paper + '.ipynb')}"
    tables = read_tables(folder)
    assert tables, f"{paper} wrote no table_<n>.csv"
    for number, frame in tables.items():
        assert {"ours", "paper", "difference"} <= set(frame.columns), f"table {number}: {list(frame.columns)}"
    assert any(frame["ours"].notna().any() for frame in tables.values()), "no table has any number of ours"
    assert "Summary" in out


def test_jupyter_can_execute_the_cli_chapters(tmp_path):
    "The chapters whose last cell defines the `python -m` entry point run top to bottom in a kernel (main() used to parse the kernel's argv)."
    import nbformat
    from nbclient import NotebookClient
    for name in ("94_main.ipynb", "91_runner.ipynb"):
        nb = nbformat.read(ROOT / "nbs" / name, as_version=4)
        last = [c for c in nb.cells if c.cell_type == "code" and "__main__" in c.source]
        assert last, name
        nb.cells = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith("#| export")]  # the library's cells, entry point last
        NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()


def test_the_benchmark_is_listed_but_not_counted_as_a_paper():
    "papers/benchmark.ipynb (our own comparison) runs and publishes like a paper, but the status page counts only papers."
    if "benchmark" not in REAL: pytest.skip("papers/benchmark.ipynb does not exist yet")
    assert "benchmark: Benchmark" in runner.list_papers(ROOT / "papers")
    assert not PAPERS["benchmark"].is_paper and "benchmark" not in {s.key for s in runner.paper_specs()}
    status = runner.reproduction_status(ROOT / "papers" / "results")
    assert "benchmark" not in set(status.paper) and len(status) == sum(len(s.tables) for s in runner.paper_specs())


def test_no_note_calls_a_built_method_missing():
    "The registry's notes name no registered algorithm as not implemented (FedAMP, FedALA, FedPAC and FedGH once were)."
    registered = runner.registered_algorithms()
    assert {"fedamp", "fedala", "fedpac", "fedgh"} <= registered
    assert runner.stale_unbuilt_methods("FedAMP, FedALA, FedPAC and FedGH rows say 'not implemented'", registered) == [
        "FedAMP", "FedALA", "FedPAC", "FedGH"]
    stale = {(spec.key, table.number): runner.stale_unbuilt_methods(table.note, registered)
             for spec in PAPERS.values() for table in spec.tables}
    assert not {key: methods for key, methods in stale.items() if methods}


def test_status_flags_committed_rows_of_methods_built_since(tmp_path):
    "A committed run whose rows call a now-registered method 'not implemented' is reported as stale, not as the truth."
    folder = tmp_path / "ccfc" / "quick"; folder.mkdir(parents=True)
    pd.DataFrame({"method": ["FedAvg", "PPFC-GAN", "SDA-FC-KM"], "column": "MNIST", "ours": [0.5, None, None], "paper": [0.6, 0.7, 0.8],
                  "difference": [-0.1, None, None], "note": ["", "not implemented: needs a GAN", "not implemented"]}
                 ).to_csv(folder / "table_1.csv", index=False)
    status = runner.reproduction_status(tmp_path).set_index(["paper", "table"])
    assert status.loc[("ccfc", "1"), "committed"] == ("reproduced on real data (quick), 1 of 3 entries; PPFC-GAN, SDA-FC-KM marked "
                                                     "not implemented in this run but built since (run it again to fill)")


@pytest.mark.parametrize("answer, continued", [("", True), ("n", False)])
def test_at_a_terminal_the_same_command_asks_before_continuing(papers, tmp_path, capsys, monkeypatch, answer, continued):
    "An interrupted run of the same command is continued without a question in a script, and after one at a terminal."
    first = runner.plan_runs("example", "smoke", [("rounds", "2")], tmp_path / "results", papers, check=False)[0]
    first.output_dir.mkdir(parents=True)
    (first.output_dir / "runner.json").write_text(json.dumps({"state": "interrupted", "interrupted": "2025-01-01T12:00:00",
                                                              "parameters": first.parameters}))
    asked, ran = [], []
    monkeypatch.setattr(runner, "_interactive", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt: asked.append(prompt) or answer)
    monkeypatch.setattr(runner, "execute_plan", lambda plan, **_: ran.append(plan.output_dir) or runner.RunOutcome(plan, True, 0.0))
    status, out, err = call(capsys, "--papers-dir", papers, "run", "example", "-p", "rounds", "2", "--results-dir", tmp_path / "results")
    assert status == 0, err
    assert len(asked) == 1 and str(first.output_dir) in asked[0] and "interrupted at 2025-01-01T12:00:00" in asked[0]
    assert (ran == [first.output_dir]) == continued and len(ran) == 1
