"""Golden histories: what every registered algorithm computes on its golden set-up, and how a run is compared with it.

Each algorithm runs the main job's set-up on the embedded data (2 rounds of 3 local steps, seed 0). Three recordings
in `tests/golden/` say what it must give:

- `histories.json`, the **default recording**: every round's record. Only its *invariants* are compared everywhere: the
  number of rounds, the participants and clients, which metrics exist, which are NaN, and the bytes sent each way. Its
  float values are not: the same code on another processor rounds differently (the kernels torch picks depend on the
  instruction set, AVX2 or AVX-512, Intel or AMD, or a GPU), and a discrete step (an evaluation's argmax, a cluster
  count, a sign-gradient attack) can turn that last-bit rounding into a different history two rounds later.
- `first_steps.json`, the **portable recording**: the loss of the first local steps and the gradient of the first one
  (the norm of each parameter's gradient and its projection on a fixed direction); an algorithm that takes no gradient
  step (k-FED, FFCM) records its first upload instead. These are computed before any rounding can compound, so they
  agree across processors to `PORTABLE_RTOL`, while a change of what is computed (a loss term, a coefficient, a
  different batch or initialisation) moves them far more. Compared everywhere.
- `platforms/<platform>.json`, a processor's **own recording**: where this processor (its torch build, vendor,
  instruction set and vector extensions) has recorded an algorithm, that algorithm's whole history must agree to float
  slack (`RTOL`), as exactly as a run can be repeated on one machine.

Re-recording, only for a change that is *meant* to alter results, in a commit of its own that says why:

    python tests/golden_histories.py --record fedavg,moon    # or all: the default and portable recordings, and this
                                                              # processor's own; the other processors' recordings of
                                                              # those algorithms are dropped (they fall back to the
                                                              # portable comparison until they record again)
    python tests/golden_histories.py --record-platform all   # record this processor's own histories, from code whose
                                                              # default histories pass elsewhere: never to hide a change

A processor's recording of an algorithm names the default recording it was made beside (a digest): a default that
changed without the platform recordings being dropped or re-recorded fails `test_platform_recordings_match_the_default`.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path
from unittest import mock

import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "histories.json"
FIRST_STEPS = ROOT / "tests" / "golden" / "first_steps.json"
PLATFORMS = ROOT / "tests" / "golden" / "platforms"
RECORDED_WITH = ROOT / "tests" / "golden" / "versions.json"   # the torch build the default was recorded with
# a platform's own recording: the same code on the same torch and processor is bit-identical; the slack only absorbs a
# BLAS build summing in another order (a change of *what* is computed moves far more than this)
RTOL, ATOL = 1e-5, 1e-7
# the portable recording, across processors: the first steps differ by ~1e-6 relative between instruction sets
# (measured: see `test_another_instruction_set_passes_the_portable_comparison`); a 0.1 % change of a loss fails
PORTABLE_RTOL = 1e-4
STEPS_RECORDED = 3                                            # losses of the first local steps (the golden set-up takes 3)
# algorithms whose messages' sizes follow a discrete, rounding-sensitive choice: FINCH's cluster count of each client's
# features sets how many prototypes or signals it uploads, and the server's FINCH how many it sends back, so from round 2
# the bytes may differ across processors (the Intel AVX-512 and the AMD AVX2 recordings differ by up to 1.5 % in
# `bytes_up`, with 176 against 210 local signals for FedCCL); their bytes are held to `VARIABLE_UPLOAD_SLACK`
VARIABLE_UPLOAD = {"fedccl", "fedcclplus", "fedplcc", "fedplvm", "fpl"}
VARIABLE_UPLOAD_SLACK = 0.05
# per algorithm: what differs from the main job's config (digits5lite, one client per domain, fedccl_cnn4, Adam)
SPECIAL = {
    # CCFC's 3-conv network at an eighth of its width (8, 16, 32 channels): the full one spends ~60x the multiply-adds
    # on the same code path, and made these two the suite's slowest golden runs (59 s and 49 s)
    "ccfc": dict(model="ccfc_cnn3", model_kwargs=dict(channels=(8, 16, 32), latent_dim=32, projector_hidden_dim=32, predictor_hidden_dim=8),
                 algorithm_kwargs=dict(pretrain_rounds=1, kmeans_n_init=1)),
    "scfc": dict(model="ccfc_cnn3", model_kwargs=dict(channels=(8, 16, 32), latent_dim=32, projector_hidden_dim=32, predictor_hidden_dim=8),
                 algorithm_kwargs=dict(kmeans_n_init=1)),
    "fedcclplus": dict(algorithm_kwargs=dict(attack_steps=2)),
    "fedavgplus": dict(algorithm_kwargs=dict(attack_steps=2)),
    # the GAN baselines of CCFC: small GANs, few synthetic images, one k-means restart (and a one-epoch DCN)
    "sdafc_km": dict(algorithm_kwargs=dict(gan_width=8, gan_hidden_dim=32, synthetic_per_client=64, kmeans_n_init=1)),
    "sdafc_fcm": dict(algorithm_kwargs=dict(gan_width=8, gan_hidden_dim=32, synthetic_per_client=64, kmeans_n_init=1)),
    "ppfcgan": dict(algorithm_kwargs=dict(gan_width=8, gan_hidden_dim=32, synthetic_per_client=64, kmeans_n_init=1,
                                          pretrain_epochs=1, dcn_epochs=1, dcn_batch_size=64, decoder_hidden_dims=(64,))),
}


def golden_config(name: str, results_dir: str, **changes):
    "The recorded run of algorithm `name`: the main job's set-up, 2 rounds of 3 local steps, seed 0 (`changes`: RunConfig fields)."
    from fedlearn_nb.tools.main import main_config
    special = SPECIAL.get(name, {})
    config = main_config(name, rounds=2, seed=0, results_dir=results_dir, local_steps=3, **{k: v for k, v in special.items() if k != "algorithm_kwargs"})
    config.algorithm_kwargs.update(special.get("algorithm_kwargs", {}))
    for key, value in changes.items(): setattr(config, key, value)
    return config


def registered_algorithms() -> list[str]:
    from fedlearn_nb.engine import load_algorithms
    return sorted(load_algorithms())


# ---------------------------------------------------------------------------------------------- the first steps
_DIRECTIONS: dict[int, torch.Tensor] = {}


def _direction(size: int) -> torch.Tensor:
    "A fixed unit vector of `size` entries, the same on every machine (exact double arithmetic: frac(i * golden ratio) - 1/2)."
    if size not in _DIRECTIONS:
        values = torch.frac(torch.arange(size, dtype=torch.float64) * 0.6180339887498949) - 0.5
        _DIRECTIONS[size] = values / values.norm()
    return _DIRECTIONS[size]


def describe_tensors(tensors) -> list[list]:
    "[shape, norm, projection on the fixed direction] of each tensor, in double precision on the CPU."
    described = []
    for tensor in tensors:
        flat = tensor.detach().to("cpu", torch.float64).reshape(-1)
        described.append([list(tensor.shape), float(flat.norm()), float(flat @ _direction(flat.numel()))])
    return described


@contextlib.contextmanager
def first_steps(algorithm_class: type):
    """Record, while a run goes on, the losses of its first `STEPS_RECORDED` optimiser steps and the gradient of the first
    (from any optimiser: torch's global step hook), and the first upload of `algorithm_class.client_fit`."""
    record = {"losses": [], "gradient": None, "upload": None}
    last_loss = []
    backward, grad = torch.autograd.backward, torch.autograd.grad

    def remember(outputs):
        if isinstance(outputs, torch.Tensor) and outputs.numel() == 1: last_loss[:] = [float(outputs.detach())]

    def patched_backward(tensors, *args, **kwargs):
        remember(tensors)
        return backward(tensors, *args, **kwargs)

    def patched_grad(outputs, *args, **kwargs):
        remember(outputs)
        return grad(outputs, *args, **kwargs)

    def before_step(optimizer, args, kwargs):
        if len(record["losses"]) >= STEPS_RECORDED or record["upload"] is not None: return
        record["losses"].append(last_loss[0] if last_loss else None)
        if record["gradient"] is None:
            record["gradient"] = describe_tensors(p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None)

    client_fit = algorithm_class.client_fit

    def patched_client_fit(self, client, ins):
        result = client_fit(self, client, ins)
        if record["upload"] is None and not record["losses"]:  # no gradient step before it: the upload is the first step
            sent = {**{f"parameters/{k}": v for k, v in result.parameters.items()}, **{f"payload/{k}": v for k, v in result.payload.items()}}
            record["upload"] = describe_tensors(sent[key] for key in sorted(sent) if isinstance(sent[key], torch.Tensor))
        elif record["upload"] is None: record["upload"] = "after gradient steps"
        return result

    with contextlib.ExitStack() as stack:
        stack.callback(register_optimizer_step_pre_hook(before_step).remove)
        stack.enter_context(mock.patch.object(torch.autograd, "backward", patched_backward))
        stack.enter_context(mock.patch.object(torch.autograd, "grad", patched_grad))
        stack.enter_context(mock.patch.object(algorithm_class, "client_fit", patched_client_fit))
        yield record
    if record["upload"] == "after gradient steps": record["upload"] = None


def record_run(name: str, device: str = "cpu", **changes) -> tuple[list[dict], dict]:
    "Run algorithm `name`'s golden config on `device` in a temporary folder: its per-round records and its first steps."
    from fedlearn_nb.engine import ALGORITHMS
    from fedlearn_nb.experiment import run
    torch.set_num_threads(1)
    registered_algorithms()
    with tempfile.TemporaryDirectory() as folder, first_steps(ALGORITHMS[name]) as steps:
        history = run(golden_config(name, folder, device=device, **changes), resume=False, progress=False)
    return json.loads(json.dumps(history.records, default=float)), steps


# ---------------------------------------------------------------------------------------------- comparisons
def _same(recorded, got, rtol: float = RTOL, atol: float = ATOL) -> bool:
    "Equal, floats to rtol/atol, recursing into per-client lists and dicts."
    if isinstance(recorded, dict) and isinstance(got, dict):
        return recorded.keys() == got.keys() and all(_same(recorded[k], got[k], rtol, atol) for k in recorded)
    if isinstance(recorded, list) and isinstance(got, list):
        return len(recorded) == len(got) and all(_same(a, b, rtol, atol) for a, b in zip(recorded, got))
    if isinstance(recorded, float) or isinstance(got, float):
        if recorded is None or got is None: return recorded is got
        if math.isnan(recorded) or math.isnan(got): return math.isnan(recorded) and math.isnan(got)
        return math.isclose(recorded, got, rel_tol=rtol, abs_tol=atol)
    return recorded == got


def compare(recorded: list[dict], got: list[dict]) -> list[str]:
    "Every difference between two histories, one line each (empty: identical to float slack)."
    problems = [] if len(recorded) == len(got) else [f"{len(got)} rounds recorded, expected {len(recorded)}"]
    for expected, actual in zip(recorded, got):
        for key in sorted(set(expected) | set(actual)):
            if key not in actual: problems.append(f"round {expected.get('round')}: metric {key!r} is missing")
            elif key not in expected: problems.append(f"round {expected.get('round')}: new metric {key!r}")
            elif not _same(expected[key], actual[key]):
                problems.append(f"round {expected.get('round')}: {key} = {actual[key]!r}, recorded {expected[key]!r}")
    return problems


def _shape(value):
    "What of a recorded value holds on every processor: a float's NaN-ness, everything else as it is."
    if isinstance(value, float): return "nan" if math.isnan(value) else "number"
    if isinstance(value, dict): return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list): return [_shape(v) for v in value]
    return value


