"""Why FedAvg+ / FedCCL+ end as one-class models on MNIST at FedCCL's `quick` scale (Table 8), and what removes it.

Each variant is FedCCL's quick intra-domain run of FedAvg+ (or another method) on MNIST: ten Dirichlet(0.05) clients,
fedccl_cnn4, SGD lr 0.01 momentum 0.9, batch 64, one local epoch, PGD training at eps 0.3 (the paper's Eq. 21), built
by the protocol's own `method_config` on the former quick cut of 1,000 training images per class (`CUT`), and changed
in one setting at a time. After every round the global model is scored on the quick test cut (200 images per class):
clean accuracy, and the share of the test images given to the most predicted class, with that class (`top` = 1.00
means a one-class model). Every run is one math thread; CPU seconds are
user+sys of this process for the run.

    nice -n 10 python benchmarks/fedccl_robust_collapse.py --variants quick steps10 --rounds 5
    nice -n 10 python benchmarks/fedccl_robust_collapse.py --list

Variants (name: what differs from `quick`, the former quick setting):
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import tempfile

os.environ.setdefault("OMP_NUM_THREADS", "1")
import numpy as np
import torch

from fedlearn_nb.adversarial import robustness_report
from fedlearn_nb.engine import set_parameters
from fedlearn_nb.tools.papers import cpu_seconds
from fedlearn_nb.experiment import build_model_for, run
from fedlearn_nb.tools.protocols.fedccl import FedCCLProtocol

CUT = 1000   # the former quick training cut: images per class (the quick scale now trains on all of them)

# name -> (method, changes to the RunConfig, changes to the attack kwargs, eps warm-up rounds, help)
VARIANTS = {
    "quick": ("FedAvg+", {}, {}, 0, "the former quick setting: the cut of 1,000 images per class, 1 PGD step (step 2.5 eps), eps 0.3"),
    "steps10": ("FedAvg+", {}, {"attack_steps": 10}, 0, "10 PGD steps in training (the paper scale's), step 2.5 eps / 10"),
    "full": ("FedAvg+", {"per_class": None}, {}, 0, "all 60,000 training images, 1 PGD step"),
    "full_steps10": ("FedAvg+", {"per_class": None}, {"attack_steps": 10}, 0, "all 60,000 training images, 10 PGD steps"),
    "epochs6": ("FedAvg+", {"local_epochs": 6}, {}, 0, "6 local epochs on the cut: as many SGD steps per round as one epoch on all the images"),
    "nomomentum": ("FedAvg+", {"momentum": 0.0}, {}, 0, "SGD without momentum (lr 0.01)"),
    "lr001": ("FedAvg+", {"lr": 0.001}, {}, 0, "lr 0.001 with momentum 0.9"),
    "warmup": ("FedAvg+", {}, {}, 3, "eps raised linearly from 0.1 to 0.3 over rounds 1-3 (0.1, 0.2, 0.3, 0.3, ...)"),
    "eps01": ("FedAvg+", {}, {"epsilon": 0.1}, 0, "eps 0.1 in training (FMNIST's budget)"),
    "eps02": ("FedAvg+", {}, {"epsilon": 0.2}, 0, "eps 0.2 in training"),
    "iid": ("FedAvg+", {"partition_kwargs": {"alpha": 1000.0}}, {}, 0, "near-IID clients (Dirichlet alpha 1000)"),
    "fedavg": ("FedAvg", {}, {}, 0, "plain FedAvg, no adversarial training (the reference)"),
    "full_fedavg": ("FedAvg", {"per_class": None}, {}, 0, "plain FedAvg on all 60,000 training images (cost of a full round)"),
    "fedccl_full": ("FedCCL", {"per_class": None}, {}, 0, "FedCCL on all 60,000 training images (cost of a full round)"),
    "fedcclplus": ("FedCCL+", {}, {}, 0, "FedCCL+ at the quick setting"),
    "fedcclplus_full": ("FedCCL+", {"per_class": None}, {}, 0, "FedCCL+ on all 60,000 training images, 1 PGD step"),
    "fedcclplus_steps10": ("FedCCL+", {}, {"attack_steps": 10}, 0, "FedCCL+ with 10 PGD steps"),
    "fmnist": ("FedAvg+", {}, {}, 0, "Fashion-MNIST (eps 0.1), quick setting"),
}
__doc__ += "\n".join(f"    {name}: {spec[4]}" for name, spec in VARIANTS.items())


def run_variant(name: str, rounds: int, seed: int, out: str, robust: bool = False) -> list[dict]:
    label, changes, attack, warmup, _ = VARIANTS[name]
    dataset = "fashion_mnist" if name.startswith("fmnist") else "mnist"
    protocol = FedCCLProtocol(scale="quick", methods=label, datasets=dataset, seeds=str(seed), results_dir=out).start()
    config = protocol.method_config(label, dataset, 0.05, seed)
    kwargs = {**config.algorithm_kwargs, **attack}
    if "partition_kwargs" in changes: changes = {**changes, "partition_kwargs": {**config.partition_kwargs, **changes["partition_kwargs"]}}
    changes = {"per_class": CUT, **changes}   # the former quick cut unless the variant says otherwise
    config = dataclasses.replace(config, **changes, algorithm_kwargs=kwargs, rounds=rounds, name=f"{name}-seed{seed}",
                                 results_dir=os.path.join(out, "runs"), device="cpu")
    parts, rows = {}, []
    final_eps = kwargs.get("epsilon")

    def set_eps(round: int):  # the budget of round `round` (1-based) under the warm-up
        algorithm = parts["algorithm"]
        eps = final_eps * min(1.0, round / warmup) if warmup else final_eps
        algorithm.attack = dataclasses.replace(algorithm.attack, epsilon=eps)
        return eps

    started = [cpu_seconds()]

    def after_round(round: int, record: dict):
        data = parts["data"]
        scored = build_model_for(config, data)
        set_parameters(scored, parts["algorithm"].server["params"])
        scored.eval()
        with torch.no_grad():  # the clients' test shares together are the test cut
            xs, ys = torch.cat([c.x_test for c in data.clients]), torch.cat([c.y_test for c in data.clients])
            predicted = torch.cat([scored(xs[i:i + 500]).argmax(1) for i in range(0, len(ys), 500)])
        counts = np.bincount(predicted.numpy(), minlength=10)
        now = cpu_seconds()
        row = dict(variant=name, seed=seed, round=round, eps=parts["algorithm"].attack.epsilon if getattr(parts["algorithm"], "adversarial", False) else None,
                   clean=float((predicted == ys).float().mean()), top=counts.max() / counts.sum(), top_class=int(counts.argmax()),
                   acc_engine=record.get("accuracy_weighted"), cpu_s=now - started[0], hist=" ".join(map(str, counts)))
        if robust and round == rounds:   # Table 8's numbers for the final global model: FGSM and PGD-20 at the protocol's eps
            report = robustness_report(scored, xs, ys, epsilon=final_eps or 0.3, pgd_steps=20, seed=seed)
            row.update(fgsm=report["fgsm"], pgd20=report["pgd20"])
            print(f"{name:18s} seed {seed} round {round:2d} Table 8 on the {len(ys)}-image test cut: clean {report['clean']:.3f} "
                  f"FGSM {report['fgsm']:.3f} PGD-20 {report['pgd20']:.3f} (eps {final_eps or 0.3})", flush=True)
            now = cpu_seconds()
        started[0] = now
        rows.append(row)
        print(f"{name:18s} seed {seed} round {round:2d} eps {row['eps'] if row['eps'] is not None else '-':<5} clean {row['clean']:.3f} "
              f"top {row['top']:.2f} (class {row['top_class']}) cpu {row['cpu_s']:.0f}s  hist [{row['hist']}]", flush=True)
        if warmup and round < rounds: set_eps(round + 1)

    if warmup:  # round 1's budget is set once the algorithm exists (run() fills `parts` before round 1)
        class Parts(dict):
            def update(self, *a, **k):
                dict.update(self, *a, **k)
                if "algorithm" in self: set_eps(1)
        parts = Parts()
    run(config, resume=False, progress=False, callbacks=[after_round], parts=parts)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", nargs="+", default=["quick"], choices=list(VARIANTS))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--robust", action="store_true", help="after the last round, Table 8's FGSM and PGD-20 accuracy of the global model")
    args = parser.parse_args(argv)
    if args.list: print(__doc__); return
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as out:
        for seed in args.seeds:
            for name in args.variants:
                began = cpu_seconds()
                rows = run_variant(name, args.rounds, seed, out, args.robust)
                print(f"{name:18s} seed {seed}: {args.rounds} rounds, clean by round "
                      f"{' '.join(format(r['clean'], '.3f') for r in rows)}; {cpu_seconds() - began:.0f} CPU s in all", flush=True)


if __name__ == "__main__":
    main()
