"""Golden histories: every registered algorithm, run on the embedded data with a fixed seed, must give the recorded history.

The histories in `tests/golden/histories.json` (every metric of every round, and the bytes sent each way) were recorded
before the code was reorganised; a change that alters any of them changes what a user's run computes. A change that is
*meant* to alter a result re-records that algorithm's history in a commit of its own that says why:

    python tests/test_golden_history.py --record fedavg,moon      # or --record all
"""
from __future__ import annotations

import json
import math
import sys
import tempfile
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "histories.json"
RECORDED_WITH = ROOT / "tests" / "golden" / "versions.json"   # the torch build the histories were recorded with
# relative tolerance on floats: the same code on the same torch is bit-identical; the slack only absorbs a different
# BLAS/torch build summing in another order (a reorganisation that changes *what* is computed moves far more than this)
RTOL, ATOL = 1e-5, 1e-7
# per algorithm: what differs from the main job's config (digits5lite, one client per domain, fedccl_cnn4, Adam)
SPECIAL = {
    "ccfc": dict(model="ccfc_simsiam", model_kwargs=dict(latent_dim=32, projector_hidden_dim=32, predictor_hidden_dim=8),
                 algorithm_kwargs=dict(pretrain_rounds=1, kmeans_n_init=1)),
    "scfc": dict(model="ccfc_simsiam", model_kwargs=dict(latent_dim=32, projector_hidden_dim=32, predictor_hidden_dim=8),
                 algorithm_kwargs=dict(kmeans_n_init=1)),
    "fedcclplus": dict(algorithm_kwargs=dict(attack_steps=2)),
    "fedavgplus": dict(algorithm_kwargs=dict(attack_steps=2)),
    # the GAN baselines of CCFC: small GANs, few synthetic images, one k-means restart (and a one-epoch DCN)
    "sdafc_km": dict(algorithm_kwargs=dict(gan_width=8, gan_hidden_dim=32, synthetic_per_client=64, kmeans_n_init=1)),
    "sdafc_fcm": dict(algorithm_kwargs=dict(gan_width=8, gan_hidden_dim=32, synthetic_per_client=64, kmeans_n_init=1)),
    "ppfcgan": dict(algorithm_kwargs=dict(gan_width=8, gan_hidden_dim=32, synthetic_per_client=64, kmeans_n_init=1,
                                          pretrain_epochs=1, dcn_epochs=1, dcn_batch_size=64, decoder_hidden_dims=(64,))),
}


def golden_config(name: str, results_dir: str):
    "The recorded run of algorithm `name`: the main job's set-up, 2 rounds of 3 local steps, seed 0."
    from fedlearn_nb.tools.main import main_config
    special = SPECIAL.get(name, {})
    config = main_config(name, rounds=2, seed=0, results_dir=results_dir, local_steps=3, **{k: v for k, v in special.items() if k != "algorithm_kwargs"})
    config.algorithm_kwargs.update(special.get("algorithm_kwargs", {}))
    return config


def record_history(name: str) -> list[dict]:
    "Run algorithm `name`'s golden config in a temporary folder and return its per-round records."
    from fedlearn_nb.engine import run
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as folder:
        history = run(golden_config(name, folder), resume=False, progress=False)
    return json.loads(json.dumps(history.records, default=float))


def registered_algorithms() -> list[str]:
    from fedlearn_nb import engine
    engine._import_all_algorithms()
    return sorted(engine.ALGORITHMS)


def _same(recorded, got) -> bool:
    "Equal, floats to RTOL/ATOL, recursing into per-client lists and dicts."
    if isinstance(recorded, dict) and isinstance(got, dict):
        return recorded.keys() == got.keys() and all(_same(recorded[k], got[k]) for k in recorded)
    if isinstance(recorded, list) and isinstance(got, list):
        return len(recorded) == len(got) and all(_same(a, b) for a, b in zip(recorded, got))
    if isinstance(recorded, float) or isinstance(got, float):
        if recorded is None or got is None: return recorded is got
        if math.isnan(recorded) or math.isnan(got): return math.isnan(recorded) and math.isnan(got)
        return math.isclose(recorded, got, rel_tol=RTOL, abs_tol=ATOL)
    return recorded == got


def compare(recorded: list[dict], got: list[dict]) -> list[str]:
    "Every difference between two histories, one line each (empty: identical)."
    problems = [] if len(recorded) == len(got) else [f"{len(got)} rounds recorded, expected {len(recorded)}"]
    for expected, actual in zip(recorded, got):
        for key in sorted(set(expected) | set(actual)):
            if key not in actual: problems.append(f"round {expected.get('round')}: metric {key!r} is missing")
            elif key not in expected: problems.append(f"round {expected.get('round')}: new metric {key!r}")
            elif not _same(expected[key], actual[key]):
                problems.append(f"round {expected.get('round')}: {key} = {actual[key]!r}, recorded {expected[key]!r}")
    return problems


GOLDEN_HISTORIES = json.loads(GOLDEN.read_text()) if GOLDEN.is_file() else {}


def torch_note() -> str:
    "A hint when the running torch differs from the one the histories were recorded with (empty when it is the same)."
    recorded = json.loads(RECORDED_WITH.read_text()).get("torch") if RECORDED_WITH.is_file() else None
    if recorded in (None, torch.__version__): return ""
    return (f"\n(recorded with torch {recorded}, running torch {torch.__version__}: another torch build sums in another "
            "order, and a method with discrete steps, such as a sign-gradient attack or a cluster count, can turn that "
            "rounding into a different result; re-record only after checking that the code is not the cause)")


def test_every_registered_algorithm_has_a_golden_history():
    assert sorted(GOLDEN_HISTORIES) == registered_algorithms(), "record the new algorithm: python tests/test_golden_history.py --record NAME"


@pytest.mark.parametrize("name", sorted(GOLDEN_HISTORIES))
def test_history_is_unchanged(name):
    problems = compare(GOLDEN_HISTORIES[name], record_history(name))
    assert not problems, f"{name}'s history changed:\n" + "\n".join(problems[:20]) + torch_note()


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


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "--record":
        sys.exit("usage: python tests/test_golden_history.py --record all|NAME[,NAME...]")
    names = registered_algorithms() if sys.argv[2] == "all" else sys.argv[2].split(",")
    histories = dict(GOLDEN_HISTORIES)
    for name in names:
        histories[name] = record_history(name)
        print(f"recorded {name}: {len(histories[name])} rounds")
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    GOLDEN.write_text(json.dumps(dict(sorted(histories.items())), indent=1, sort_keys=True) + "\n")
    RECORDED_WITH.write_text(json.dumps({"torch": torch.__version__}) + "\n")