def compare_invariants(name: str, recorded: list[dict], got: list[dict]) -> list[str]:
    "The differences in what holds on every processor: rounds, clients, participants, metric names, NaN-ness and bytes."
    problems = [] if len(recorded) == len(got) else [f"{len(got)} rounds recorded, expected {len(recorded)}"]
    for expected, actual in zip(recorded, got):
        round = expected.get("round")
        missing, new = sorted(set(expected) - set(actual)), sorted(set(actual) - set(expected))
        if missing: problems.append(f"round {round}: metrics {missing} are missing")
        if new: problems.append(f"round {round}: new metrics {new}")
        for key in sorted(set(expected) & set(actual)):
            if key in ("bytes_up", "bytes_down") and name in VARIABLE_UPLOAD:
                if abs(actual[key] - expected[key]) > VARIABLE_UPLOAD_SLACK * expected[key]:
                    problems.append(f"round {round}: {key} = {actual[key]}, recorded {expected[key]} (more than "
                                    f"{VARIABLE_UPLOAD_SLACK:.0%} apart: more than a cluster count's rounding)")
            elif _shape(expected[key]) != _shape(actual[key]):
                problems.append(f"round {round}: {key} = {actual[key]!r}, recorded {expected[key]!r}")
    return problems


def compare_first_steps(recorded: dict, got: dict, rtol: float = PORTABLE_RTOL) -> list[str]:
    "The differences between two recordings of the first steps: losses to `rtol`; each tensor's norm and projection to `rtol` of its own norm plus the whole gradient's."
    problems = []
    if len(recorded["losses"]) != len(got["losses"]):
        problems.append(f"{len(got['losses'])} gradient steps before the first upload, recorded {len(recorded['losses'])}")
    for step, (expected, actual) in enumerate(zip(recorded["losses"], got["losses"]), 1):
        if (expected is None) != (actual is None) or (expected is not None and not math.isclose(expected, actual, rel_tol=rtol, abs_tol=1e-9)):
            problems.append(f"local step {step}: loss {actual!r}, recorded {expected!r}")
    for what in ("gradient", "upload"):
        expected, actual = recorded[what], got[what]
        if (expected is None) != (actual is None) or (expected is not None and len(expected) != len(actual)):
            problems.append(f"first {what}: {len(actual or [])} tensors, recorded {len(expected or [])}")
            continue
        total = math.sqrt(sum(norm ** 2 for _, norm, _ in expected or []))
        for index, ((shape, norm, projection), (shape2, norm2, projection2)) in enumerate(zip(expected or [], actual or [])):
            slack = rtol * (norm + total)   # a bias before a BatchNorm has a gradient of pure rounding noise, ~1e-6 of the whole
            if shape != shape2: problems.append(f"first {what}, tensor {index}: shape {shape2}, recorded {shape}")
            elif abs(norm - norm2) > slack or abs(projection - projection2) > slack:
                problems.append(f"first {what}, tensor {index} {shape}: norm {norm2:.8g} and projection {projection2:.8g}, "
                                f"recorded {norm:.8g} and {projection:.8g}")
    return problems


