"""Time one round of FedAvg on MNIST-sized data (60000 x 1 x 28 x 28): our engine with its clients trained together
(`client_batching="batched"`), our engine with its clients trained one by one ("sequential"), the same loop in
`--client-workers` forked worker processes ("workers", `client_workers=2`), the same SGD steps in a plain loop on one
model (the round's batch sizes, client after client, on the pooled data), and Flower's simulation engine (when flwr
is installed).

Part 1, the engine's overhead: one local epoch of batch 64 per client (fedccl_cnn4, SGD), on CPU (and CUDA when
present). Per number of clients, the four measurements are interleaved and repeated (`--repeats`), and the medians
are reported with the ratios batched/plain, sequential/plain, sequential/batched and sequential/workers (workers: CPU only,
one math thread each).

Part 2, against Flower: the workload of benchmarks/flower_speed.py (real Fashion-MNIST, iid clients, one local step
of 32 images, every client evaluated every round, one math thread), with the batchable fedccl_cnn4; each run in its
own process, round time = median of rounds 2.. of `History.seconds`. Flower above `--flower-max-clients` is skipped
with a note (its per-client cost makes 2000 clients take very long).

    python benchmarks/engine_speed.py                               # 10, 100, 500, 2000 clients; part 2 up to 500
    python benchmarks/engine_speed.py --clients 10 100 --repeats 3 --samples 12000 --no-flower
    python benchmarks/engine_speed.py --threads 2                   # every core for the in-process paths
    python benchmarks/engine_speed.py --clients 10 100 --modes sequential workers --flower-clients 10 100   # workers vs the loop
    python benchmarks/engine_speed.py --real                        # real MNIST from the data root, if present

Random tensors stand in for MNIST in part 1 by default (the speed does not depend on the pixel values). On a machine
shared with other jobs, compare the ratios, which are measured side by side.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from fedlearn_nb.algorithms.fedavg import FedAvg
from fedlearn_nb.core import seed_everything, torch_generator
from fedlearn_nb.engine import LocalTraining
from fedlearn_nb.execution import batching_obstacles
from fedlearn_nb.loop import RunSettings, run_round
from fedlearn_nb.federation import FederatedData
from fedlearn_nb.models import build_model


class Images:
    "Minimal labelled data: x (N, 1, 28, 28) float32, y (N,) int64."
    def __init__(self, x, y): self.x, self.y, self.classes, self.name = x, y, [str(i) for i in range(10)], "mnist-sized"


def make_data(samples: int, real: bool, seed: int = 0) -> tuple[Images, Images]:
    if real:
        from fedlearn_nb.data import load_dataset
        train, test = load_dataset("mnist", split="train"), load_dataset("mnist", split="test")
        return Images(train.x[:samples], train.y[:samples]), Images(test.x, test.y)
    g = torch_generator(seed)
    return (Images(torch.rand(samples, 1, 28, 28, generator=g), torch.randint(0, 10, (samples,), generator=g)),
            Images(torch.rand(10000, 1, 28, 28, generator=g), torch.randint(0, 10, (10000,), generator=g)))


def sync(device: torch.device):
    if device.type == "cuda": torch.cuda.synchronize()


def plain_loop_seconds(model, x, y, training: LocalTraining, device, sizes: list[int] | None = None) -> float:
    """The round's SGD steps on one model over the pooled data (no federation): one step per batch size in `sizes`
    (every client's batches, in the round's order), on slices of one permutation of the pooled data; without `sizes`,
    one epoch of `training.batch_size` batches (fewer, larger steps than a round of clients smaller than a batch)."""
    optimizer = training.make_optimizer(model.parameters())
    model.train()
    order = torch_generator(0)
    batches = (training.batches(len(y), order) if sizes is None
               else torch.randperm(len(y), generator=order)[:sum(sizes)].split(sizes))
    sync(device); start = time.perf_counter()
    for index in batches:
        index = index.to(device)
        loss = F.cross_entropy(model(x[index]), y[index])
        optimizer.zero_grad(set_to_none=True); loss.backward(); optimizer.step()
    sync(device)
    return time.perf_counter() - start


def round_batch_sizes(algorithm, data, round: int) -> list[int]:
    "The sizes of the batches the clients train on in `round`, client after client (as the sequential loop draws them)."
    return [len(index) for client in data.clients
            for index in algorithm.batches(client, algorithm.generator(round, client.id, "batches"))]


MODES = ("batched", "sequential", "workers")


def time_rounds(num_clients: int, device: torch.device, train: Images, model_name: str, batch_size: int, repeats: int,
                workers: int = 2, modes: tuple = MODES) -> dict:
    "Median seconds of a round in each of `modes` and of the plain loop, measured interleaved `repeats` times."
    parts = np.array_split(np.random.default_rng(0).permutation(len(train.y)), num_clients)
    data = FederatedData.from_partition(train, parts, device=device)
    seed_everything(0)
    model = build_model(model_name, num_classes=10, in_channels=1, image_size=28, seed=0)
    training = LocalTraining(epochs=1, batch_size=batch_size, lr=0.01)
    algorithm = FedAvg()
    algorithm.setup(model, data, LocalTraining(steps=1, batch_size=batch_size, lr=0.01))
    if batching_obstacles(algorithm): raise SystemExit(f"{model_name} cannot be batched: {batching_obstacles(algorithm)}")
    everyone = list(range(num_clients))
    modes = [m for m in modes if not (m == "workers" and device.type != "cpu")]  # forked workers: CPU only
    settings = {"batched": RunSettings(client_batching="batched"), "sequential": RunSettings(client_batching="sequential"),
                "workers": RunSettings(client_batching="sequential", client_workers=workers)}
    for mode in modes: run_round(algorithm, data, 0, everyone, evaluate=False, settings=settings[mode])  # warm-up
    algorithm.training = training
    x, y = torch.cat([c.x_train for c in data.clients]), torch.cat([c.y_train for c in data.clients])
    times = {**{mode: [] for mode in modes}, "plain": []}
    for repeat in range(1, repeats + 1):
        for mode in modes:
            sync(device); start = time.perf_counter()
            run_round(algorithm, data, repeat, everyone, evaluate=False, settings=settings[mode])
            sync(device); times[mode].append(time.perf_counter() - start)
        times["plain"].append(plain_loop_seconds(build_model(model_name, num_classes=10, in_channels=1, image_size=28, seed=0).to(device),
                                                 x, y, training, device, round_batch_sizes(algorithm, data, repeat)))
    return {k: float(np.median(v)) for k, v in times.items()} | {"load": os.getloadavg()[0]}


def flower_speed_module():
    "benchmarks/flower_speed.py, imported from beside this file."
    spec = importlib.util.spec_from_file_location("flower_speed", Path(__file__).with_name("flower_speed.py"))
    module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)
    return module


def against_flower(clients: list[int], rounds: int, workers: int, model: str, flower_max: int, with_flower: bool,
                   client_workers: int = 2, modes: tuple = MODES, dataset: str = "fashion_mnist") -> None:
    "Part 2: flower_speed's workload, our engine in each of `modes` and Flower's simulation, one process each."
    speed = flower_speed_module()
    workload = {"model": model, "local_steps": 1, "local_epochs": 1, "batch_size": 32, "dataset": dataset}
    print(f"\nPart 2: FedAvg on {dataset}, {model}, one local step of 32 images per client, every client evaluated each round, "
          f"{rounds} rounds (median of rounds 2..), {workers} Ray workers; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'clients':>7} " + " ".join(f"{mode + ' s':>12}" for mode in modes) + f" {'Flower s':>9} "
          + " ".join(f"{'Flower/' + mode:>18}" for mode in modes) + f" {'seq/workers':>12} {'load':>5}")
    settings = {"batched": dict(client_batching="batched"), "sequential": dict(client_batching="sequential"),
                "workers": dict(client_batching="sequential", client_workers=client_workers)}
    for count in clients:
        seconds = {}
        for mode in modes:
            result = speed.run_child("inprocess", count, rounds, workers, {**workload, **settings[mode]})
            seconds[mode] = statistics.median(result["seconds"][1:])
        flower = None
        if with_flower and count <= flower_max:
            result = speed.run_child("flower", count, rounds, workers, {**workload, "client_batching": "sequential"})
            flower = statistics.median(result["seconds"][1:])
        ratio = lambda a, b: f"{a / b:.2f}" if a is not None and b is not None else "-"
        print(f"{count:>7} " + " ".join(f"{seconds[mode]:>12.2f}" for mode in modes) + f" {flower if flower is not None else float('nan'):>9.2f} "
              + " ".join(f"{ratio(flower, seconds[mode]):>18}" for mode in modes)
              + f" {ratio(seconds.get('sequential'), seconds.get('workers')):>12} {os.getloadavg()[0]:>5.1f}", flush=True)
        if flower is None:
            print(f"        Flower skipped: {'flwr is not installed' if not with_flower else f'more than --flower-max-clients={flower_max} clients'}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, nargs="+", default=[10, 100, 500, 2000])
    parser.add_argument("--devices", nargs="+", default=None, help="default: cpu, plus cuda when available")
    parser.add_argument("--samples", type=int, default=60000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--model", default="fedccl_cnn4")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repetitions of each measurement (median reported)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads in part 1 (part 2 uses one, like flower_speed.py)")
    parser.add_argument("--real", action="store_true", help="use real MNIST (fedlearn_nb.data) instead of random tensors")
    parser.add_argument("--no-flower", action="store_true", help="skip part 2")
    parser.add_argument("--parts", nargs="+", default=["1", "2"], choices=["1", "2"], help="which parts to run")
    parser.add_argument("--flower-clients", type=int, nargs="+", default=None, help="part 2's numbers of clients (default: --clients)")
    parser.add_argument("--flower-max-clients", type=int, default=500, help="skip Flower above this many clients")
    parser.add_argument("--flower-rounds", type=int, default=3)
    parser.add_argument("--flower-dataset", default="fashion_mnist", help="part 2's dataset (iid over the clients)")
    parser.add_argument("--workers", type=int, default=2, help="Ray ClientApp workers")
    parser.add_argument("--client-workers", type=int, default=2, help="our engine's worker processes in the 'workers' mode (client_workers)")
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES, help="which of our paths to time")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    devices = args.devices or (["cpu"] + (["cuda"] if torch.cuda.is_available() else []))
    train, _ = make_data(args.samples, args.real)
    if "1" in args.parts: print(f"Part 1: FedAvg, 1 local epoch, batch {args.batch_size}, model {args.model}, {len(train.y)} training samples, torch {torch.__version__}, "
          f"{torch.get_num_threads()} CPU threads, medians of {args.repeats} interleaved repeats; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    modes = tuple(args.modes)
    ratios = [(a, b) for a, b in (("batched", "plain"), ("sequential", "plain"), ("workers", "plain"), ("sequential", "batched"),
                                  ("sequential", "workers")) if a in modes + ("plain",) and b in modes + ("plain",)]
    short = {"sequential": "seq"}
    if "1" in args.parts: print(f"{'device':>8} {'clients':>7} " + " ".join(f"{mode + ' s':>12}" for mode in modes + ("plain",)) + " "
          + " ".join(f"{short.get(a, a) + '/' + short.get(b, b):>15}" for a, b in ratios) + f" {'load':>5}")
    for device in devices if "1" in args.parts else []:
        device = torch.device(device)
        if device.type == "cuda" and not torch.cuda.is_available(): print(f"{device}: not available, skipped"); continue
        for clients in args.clients:
            r = time_rounds(clients, device, train, args.model, args.batch_size, args.repeats, args.client_workers, modes)
            value = lambda key: f"{r[key]:.2f}" if key in r else "-"
            print(f"{str(device):>8} {clients:>7} " + " ".join(f"{value(mode):>12}" for mode in modes + ("plain",)) + " "
                  + " ".join(f"{r[a] / r[b] if a in r and b in r else float('nan'):>15.2f}" for a, b in ratios) + f" {r['load']:>5.1f}", flush=True)
    if not args.no_flower and "2" in args.parts:
        with_flower = importlib.util.find_spec("flwr") is not None
        against_flower(args.flower_clients or args.clients, args.flower_rounds, args.workers, args.model, args.flower_max_clients, with_flower,
                       args.client_workers, modes, args.flower_dataset)


if __name__ == "__main__":
    main()
