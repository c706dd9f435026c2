"Run every chapter notebook's inline tests (nbdev-test), one pytest test per notebook."
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p for p in (ROOT / "nbs").glob("*.ipynb") if not p.name.startswith("_"))


def test_there_are_chapters():
    assert len(NOTEBOOKS) >= 1, "no notebooks found in nbs/"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook(notebook: Path):
    # nbdev-test of this interpreter (not whatever `nbdev-test` is first on PATH)
    command = [sys.executable, "-c", "from nbdev.test import nbdev_test; nbdev_test()", "--n-workers", "0", str(notebook)]
    result = subprocess.run(command,
                            cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0 and "Success." in result.stdout, (
        f"{notebook.name} failed its inline tests:\n{result.stdout[-6000:]}\n{result.stderr[-6000:]}")