# ---------------------------------------------------------------------------------------------- platforms
def platform(device: str = "cpu") -> dict:
    "What decides torch's rounding on `device`: its build and, on the CPU, the instruction set its kernels use, the processor's vendor and vector extensions; on a GPU, its name and compute capability."
    if str(device).startswith("cuda"):
        major, minor = torch.cuda.get_device_capability(device)
        return {"torch": torch.__version__, "capability": "CUDA", "vendor": torch.cuda.get_device_name(device).replace(" ", "_"),
                "extensions": [f"sm_{major}{minor}"]}
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
    "The recording of the platform `described` (default: this CPU): its name spells the build, vendor and instruction set, and a digest of the extensions."
    described = described or platform()
    digest = hashlib.sha256(" ".join(described["extensions"]).encode()).hexdigest()[:8]
    name = f"torch{described['torch']}-{described['vendor']}-{described['capability']}-{digest}".replace("+", "_")
    return PLATFORMS / f"{name}.json"


def digest(history: list[dict]) -> str:
    "A short digest of a recorded history (a platform's recording names the default it was made beside)."
    return hashlib.sha256(json.dumps(history, sort_keys=True).encode()).hexdigest()[:16]


def _read(path: Path, empty):
    return json.loads(path.read_text()) if path.is_file() else empty


