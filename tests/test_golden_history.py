"""Golden histories: every registered algorithm, run on the embedded data with a fixed seed, computes what was recorded.

How runs are compared, on this processor and on others, and how to re-record: see tests/golden_histories.py.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from golden_histories import (DEFAULT_HISTORIES, FIRST_STEP_RECORDINGS, GOLDEN, PLATFORMS, ROOT, RECORDED_WITH, check, compare,
                              compare_first_steps, compare_invariants, digest, platform, platform_file, record_run,
                              registered_algorithms)

UNKNOWN = {"torch": torch.__version__, "capability": "SIMULATED", "vendor": "UnknownVendor", "extensions": ["avx9"]}


def hint(name: str, how: str) -> str:
    "What to check when `name`'s run differs from its recordings."
    recorded = json.loads(RECORDED_WITH.read_text()).get("torch") if RECORDED_WITH.is_file() else None
    lines = [f"(compared: {how})"]
    if recorded not in (None, torch.__version__):
        lines.append(f"(the default was recorded with torch {recorded}, this is torch {torch.__version__}: re-record only after "
                     "checking that the code is not the cause)")
    lines.append(f"(a change meant to alter results: re-record it in a commit of its own, python tests/golden_histories.py --record {name})")
    if how.startswith("exact"):
        lines.append("(if the code is not the cause, check out the last commit whose CI passed and run this test there; if it "
                     "fails there too, this processor's own recording is stale: python tests/golden_histories.py --record-platform "
                     f"{name})")
    return "\n".join(lines)


def test_every_registered_algorithm_has_a_golden_history_and_first_steps():
    assert sorted(DEFAULT_HISTORIES) == registered_algorithms(), "record the new algorithm: python tests/golden_histories.py --record NAME"
    assert sorted(FIRST_STEP_RECORDINGS) == registered_algorithms(), "record it: python tests/golden_histories.py --record NAME"


@pytest.mark.parametrize("name", sorted(DEFAULT_HISTORIES))
def test_history_is_unchanged(name):
    history, steps = record_run(name)
    problems, how = check(name, history, steps)
    assert not problems, f"{name}'s history changed:\n" + "\n".join(problems[:20]) + "\n" + hint(name, how)


def test_platform_recordings_match_the_default():
    "Each processor's recording is named for it, says where it came from, and was made beside today's default of each algorithm."
    names = set(registered_algorithms())
    for path in sorted(PLATFORMS.glob("*.json")):
        recording = json.loads(path.read_text())
        assert platform_file(recording["platform"]).name == path.name, f"{path.name} holds the recording of another platform"
        assert set(recording["histories"]) <= names, f"{path.name}: recordings of unregistered algorithms {sorted(set(recording['histories']) - names)}"
        assert set(recording["recorded"]) == set(recording["histories"]), f"{path.name}: say where each history was recorded from"
        for name, history in recording["histories"].items():
            made_beside = recording["recorded"][name]
            assert made_beside["from"], f"{path.name}: say which commit {name} was recorded from"
            assert made_beside["default"] == digest(DEFAULT_HISTORIES[name]), (
                f"{path.name}: {name}'s default history was re-recorded but this processor's was kept; drop it or re-record it "
                "(python tests/golden_histories.py --record NAME drops the others)")
            assert not compare_invariants(name, DEFAULT_HISTORIES[name], history), f"{path.name}: {name} breaks an invariant of the default"


def test_compare_sees_a_changed_metric():
    history = [{"round": 1, "accuracy_weighted": 0.5, "bytes_up": 100}]
    assert compare(history, [dict(history[0])]) == []
    assert compare(history, [{**history[0], "accuracy_weighted": 0.5 + 1e-6}]) == []                    # float slack
    assert compare(history, [{**history[0], "accuracy_weighted": 0.51}]) != []
    assert compare(history, [{**history[0], "bytes_up": 101}]) != []                                     # bytes are exact
    assert compare(history, [{"round": 1, "accuracy_weighted": 0.5}]) != []                              # a metric vanished
    assert compare(history, history + history) != []                                                     # a round more
    clients = [{"round": 1, "clients": [{"client": 0, "accuracy": 0.25}]}]
    assert compare(clients, [{"round": 1, "clients": [{"client": 0, "accuracy": 0.25 + 1e-9}]}]) == []
    assert compare(clients, [{"round": 1, "clients": [{"client": 0, "accuracy": 0.5}]}]) != []         # per-client values too


def test_invariants_ignore_rounding_but_not_structure():
    recorded = [{"round": 1, "accuracy": 0.5, "loss": float("nan"), "bytes_up": 1000, "participants": [0, 1],
                 "clients": [{"client": 0, "num_train": 10, "accuracy": 0.25}]}]
    assert compare_invariants("fedavg", recorded, [{**recorded[0], "accuracy": 0.9}]) == []              # any number
    for changed in ({"loss": 0.3}, {"bytes_up": 1001}, {"participants": [0]}, {"clients": [{"client": 0, "num_train": 11, "accuracy": 0.25}]}):
        assert compare_invariants("fedavg", recorded, [{**recorded[0], **changed}]) != [], changed
    assert compare_invariants("fedavg", recorded, [{k: v for k, v in recorded[0].items() if k != "accuracy"}]) != []
    assert compare_invariants("fedccl", recorded, [{**recorded[0], "bytes_up": 1040}]) == []             # a cluster count's rounding
    assert compare_invariants("fedccl", recorded, [{**recorded[0], "bytes_up": 1100}]) != []


def test_the_invariants_hold_between_the_recorded_processors():
    "The default and every processor's own recording differ in their numbers but share every invariant (real cross-processor data)."
    recordings = [json.loads(path.read_text())["histories"] for path in sorted(PLATFORMS.glob("*.json"))]
    assert recordings, "no processor has its own recording"
    differ = 0
    for histories in recordings:
        for name, history in histories.items():
            assert not compare_invariants(name, DEFAULT_HISTORIES[name], history), name
            differ += bool(compare(DEFAULT_HISTORIES[name], history))
    assert differ, "every recording equals the default: the portable comparison is not being exercised by real data"


def test_compare_first_steps_absorbs_rounding_and_sees_a_change():
    recorded = {"losses": [2.3, 2.2], "gradient": [[[6, 3], 0.05, -0.0002], [[6], 0.01, 0.003]], "upload": None}
    assert compare_first_steps(recorded, json.loads(json.dumps(recorded))) == []
    assert compare_first_steps(recorded, {**recorded, "losses": [2.3 * (1 + 1e-6), 2.2]}) == []          # rounding
    assert compare_first_steps(recorded, {**recorded, "losses": [2.3 * 1.001, 2.2]}) != []               # a 0.1 % change
    assert compare_first_steps(recorded, {**recorded, "losses": [2.3]}) != []                            # a step fewer
    assert compare_first_steps(recorded, {**recorded, "gradient": [[[6, 3], 0.05 * 1.001, -0.0002], [[6], 0.01, 0.003]]}) != []
    assert compare_first_steps(recorded, {**recorded, "gradient": [[[6, 3], 0.05, 0.0003], [[6], 0.01, 0.003]]}) != []  # direction
    assert compare_first_steps(recorded, {**recorded, "gradient": [[[3, 6], 0.05, -0.0002], [[6], 0.01, 0.003]]}) != []  # shape
    assert compare_first_steps(recorded, {**recorded, "gradient": None, "upload": [[[6], 0.01, 0.0]]}) != []


def test_a_deliberate_change_fails_on_this_processor_and_on_an_unknown_one(monkeypatch):
    "FedAvg's cross-entropy scaled by 1.001: the exact comparison (where there is one) and the portable one both fail."
    from fedlearn_nb.algorithms.fedavg import FedAvg
    from fedlearn_nb.engine import Algorithm
    history, steps = record_run("fedavg")
    assert not check("fedavg", history, steps, described=UNKNOWN)[0]
    monkeypatch.setattr(FedAvg, "loss", lambda self, model, x, y, context: 1.001 * Algorithm.loss(self, model, x, y, context))
    history, steps = record_run("fedavg")
    problems, how = check("fedavg", history, steps, described=UNKNOWN)
    assert how.startswith("portable") and any("loss" in line for line in problems), problems
    if platform_file().is_file() and "fedavg" in json.loads(platform_file().read_text())["histories"]:
        problems, how = check("fedavg", history, steps)
        assert how.startswith("exact") and problems


# A history that diverges across processors (Ditto: it shows the simulated processor rounds differently) and one with no
# gradient step (k-FED: no first steps to compare). Every other algorithm's portable comparison meets real cross-processor
# data in test_the_invariants_hold_between_the_recorded_processors.
SIMULATED = ["ditto", "kfed"]


def test_an_unknown_processor_with_other_rounding_passes():
    """Torch's kernels forced to its plain (non-vectorised) instruction set round differently from every recording, and
    no processor has a recording named for that: the portable comparison passes where the exact one would not."""
    script = (f"import sys, json; sys.path.insert(0, {str(ROOT / 'tests')!r}); import golden_histories as g\n"
              f"for name in {SIMULATED!r}:\n"
              "    history, steps = g.record_run(name)\n"
              "    problems, how = g.check(name, history, steps)\n"
              "    print(json.dumps([name, how, problems, bool(g.compare(g.DEFAULT_HISTORIES[name], history))]))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, cwd=ROOT,
                          env={**os.environ, "ATEN_CPU_CAPABILITY": "default", "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("[")]
    assert [name for name, *_ in results] == SIMULATED
    for name, how, problems, differs_from_default in results:
        assert how.startswith("portable"), (name, how)
        assert not problems, f"{name} on a simulated processor: {problems[:5]}"
    assert any(differs for *_, differs in results), "the simulated processor rounds like the default: it simulates nothing"
