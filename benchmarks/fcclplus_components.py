"""Which part of FCCL+ keeps it below FedAvg on Digit-5 at FedPLCC's `quick` scale (Table II, 30 rounds)?

FCCL+ is FedAvg plus two parts: every round from the second, a public stage (Adam steps on unlabelled public images
aligning the client's logits and feature similarities with the clients' consensus), and non-target distillation from
the client's previous model during private training. Each variant below is FedPLCC's quick FCCL+ run on Digit-5
(MNIST, USPS, MNIST-M; ResNet10, 30 rounds of one local epoch, SGD 0.01 momentum 0.9, 512 CIFAR-10 public images in
batches of 128), built by the protocol's own `run_config`, with one setting changed. The global model's domain-mean
accuracy is read after every evaluated round (every 2 rounds and the last). One math thread per process; CPU seconds
are user+sys of the process for the run.

    python benchmarks/fcclplus_components.py --variants no_public no_distillation --seeds 0 1 2 --out /tmp/fccl
    python benchmarks/fcclplus_components.py --summary --out /tmp/fccl --main results/papers/fedplcc/quick/<run>

`--summary` prints final accuracy per variant and seed, with FCCL+ and FedAvg read from the main run's history files
(`history_FCCL+_digit5_seed<k>.csv`, `history_FedAvg_digit5_seed<k>.csv`), which have exactly the settings here.

Variants (name: what differs from the main run's FCCL+):
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
import numpy as np
import pandas as pd
import torch

from fedlearn_nb.tools.papers import cpu_seconds
from fedlearn_nb.experiment import run
from fedlearn_nb.tools.protocols.fedplcc import FedPLCCProtocol, method_arguments

VARIANTS = {   # name -> (changes to FCCL+'s arguments, help)
    "no_public": ({"public_epochs": 0}, "no public stage: FedAvg plus non-target distillation only"),
    "no_distillation": ({"distillation_weight": 0.0}, "no distillation: FedAvg plus the public stage only"),
    "public_lr_1e-4": ({"public_lr": 1e-4}, "the public stage's Adam at lr 1e-4 instead of 1e-3"),
}
__doc__ += "\n".join(f"    {name}: {spec[1]}" for name, spec in VARIANTS.items())
DATASET = "digit5"


def run_variant(protocol: FedPLCCProtocol, name: str, seed: int, out: Path) -> dict:
    algorithm, kwargs = method_arguments("FCCL+", protocol.config, DATASET)
    config = protocol.run_config(DATASET, seed, algorithm, {**kwargs, **VARIANTS[name][0]})
    config = dataclasses.replace(config, name=f"fcclplus-{name}-seed{seed}", results_dir=str(out / "runs"), device="cpu")
    began = cpu_seconds()
    history = run(config, progress=False, data=protocol.federations[DATASET])
    curve = {int(r["round"]): round(100 * r["accuracy_domain_mean"], 2) for r in history.evaluated()}
    row = {"variant": name, "seed": seed, "algorithm_kwargs": config.algorithm_kwargs, "rounds": config.rounds,
           "cpu_seconds": round(cpu_seconds() - began, 1), "curve": curve}
    with open(out / "results.jsonl", "a") as f: f.write(json.dumps(row) + "\n")
    print(f"{name} seed {seed}: final {curve[max(curve)]:.1f} % ({row['cpu_seconds']:.0f} CPU-s); curve {curve}", flush=True)
    return row


def main_curve(main: Path, label: str, seed: int) -> dict:
    frame = pd.read_csv(main / f"history_{label}_{DATASET}_seed{seed}.csv").dropna(subset=["accuracy_domain_mean"])
    return {int(r): round(100 * a, 2) for r, a in zip(frame["round"], frame["accuracy_domain_mean"])}


def summary(out: Path, main: Path | None) -> None:
    rows = [json.loads(line) for line in open(out / "results.jsonl")] if (out / "results.jsonl").exists() else []
    curves = {(r["variant"], r["seed"]): {int(k): v for k, v in r["curve"].items()} for r in rows}
    seeds = sorted({s for _, s in curves})
    if main is not None:
        for label in ("FedAvg", "FCCL+"):
            for seed in seeds or [0, 1, 2]: curves[(label, seed)] = main_curve(main, label, seed)
        seeds = sorted({s for _, s in curves})
    order = [v for v in ("FedAvg", "FCCL+", *VARIANTS) if any((v, s) in curves for s in seeds)]
    print(f"Digit-5 (MNIST, USPS, MNIST-M) domain-mean accuracy %, FCCL+ variants at FedPLCC's quick settings; seeds {seeds}")
    print(f"{'variant':18s} " + " ".join(f"seed {s:<3d}" for s in seeds) + "   mean ± sd (ddof 1) | mean at rounds 10 / 20 / 30")
    for variant in order:
        finals = [curves[(variant, s)][max(curves[(variant, s)])] for s in seeds if (variant, s) in curves]
        at = [np.mean([curves[(variant, s)].get(r, np.nan) for s in seeds if (variant, s) in curves]) for r in (10, 20, 30)]
        cells = " ".join(f"{curves[(variant, s)][max(curves[(variant, s)])]:8.1f}" if (variant, s) in curves else f"{'-':>8s}" for s in seeds)
        print(f"{variant:18s} {cells}   {np.mean(finals):5.1f} ± {np.std(finals, ddof=1) if len(finals) > 1 else 0:4.1f} | " + " / ".join(f"{a:.1f}" for a in at))
    if rows: print("CPU seconds per run: " + ", ".join(f"{r['variant']} seed {r['seed']}: {r['cpu_seconds']:.0f}" for r in rows))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", nargs="*", default=[], choices=list(VARIANTS))
    parser.add_argument("--seeds", nargs="*", type=int, default=[0])
    parser.add_argument("--out", required=True, help="folder for the runs and results.jsonl")
    parser.add_argument("--summary", action="store_true", help="print the table of what --out holds")
    parser.add_argument("--main", default=None, help="the main FedPLCC quick run folder, for FCCL+ and FedAvg")
    parser.add_argument("--rounds", type=int, default=None, help="rounds instead of the scale's 30 (a quick check of the script)")
    args = parser.parse_args()
    out = Path(args.out); out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    if args.variants:
        protocol = FedPLCCProtocol.from_parameters(scale="quick", methods="FCCL+", datasets=DATASET, results_dir=str(out),
                                                   ablations=False, sweeps="none", client_workers=1, rounds=args.rounds)
        protocol.load_federations()
        for seed in args.seeds:
            for name in args.variants: run_variant(protocol, name, seed, out)
    if args.summary: summary(out, Path(args.main) if args.main else None)