DEFAULT_HISTORIES = _read(GOLDEN, {})
FIRST_STEP_RECORDINGS = _read(FIRST_STEPS, {})


def own_recording(described: dict | None = None) -> dict:
    "The platform `described`'s own histories {name: records} (empty where it has none), read once per platform."
    return _own_recording(platform_file(described))


@functools.lru_cache(maxsize=None)
def _own_recording(path: Path) -> dict:
    return _read(path, {"histories": {}})["histories"]


def check(name: str, history: list[dict], steps: dict | None = None, described: dict | None = None) -> tuple[list[str], str]:
    """Compare a run of algorithm `name`'s golden set-up with the recordings, as the platform `described` (default: this CPU)
    warrants: (the differences, which comparison was made). The invariants and, given `steps`, the first steps always; the
    whole history to float slack where the platform has its own recording of `name`."""
    problems = compare_invariants(name, DEFAULT_HISTORIES[name], history)
    if steps is not None: problems += compare_first_steps(FIRST_STEP_RECORDINGS[name], steps)
    own = own_recording(described).get(name)
    if own is None: return problems, "portable (invariants and first steps; this platform has no recording of its own)"
    return problems + compare(own, history), f"exact ({platform_file(described).relative_to(ROOT)})"


# ---------------------------------------------------------------------------------------------- recording
def _commit() -> str:
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True).stdout.strip()
    return commit + (" (with uncommitted changes)" if dirty else "")


