"Run every chapter notebook's inline tests (nbdev-test), one pytest test per notebook."
import json
import queue
import re
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p for p in (ROOT / "nbs").glob("*.ipynb") if not p.name.startswith("_"))


def test_there_are_chapters():
    assert len(NOTEBOOKS) >= 1, "no notebooks found in nbs/"


class ChapterRunner:
    """One long-lived `chapter_server.py` per test worker: the chapters run one after another in it, as `nbdev-test` runs
    them, and pay torch's and the package's imports once. A chapter that times out or kills the runner fails alone; the
    next one starts a fresh runner, and so does a runner grown past `MAX_RSS_MB`."""
    MAX_RSS_MB = 4000

    def __init__(self):
        self.process = None

    def start(self):
        self.errors = tempfile.TemporaryFile("w+")        # what the runner itself says before it dies (a failed import)
        self.process = subprocess.Popen([sys.executable, str(ROOT / "tests" / "chapter_server.py")], cwd=ROOT, text=True,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errors, bufsize=1)
        self.replies = queue.Queue()
        threading.Thread(target=self._read, args=(self.process.stdout, self.replies), daemon=True).start()

    @staticmethod
    def _read(out, replies: queue.Queue):
        "Each reply line as it comes, then None when the runner closes its output (it died or was stopped)."
        for line in out: replies.put(line)
        replies.put(None)

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.kill(); self.process.wait()
        self.process = None

    def run(self, notebook: Path, timeout: float = 900) -> dict:
        if self.process is None or self.process.poll() is not None: self.start()
        self.process.stdin.write(f"{notebook}\n"); self.process.stdin.flush()
        try: line = self.replies.get(timeout=timeout)
        except queue.Empty:
            self.stop()
            return {"passed": False, "log": f"timed out after {timeout:.0f} s"}
        if line is None:
            code = self.process.wait(); self.stop()
            self.errors.seek(0)
            return {"passed": False, "log": f"the chapter runner died (exit status {code}):\n{self.errors.read()[-6000:]}"}
        reply = json.loads(line)
        if reply["rss_mb"] > self.MAX_RSS_MB: self.stop()
        return reply


@pytest.fixture(scope="session")
def chapter_runner():
    runner = ChapterRunner()
    yield runner
    runner.stop()


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook(notebook: Path, chapter_runner, record_property):
    reply = chapter_runner.run(notebook)
    record_property("child_cpu", reply.get("cpu_seconds", 0.0))
    assert reply["passed"], f"{notebook.name} failed its inline tests:\n{reply['log']}"


def test_a_failing_chapter_fails_and_the_next_one_still_runs(tmp_path, chapter_runner):
    "The shared runner reports a chapter's failing assertion with its traceback, and runs the next chapter afresh."
    failing, passing = tmp_path / "failing.ipynb", tmp_path / "passing.ipynb"
    cell = lambda source: {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": source}
    book = lambda *cells: json.dumps({"cells": list(cells), "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    failing.write_text(book(cell("import os\nos.environ['CHAPTER_LEFTOVER'] = '1'"), cell("assert 1 + 1 == 3, 'arithmetic broke'")))
    passing.write_text(book(cell("import os\nassert 'CHAPTER_LEFTOVER' not in os.environ")))
    reply = chapter_runner.run(failing)
    assert not reply["passed"] and "arithmetic broke" in reply["log"]
    assert chapter_runner.run(passing)["passed"]        # the first chapter's environment variable was put back


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
