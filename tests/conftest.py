"Shared pytest fixtures and options for fedlearn_nb's test suite."
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("FEDLEARN_SETTINGS", str(ROOT / "settings.ini"))
# pytest -n 2 on a 2-core machine: one math thread per worker (and per notebook subprocess, which inherits it),
# otherwise the workers oversubscribe the cores and every test runs several times slower.
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"): os.environ.setdefault(_var, "1")
# No MPLBACKEND here: a notebook kernel started with MPLBACKEND=Agg shows no inline figures (the docs test checks them).
os.environ.pop("MPLBACKEND", None) if os.environ.get("MPLBACKEND", "").lower() == "agg" else None


# ------------------------------------------------------------- CPU seconds per test, independent of the machine's load
# FEDLEARN_TEST_CPU=<folder>: each test worker writes <folder>/cpu-<pid>.json, test id -> CPU seconds of the test (its
# process and every child it waited for, plus what a long-lived helper process reports through the `child_cpu` user
# property). Wall times on a shared machine say how loaded it was; these say what each test costs.
_CPU = {}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if not os.environ.get("FEDLEARN_TEST_CPU"):
        yield; return
    from chapter_server import cpu_seconds   # tests/ is on sys.path beside this conftest
    began = cpu_seconds()
    yield
    _CPU[item.nodeid] = cpu_seconds() - began + sum(v for k, v in item.user_properties if k == "child_cpu")


def pytest_sessionfinish(session):
    folder = os.environ.get("FEDLEARN_TEST_CPU")
    if folder and _CPU:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / f"cpu-{os.getpid()}.json").write_text(json.dumps(_CPU, indent=0))


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False, help="also run tests marked slow")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--runslow"): return
    skip_slow = pytest.mark.skip(reason="slow: run with --runslow")
    for item in items:
        if "slow" in item.keywords: item.add_marker(skip_slow)


@pytest.fixture(scope="session")
def project_root() -> Path:
    return ROOT


# ---------------------------------------------------------------- the documentation sites, built once per worker
# test_docs_site.py (in Chromium) and test_links.py (every link) read the same two sites. Both modules carry
# xdist_group("sites"), so that `pytest -n 2 --dist loadgroup` runs them on one worker and each site is built once.
FIGURE_CHAPTER = os.environ.get("FEDLEARN_DOCS_FIGURE_CHAPTER", "03_partition")


@pytest.fixture(scope="session")
def figure_chapter() -> str:
    "The chapter that the project's site build executes, so that its figures exist: small, low in the layer stack, with a figure."
    return FIGURE_CHAPTER


@pytest.fixture(scope="session")
def project_site(tmp_path_factory, figure_chapter):
    "The project's site, built by the command line with one chapter executed (so that it has figures): (folder, report)."
    dest = tmp_path_factory.mktemp("docs") / "site"
    execute = figure_chapter if (ROOT / "nbs" / f"{figure_chapter}.ipynb").exists() else "-none-"
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "fedlearn_nb.tools.docs", "--path", str(ROOT), "--dest", str(dest),
                             "--execute-only", execute, "--no-progress"], capture_output=True, text=True, timeout=900)
    seconds = time.perf_counter() - start
    assert result.returncode == 0, f"the site build failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    print(f"site built in {seconds:.1f}s\n{result.stdout[-3000:]}")
    return dest, json.loads((dest / "build_report.json").read_text())


@pytest.fixture(scope="session")
def example_site(tmp_path_factory):
    "The docs tool's example project (a chapter with a figure and an equation, two paper pages), built and executed."
    from fedlearn_nb.tools.docs import build_site, make_example_project
    folder = tmp_path_factory.mktemp("example")
    project = make_example_project(folder / "demo")
    report = build_site(project, folder / "site", execute=True)
    return folder / "site", report
