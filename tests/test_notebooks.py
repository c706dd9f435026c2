"Run every chapter notebook's inline tests (nbdev-test), one pytest test per notebook."
import json
import re
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


# Words that point the reader at files and conversations they do not have: the specification notes, the issue
# tracker. A chapter states its own reading of a paper instead.
NOT_FOR_THE_READER = re.compile(r"\bspecs?\s*(?:§|\\u00a7)|\bthe spec\b|\bspecs/|\bissue\s*#?\d|\bthis chapter's issue\b",
                                re.IGNORECASE)


def reader_facing_text(notebook: Path) -> list[tuple[int, str]]:
    "Every markdown line and every code comment of a notebook, with its cell index."
    lines = []
    for index, cell in enumerate(json.loads(notebook.read_text())["cells"]):
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown": lines += [(index, line) for line in source.splitlines()]
        elif cell["cell_type"] == "code": lines += [(index, line[line.index("#"):]) for line in source.splitlines() if "#" in line]
    return lines


def test_chapters_speak_to_the_reader():
    "No chapter cites the spec notes or an issue."
    found = [f"{p.name} cell {i}: {line.strip()[:120]}" for p in NOTEBOOKS for i, line in reader_facing_text(p)
             if NOT_FOR_THE_READER.search(line)]
    assert not found, "chapters that point at what the reader does not have:\n" + "\n".join(found)


def test_the_reader_check_catches_what_it_should(tmp_path):
    notebook = tmp_path / "x.ipynb"
    notebook.write_text(json.dumps({"cells": [
        {"cell_type": "markdown", "source": ["We follow spec \u00a73.2 here.\n", "FedAvg averages the models.\n"]},
        {"cell_type": "code", "source": ["x = 1  # as this chapter's issue asks\n", "spec = 2\n"]}]}))
    hits = [line for _, line in reader_facing_text(notebook) if NOT_FOR_THE_READER.search(line)]
    assert hits == ["We follow spec \u00a73.2 here.", "# as this chapter's issue asks"]
    assert not NOT_FOR_THE_READER.search("CCFC (\u00a74.1) makes one client per cluster; the method's spec object")
