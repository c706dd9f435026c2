"""What a CCFC round costs beyond its network's arithmetic: one round of CCFC at the paper's settings (MNIST, every one
of the 70,000 images clustered, p = 0, 10 clients, Adam 1e-3 with its state kept across rounds, batch 128, one local
epoch, k-means with 10 restarts) against the same number of plain two-view training steps of the same network on the
same data.

The network is CCFC's 3-conv network with every conv width 1 (`ccfc_cnn3`, channels (1, 1, 1), the paper's 256-d
latents and projector): the same layers, but its arithmetic is negligible, so what the round adds shows: pseudo-labels
(a forward pass over the client's data), the frozen copy, k-means of the latents on every client and on the server,
evaluation (another forward pass and Eq. 3 on every client, the scores), the messages and the bookkeeping. The plain
loop is the least that training this network can cost: per step, two augmented views (`augmented_view`), forward and
backward of both, SimSiam's loss and Adam's step.

Measured on one math thread (`torch.set_num_threads(1)`), in one process, interleaved: a SimSiam round (the paper's
first 100 rounds), a CCFC round (its last 30) and the plain loop, each `--repeats` times; medians are reported, with
CPU seconds (user + system of this process) beside the wall seconds, and the ratio round / plain loop.
`--profile` adds a cProfile of one CCFC round (top 15 by cumulative and by own time).

    python benchmarks/ccfc_round_overhead.py                          # 70,000 MNIST images, 1 repeat, profile
    python benchmarks/ccfc_round_overhead.py --samples 14000 --repeats 3
    python benchmarks/ccfc_round_overhead.py --stand-in               # random images of MNIST's shape (no data files)
    python benchmarks/ccfc_round_overhead.py --device cuda             # the same on a GPU (threads: the CPU side's)

The run is built as `fedlearn_nb.experiment.run` builds it (the federation, the seeded model, the algorithm, `setup`),
and a round is `run_round` with every client taking part and evaluation on, as `run_experiment` calls it.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import time

import torch

from fedlearn_nb.core import seed_everything, torch_generator
from fedlearn_nb.engine import set_training
from fedlearn_nb.experiment import RunConfig, build_algorithm, build_federated_data, build_model_for
from fedlearn_nb.loop import run_round
from fedlearn_nb.losses import simsiam_loss
from fedlearn_nb.selfsupervised import augmented_view

PAPER_CCFC = dict(pretrain_rounds=100, kmeans_n_init=10, persistent_optimizer=True, self_pairs=True, regulariser_weighting="batch",
                  lambda_=0.001)


def cpu_seconds() -> float:
    "User + system CPU seconds of this process so far."
    times = os.times()
    return times.user + times.system


def sync(device: torch.device) -> None:
    if device.type == "cuda": torch.cuda.synchronize()


def timed(function, device: torch.device) -> tuple[float, float]:
    "Wall and CPU seconds of `function()`."
    sync(device); wall, cpu = time.perf_counter(), cpu_seconds()
    function()
    sync(device)
    return time.perf_counter() - wall, cpu_seconds() - cpu


def make_config(samples: int | None, stand_in: bool, device: str) -> RunConfig:
    "The paper's MNIST CCFC run (protocols.ccfc.method_config at scale 'paper', p = 0), with the width-1 network."
    return RunConfig(dataset="mnist", data_split="all", per_class=None, partition="pmix", partition_kwargs={"p": 0.0}, num_clients=10,
                     seed=0, device=device, algorithm="ccfc", algorithm_kwargs=dict(PAPER_CCFC), model="ccfc_cnn3",
                     model_kwargs={"channels": [1, 1, 1], "latent_dim": 256}, model_seed=0, optimizer="adam", lr=1e-3, momentum=0.0,
                     batch_size=128, local_epochs=1, rounds=130)


def stand_in_data(config: RunConfig, samples: int, device: str):
    "Random images of MNIST's shape with ten balanced labels, cut into the p-mix federation as the real data would be."
    from fedlearn_nb.data import LabelledData
    from fedlearn_nb.federation import build_federation, FederationSpec
    generator = torch_generator(0)
    x = torch.rand(samples, 1, 28, 28, generator=generator)
    y = torch.arange(samples) % 10
    data = LabelledData(x, y, [str(i) for i in range(10)], "mnist-shaped stand-in", "")
    spec = FederationSpec.from_dict(config.federation)
    return build_federation(data, "pmix", config.num_clients, test=None, test_fraction=config.test_fraction, seed=spec.seed(config.seed),
                            name=spec.name, transform=None, pooled=config.pooled, device=device, p=0.0)


def build(samples: int | None, stand_in: bool, device: str):
    "Data, model and algorithm, set up as `run` sets them up."
    config = make_config(samples, stand_in, device)
    seed_everything(config.seed)
    if stand_in: data = stand_in_data(config, samples or 70000, device)
    else:
        data = build_federated_data(config, device=device)
        if samples is not None and samples < sum(c.num_examples for c in data.clients):
            from fedlearn_nb.data import LabelledData, load_dataset
            from fedlearn_nb.federation import build_federation, FederationSpec
            full = load_dataset("mnist", split="all")
            keep = torch.randperm(len(full.y), generator=torch_generator(0))[:samples]
            part = LabelledData(full.x[keep], full.y[keep], list(full.classes), "mnist (subset)", "")
            spec = FederationSpec.from_dict(config.federation)
            data = build_federation(part, "pmix", config.num_clients, test=None, test_fraction=config.test_fraction,
                                    seed=spec.seed(config.seed), name=spec.name, transform=None, pooled=config.pooled, device=device, p=0.0)
    model = build_model_for(config, data)
    algorithm = build_algorithm(config)
    algorithm.setup(model, data, config.training(), config.seed)
    return config, data, model, algorithm


def plain_steps(model: torch.nn.Module, x: torch.Tensor, steps: int, batch_size: int, algorithm) -> None:
    "`steps` plain SimSiam steps on `model`: two augmented views of a batch, forward and backward of both, Adam's step."
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    set_training(model)
    generator, views = torch_generator(1), torch_generator(2)
    order = torch.randperm(len(x), generator=generator).to(x.device)
    total = torch.zeros((), device=x.device)
    for step in range(steps):
        start = (step * batch_size) % max(len(x) - batch_size, 1)
        batch = x[order[start:start + batch_size]]
        view_1, view_2 = algorithm.view(batch, views), algorithm.view(batch, views)
        latents_1, latents_2 = model.features(view_1), model.features(view_2)
        loss = simsiam_loss(model.head(latents_1), model.head(latents_2), latents_1, latents_2)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        total += loss.detach()
    total.item()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=None, help="images clustered (default: all 70,000)")
    parser.add_argument("--stand-in", action="store_true", help="random images of MNIST's shape instead of the real files")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--profile-only", action="store_true", help="only the profile of one CCFC round")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    config, data, model, algorithm = build(args.samples, args.stand_in, args.device)
    clients = [c.id for c in data.clients]
    images = sum(c.num_examples for c in data.clients)
    steps = sum(len(list(algorithm.batches(c, torch_generator(0)))) for c in data.clients)
    print(f"# {'stand-in' if args.stand_in else 'MNIST'} {images} images, {len(clients)} clients, {steps} local steps per round, "
          f"device {device}, {torch.get_num_threads()} thread(s), torch {torch.__version__}")
    wall, cpu = timed(lambda: run_round(algorithm, data, 1, clients), device)   # initial centroids + the first round (untimed warm-up)
    print(f"warm-up round 1 (initial centroids + a SimSiam round): {wall:.2f} s wall, {cpu:.2f} CPU-s")
    pooled = torch.cat([c.x_train for c in data.clients])
    plain_model = build_model_for(config, data)
    results = {"simsiam round": [], "ccfc round": [], "plain steps": []}
    round = 1
    if not args.profile_only:
        for _ in range(args.repeats):
            round += 1
            results["simsiam round"].append(timed(lambda: run_round(algorithm, data, round, clients), device))
            results["ccfc round"].append(timed(lambda: run_round(algorithm, data, config.algorithm_kwargs["pretrain_rounds"] + round, clients), device))
            results["plain steps"].append(timed(lambda: plain_steps(plain_model, pooled, steps, config.batch_size, algorithm), device))
        median = {name: (statistics.median(w for w, _ in values), statistics.median(c for _, c in values)) for name, values in results.items()}
        for name, (wall, cpu) in median.items(): print(f"{name:>14}: {wall:7.2f} s wall, {cpu:7.2f} CPU-s (median of {args.repeats})")
        for name in ("simsiam round", "ccfc round"):
            print(f"ratio {name} / plain steps: {median[name][1] / median['plain steps'][1]:.2f} (CPU-s), "
                  f"{median[name][0] / median['plain steps'][0]:.2f} (wall)")
    if not args.no_profile:
        for name, number in (("SimSiam", round + 1), ("CCFC", config.algorithm_kwargs["pretrain_rounds"] + round + 1)):
            profile = cProfile.Profile()
            profile.runcall(run_round, algorithm, data, number, clients)
            for key in ("cumulative", "tottime"):
                text = io.StringIO()
                pstats.Stats(profile, stream=text).strip_dirs().sort_stats(key).print_stats(15)
                lines = text.getvalue().splitlines()
                start = next(i for i, line in enumerate(lines) if "ncalls" in line)
                print(f"\n# profile of one {name} round (round {number}), top 15 by {key}\n" + "\n".join(lines[start:start + 16]))

if __name__ == "__main__":
    main()
