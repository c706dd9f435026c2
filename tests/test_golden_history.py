"""Golden histories: every registered algorithm, run on the embedded data with a fixed seed, must give the recorded history.

The histories in `tests/golden/histories.json` (every metric of every round, and the bytes sent each way) were recorded
before the code was reorganised; a change that alters any of them changes what a user's run computes. A change that is
*meant* to alter a result re-records that algorithm's history in a commit of its own that says why:

    python tests/test_golden_history.py --record fedavg,moon      # or --record all

The same code on another processor can round differently (the kernels torch picks depend on the instruction set:
AVX2 or AVX-512, Intel or AMD), and Adam's normalised steps or a discrete choice (a cluster count, an argmax) can turn
that last-bit rounding into a different history. So a processor whose rounding differs from the default recording's
keeps its own recording in `tests/golden/platforms/<platform>.json`, used instead of the default on that processor:

    python tests/test_golden_history.py --record-platform all     # record this processor's histories (from code whose
                                                                  # default histories pass elsewhere: never to hide a change)
"""
from __future__ import annotations

import hashlib
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "histories.json"
PLATFORMS = ROOT / "tests" / "golden" / "platforms"          # per-processor recordings (see the module's docstring)
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
    from fedlearn_nb.experiment import run
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


def platform() -> dict:
    "What decides torch's CPU rounding here: its build, the instruction set its kernels use, the processor's vendor and vector extensions."
    flags, vendor = set(), "unknown"
    info = Path("/proc/cpuinfo")
    if info.is_file():
        for line in info.read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "vendor_id": vendor = value.strip()
            if key.strip() == "flags": flags = set(value.split()); break
    extensions = sorted(f for f in flags if f.startswith(("avx", "amx", "fma")))
    return {"torch": torch.__version__, "capability": torch.backends.cpu.get_cpu_capability(), "vendor": vendor, "extensions": extensions}


def platform_file(described: dict | None = None) -> Path:
    "The recording of the platform `described` (default: this one): its name spells the build, vendor and instruction set, and a digest of the extensions."
    described = described or platform()
    digest = hashlib.sha256(" ".join(described["extensions"]).encode()).hexdigest()[:8]
    name = f"torch{described['torch']}-{described['vendor']}-{described['capability']}-{digest}".replace("+", "_")
    return PLATFORMS / f"{name}.json"


def load_golden() -> tuple[dict, str]:
    "The histories to compare with on this platform (its own recording if there is one, else the default) and where they come from."
    own = platform_file()
    if own.is_file(): return json.loads(own.read_text())["histories"], str(own.relative_to(ROOT))
    return (json.loads(GOLDEN.read_text()) if GOLDEN.is_file() else {}), str(GOLDEN.relative_to(ROOT))


GOLDEN_HISTORIES, GOLDEN_SOURCE = load_golden()


def torch_note() -> str:
    "A hint when the running torch differs from the one the histories were recorded with (empty when it is the same)."
    if GOLDEN_SOURCE != str(GOLDEN.relative_to(ROOT)): return f"\n(compared with this processor's recording {GOLDEN_SOURCE})"
    recorded = json.loads(RECORDED_WITH.read_text()).get("torch") if RECORDED_WITH.is_file() else None
    if recorded in (None, torch.__version__):
        here = platform()
        return (f"\n(compared with the default recording; this processor ({here['vendor']}, {here['capability']}) has none of its "
                f"own. If the code is not the cause (check out the last commit whose CI passed and run this test there), record "
                f"this processor's histories from that commit: python tests/test_golden_history.py --record-platform all)")
    return (f"\n(recorded with torch {recorded}, running torch {torch.__version__}: another torch build sums in another "
            "order, and a method with discrete steps, such as a sign-gradient attack or a cluster count, can turn that "
            "rounding into a different result; re-record only after checking that the code is not the cause)")


def test_every_registered_algorithm_has_a_golden_history():
    assert sorted(GOLDEN_HISTORIES) == registered_algorithms(), "record the new algorithm: python tests/test_golden_history.py --record NAME"


@pytest.mark.parametrize("name", sorted(GOLDEN_HISTORIES))
def test_history_is_unchanged(name):
    problems = compare(GOLDEN_HISTORIES[name], record_history(name))
    assert not problems, f"{name}'s history changed:\n" + "\n".join(problems[:20]) + torch_note()


def test_platform_recordings_are_complete_and_named_for_their_platform():
    for path in sorted(PLATFORMS.glob("*.json")):
        recording = json.loads(path.read_text())
        assert platform_file(recording["platform"]).name == path.name, f"{path.name} holds the recording of another platform"
        assert sorted(recording["histories"]) == registered_algorithms(), f"{path.name}: record every algorithm (--record-platform all)"
        assert recording["recorded_from"], f"{path.name}: say which commit the histories were recorded from"


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
    if len(sys.argv) != 3 or sys.argv[1] not in ("--record", "--record-platform"):
        sys.exit("usage: python tests/test_golden_history.py --record|--record-platform all|NAME[,NAME...]")
    names = registered_algorithms() if sys.argv[2] == "all" else sys.argv[2].split(",")
    own = platform_file()
    if sys.argv[1] == "--record-platform":
        histories = json.loads(own.read_text())["histories"] if own.is_file() else {}
    else:
        histories = json.loads(GOLDEN.read_text()) if GOLDEN.is_file() else {}
    for name in names:
        histories[name] = record_history(name)
        print(f"recorded {name}: {len(histories[name])} rounds")
    histories = dict(sorted(histories.items()))
    if sys.argv[1] == "--record-platform":
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True).stdout.strip()
        own.parent.mkdir(parents=True, exist_ok=True)
        own.write_text(json.dumps({"platform": platform(), "recorded_from": commit + (" (with uncommitted changes)" if dirty else ""),
                                   "histories": histories}, indent=1, sort_keys=True) + "\n")
        print(f"wrote {own.relative_to(ROOT)}")
    else:
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(json.dumps(histories, indent=1, sort_keys=True) + "\n")
        RECORDED_WITH.write_text(json.dumps({"torch": torch.__version__}) + "\n")
