"""Nothing lost on a crash: a run killed (SIGKILL) at any moment resumes to the full history, and the result files
always say what the checkpoint says; a refused resume writes nothing; result files get the usual file mode.

The kills are real: a forked child runs the experiment and is SIGKILLed, either at a chosen write (every write of the
last round, before its rename and after) or at a random moment; the parent then resumes in the same folder."""
import json
import os
import random
import signal
import time

import numpy as np
import pytest
import torch

from fedlearn_nb import core, loop
from fedlearn_nb.core import torch_generator
from fedlearn_nb.history import History
from fedlearn_nb.loop import CHECKPOINT_NAME
from fedlearn_nb.experiment import RunConfig, run, run_folder
from fedlearn_nb.federation import FederatedData

# One xdist group: under `pytest -n 2 --dist loadgroup` this module's tests share a worker, so its module fixtures run once.
pytestmark = [pytest.mark.skipif(not hasattr(os, "fork"), reason="the kill tests fork a child process (POSIX only)"),
              pytest.mark.xdist_group("crash_safety")]
RESULT_FILES = ("config.json", "history.json", "history.csv", "clients.csv")
ROUNDS = 3


class Images:
    def __init__(self, x, y): self.x, self.y, self.classes, self.name = x, y, [str(i) for i in range(4)], "synthetic"


@pytest.fixture(scope="module")
def federation() -> FederatedData:
    "Three small clients of 1x12x12 images in four classes (a bright row per class): a round takes milliseconds."
    torch.set_num_threads(1)
    g = torch_generator(0)
    def make(n):
        y = torch.randint(0, 4, (n,), generator=g)
        x = 0.3 * torch.rand(n, 1, 12, 12, generator=g)
        x[torch.arange(n), 0, 3 * y] += 0.7
        return Images(x, y)
    train = make(90)
    return FederatedData.from_partition(train, np.array_split(np.arange(90), 3), test=make(30), seed=0)


def config(tmp_path, **kw) -> RunConfig:
    base = dict(dataset="synthetic", partition="iid", model="fedccl_cnn4", model_kwargs={"hidden_dims": [16], "conv_channels": [4]},
                rounds=ROUNDS, batch_size=10, lr=0.05, seed=1, device="cpu", results_dir=str(tmp_path), name="run")
    base.update(kw)
    return RunConfig(**base)


@pytest.fixture(scope="module")
def uninterrupted(federation, tmp_path_factory) -> History:
    return run(config(tmp_path_factory.mktemp("full")), progress=False, data=federation)


def in_child(function) -> int:
    "Run `function` in a forked child; return the signal that ended it (0 when it exited)."
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 1
        try: function(); code = 0
        except BaseException: pass
        finally: os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0


