"Run every chapter notebook's inline tests (nbdev-test), one pytest test per notebook."
import shutil
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
    # the nbdev-test script installed beside this interpreter (not whatever is first on PATH); not `python -c`:
    # a `-c` main is re-run by child processes that nbdev's test runner starts, which runs every notebook twice
    script = shutil.which("nbdev-test", path=str(Path(sys.executable).parent)) or shutil.which("nbdev-test")
    command = [script, "--n-workers", "0", str(notebook)]
    result = subprocess.run(command,
                            cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0 and "Success." in result.stdout, (
        f"{notebook.name} failed its inline tests:\n{result.stdout[-6000:]}\n{result.stderr[-6000:]}")
