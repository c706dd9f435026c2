"Shared pytest fixtures and options for fedlearn_nb's test suite."
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("FEDLEARN_SETTINGS", str(ROOT / "settings.ini"))
# pytest -n 2 on a 2-core machine: one math thread per worker (and per notebook subprocess, which inherits it),
# otherwise the workers oversubscribe the cores and every test runs several times slower.
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"): os.environ.setdefault(_var, "1")
# No MPLBACKEND here: a notebook kernel started with MPLBACKEND=Agg shows no inline figures (the docs test checks them).
os.environ.pop("MPLBACKEND", None) if os.environ.get("MPLBACKEND", "").lower() == "agg" else None


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