def assert_files_match(folder, expected: History):
    "history.json, history.csv and clients.csv hold exactly `expected`; no temporary file is left; config.json is readable."
    assert History.load(folder).same_as(expected)
    frame = expected.to_frame()
    csv = __import__("pandas").read_csv(folder / "history.csv")
    assert csv["round"].tolist() == frame["round"].tolist()
    np.testing.assert_allclose(csv["accuracy_weighted"], frame["accuracy_weighted"])
    clients = __import__("pandas").read_csv(folder / "clients.csv")
    assert sorted(set(clients["round"])) == list(range(1, len(expected) + 1))
    assert len(clients) == len(expected) * 3
    assert json.loads((folder / "config.json").read_text())["config"]["name"] == "run"
    assert not [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


def kill_at_write(number: int, torn: bool):
    """Patch the atomic writer (in this child only) so that its `number`-th write SIGKILLs the process: before the data
    is renamed into place (`torn`: the temporary file is left half-written) or right after the rename."""
    calls = {"n": 0}
    original = core.atomic_write_bytes
    def writer(path, data):
        path = __import__("pathlib").Path(path)
        calls["n"] += 1
        if calls["n"] == number:
            if torn:
                (path.parent / f".{path.name}.abcd1234.tmp").write_bytes(data[: len(data) // 2])
                os.kill(os.getpid(), signal.SIGKILL)
            original(path, data)
            os.kill(os.getpid(), signal.SIGKILL)
        return original(path, data)
    core.atomic_write_bytes = writer
    loop.atomic_write_bytes = writer


# writes of a run: config.json, then per round checkpoint, history.json, history.csv, clients.csv
LAST_ROUND_WRITES = range(1 + 4 * (ROUNDS - 1) + 1, 1 + 4 * ROUNDS + 1)


@pytest.mark.parametrize("torn", [True, False], ids=["before-rename", "after-rename"])
def test_a_kill_at_any_write_of_the_last_round_resumes_to_the_full_history(tmp_path, federation, uninterrupted, torn):
    "The window of the bug: checkpoint of the last round written, its history files not (or only some) yet."
    for number in LAST_ROUND_WRITES:
        cfg = config(tmp_path / f"kill{number}")
        def killed_run():
            kill_at_write(number, torn)
            run(cfg, progress=False, data=federation)
        assert in_child(killed_run) == signal.SIGKILL, f"write {number} did not kill the child"
        folder = run_folder(cfg)
        resumed = run(cfg, progress=False, data=federation)
        assert resumed.same_as(uninterrupted), f"killed at write {number}"
        assert_files_match(folder, uninterrupted)


def test_random_sigkills_always_resume_to_the_full_history(tmp_path, federation, uninterrupted):
    "SIGKILL a child at random moments of a run (a fixed number of times), resume after each: same history, files agree."
    began = time.perf_counter()
    run(config(tmp_path / "timing"), progress=False, data=federation)
    duration = time.perf_counter() - began
    draw = random.Random(16)
    cfg = config(tmp_path / "killed")
    for attempt in range(5):
        pid = os.fork()
        if pid == 0:
            try: run(cfg, progress=False, data=federation)
            finally: os._exit(0)
        time.sleep(draw.uniform(0, duration))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        resumed = run(cfg, progress=False, data=federation)
        assert resumed.same_as(uninterrupted), f"attempt {attempt}"
        assert_files_match(run_folder(cfg), uninterrupted)
        for name in (CHECKPOINT_NAME, *RESULT_FILES): (run_folder(cfg) / name).unlink(missing_ok=True)  # start over


def test_resume_repairs_result_files_cut_short_after_the_checkpoint(tmp_path, federation, uninterrupted):
    "As after a kill: checkpoint complete, history.json one round short, history.csv gone, clients.csv truncated, temp files."
    cfg = config(tmp_path)
    run(cfg, progress=False, data=federation)
    folder = run_folder(cfg)
    saved = json.loads((folder / "history.json").read_text())
    saved["records"], saved["seconds"] = saved["records"][:-1], saved["seconds"][:-1]
    (folder / "history.json").write_text(json.dumps(saved))
    (folder / "history.csv").unlink()
    (folder / "clients.csv").write_text((folder / "clients.csv").read_text()[:50])
    (folder / ".history.csv.q1w2e3r4.tmp").write_text("round,acc\n1,")
    assert len(History.load(folder)) == ROUNDS - 1
    resumed = run(cfg, progress=False, data=federation)   # finished: nothing to train, but the files are repaired
    assert resumed.same_as(uninterrupted)
    assert_files_match(folder, uninterrupted)


def test_a_refused_resume_writes_nothing(tmp_path, federation):
    "Resuming with another config (same folder name) is refused before config.json or any other file is touched."
    cfg = config(tmp_path, rounds=1)
    run(cfg, progress=False, data=federation)
    folder = run_folder(cfg)
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.iterdir()}
    with pytest.raises(ValueError, match="different experiment"):
        run(config(tmp_path, rounds=1, lr=0.1), progress=False, data=federation)
    after = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.iterdir()}
    assert after == before
    assert json.loads((folder / "config.json").read_text())["config"]["lr"] == 0.05  # the record of the finished round


def test_result_files_have_the_usual_mode(tmp_path, federation):
    "Under umask 022 every result file is 0644 (mkstemp's 0600 is not kept); under 027, 0640."
    for mask, mode in ((0o022, 0o644), (0o027, 0o640)):
        previous = os.umask(mask)
        try: run(config(tmp_path / oct(mask), rounds=1), progress=False, data=federation)
        finally: os.umask(previous)
        folder = run_folder(config(tmp_path / oct(mask)))
        modes = {p.name: oct(p.stat().st_mode & 0o777) for p in folder.iterdir()}
        assert modes == {name: oct(mode) for name in (*RESULT_FILES, CHECKPOINT_NAME)}
