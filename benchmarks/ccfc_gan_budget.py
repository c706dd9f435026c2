"""Why SDA-FC and PPFC-GAN sit near NMI 0.1 on MNIST at CCFC's `quick` scale: the clients' GAN budget, measured.

SDA-FC clusters the synthetic images that each client's one-shot GAN produces and labels the real images by the
nearest synthetic centroid; PPFC-GAN trains its DCN on the same synthetic images. If the GANs are too small or trained
too briefly to draw digits, both cluster noise, whatever the clustering does. This script runs the protocol's own
SDA-FC-KM configuration (`protocols.ccfc.method_config`: MNIST, 500 images per class, ten p-mix clients, seed 0) and
changes only the GAN's training steps and width, one run per setting (D loss: the clients' mean discriminator loss):

    nice -n 19 python benchmarks/ccfc_gan_budget.py                       # quick's width, 80 -> 320 -> 1280 steps
    nice -n 19 python benchmarks/ccfc_gan_budget.py --widths 8,32 --steps 320

`quick` trains each client's GAN for 80 steps of 128 images (about 20 passes over a client's 500 images) at width 8
(hidden 64); the paper trains 50 epochs at width 64 (hidden 1024) on all 70,000 images. One math thread; CPU seconds
are user+sys of this process for the run. The result is appended to benchmarks/results_ccfc_gan_budget.txt.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import resource
import tempfile
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
import torch

from fedlearn_nb.experiment import run
from fedlearn_nb.tools.protocols import ccfc


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def budget_config(protocol, method: str, p: float, seed: int, steps: int, width: int):
    "The protocol's run of `method` on MNIST at `p`, with the GAN trained `steps` steps at `width` (hidden 8 x width, as quick's)."
    config = ccfc.method_config(protocol, method, "mnist", p, seed, folder=f"{method}-w{width}-s{steps}")
    kwargs = {**config.algorithm_kwargs, "gan_width": width, "gan_hidden_dim": 8 * width, "reuse_synthetic": False}
    return dataclasses.replace(config, local_steps=steps, algorithm_kwargs=kwargs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default="80,320,1280", help="comma-separated GAN training steps per client (quick: 80)")
    parser.add_argument("--widths", default="8", help="comma-separated GAN widths (quick: 8; the paper: 64)")
    parser.add_argument("--method", default="SDA-FC-KM", choices=ccfc.SYNTHETIC)
    parser.add_argument("--p", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="benchmarks/results_ccfc_gan_budget.txt")
    args = parser.parse_args()
    steps = [int(s) for s in args.steps.split(",")]
    widths = [int(w) for w in args.widths.split(",")]
    torch.set_num_threads(1)
    lines = [f"# {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC; {platform.processor() or platform.machine()}, torch {torch.__version__}, "
             f"1 thread; load average {tuple(round(x, 2) for x in os.getloadavg())}",
             f"# {args.method} on MNIST, p = {args.p:g}, seed {args.seed}, quick's cut (500 images per class, 10 clients)",
             f"{'width':>5} {'hidden':>6} {'steps':>6} {'passes':>6} {'NMI':>6} {'kappa':>6} {'ACC':>6} {'D loss':>7} {'CPU s':>7}"]
    print("\n".join(lines), flush=True)
    with tempfile.TemporaryDirectory() as folder:
        protocol = ccfc.Protocol.from_parameters(scale="quick", methods=args.method, datasets="mnist", results_dir=folder, device="cpu")
        torch.set_num_threads(1)
        for width in widths:
            for count in steps:
                config = budget_config(protocol, args.method, args.p, args.seed, count, width)
                began = cpu_seconds()
                record = run(config, resume=False, progress=False).records[-1]
                seconds = cpu_seconds() - began
                passes = count * config.batch_size / 500   # a client holds 500 images (5,000 over ten clients)
                line = (f"{width:5d} {8 * width:6d} {count:6d} {passes:6.1f} {record.get('nmi', float('nan')):6.3f} "
                        f"{record.get('kappa', float('nan')):6.3f} {record.get('acc', float('nan')):6.3f} "
                        f"{record['train_loss']:7.3f} {seconds:7.1f}")   # train_loss: the clients' mean discriminator loss
                print(line, flush=True)
                lines.append(line)
    with open(args.out, "a") as out: out.write("\n".join(lines) + "\n\n")


if __name__ == "__main__":
    main()