def write_platform(path: Path, histories: dict, recorded: dict, described: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"platform": described, "recorded": dict(sorted(recorded.items())),
                                "histories": dict(sorted(histories.items()))}, indent=1, sort_keys=True) + "\n")


def record(names: list[str], default: bool) -> None:
    "Record `names` into this CPU's own recording and, with `default`, into the default and portable ones too (dropping the other platforms' recordings of them)."
    runs = {}
    for name in names:
        runs[name] = record_run(name)
        print(f"recorded {name}: {len(runs[name][0])} rounds, {len(runs[name][1]['losses'])} gradient steps before the first upload")
    defaults, steps = dict(DEFAULT_HISTORIES), dict(FIRST_STEP_RECORDINGS)
    if default:
        for name, (history, first) in runs.items(): defaults[name], steps[name] = history, first
        GOLDEN.write_text(json.dumps(dict(sorted(defaults.items())), indent=1, sort_keys=True) + "\n")
        FIRST_STEPS.write_text(json.dumps(dict(sorted(steps.items())), indent=1, sort_keys=True) + "\n")
        RECORDED_WITH.write_text(json.dumps({"torch": torch.__version__}) + "\n")
        for path in sorted(PLATFORMS.glob("*.json")):  # the other processors' recordings of these names no longer belong
            if path == platform_file(): continue
            recording = json.loads(path.read_text())
            dropped = sorted(set(names) & set(recording["histories"]))
            for name in dropped: recording["histories"].pop(name); recording["recorded"].pop(name, None)
            if dropped:
                write_platform(path, recording["histories"], recording["recorded"], recording["platform"])
                print(f"dropped {dropped} from {path.relative_to(ROOT)}: that processor compares them portably until it records again")
    own = platform_file()
    recording = _read(own, {"histories": {}, "recorded": {}})
    commit = _commit()
    for name, (history, _) in runs.items():
        recording["histories"][name] = history
        recording["recorded"][name] = {"from": commit, "default": digest(defaults[name])}
    write_platform(own, recording["histories"], recording["recorded"], platform())
    print(f"wrote {own.relative_to(ROOT)}")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("--record", "--record-platform"):
        sys.exit("usage: python tests/golden_histories.py --record|--record-platform all|NAME[,NAME...]")
    chosen = registered_algorithms() if sys.argv[2] == "all" else sys.argv[2].split(",")
    unknown = sorted(set(chosen) - set(registered_algorithms()))
    if unknown: sys.exit(f"not registered algorithms: {unknown}; choose among {registered_algorithms()}")
    record(chosen, default=sys.argv[1] == "--record")
