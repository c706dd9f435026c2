"""Time one round of FedAvg on MNIST-sized data (60000 x 1 x 28 x 28) for 10 and 100 clients, on CPU and GPU.

Prints, per device and number of clients: seconds per round (local training + aggregation), training samples
per second, the evaluation time, and the ratio of the round to the same SGD steps run in a plain loop on one
model (the engine's overhead: per-client model loading, batching, aggregation).

    python benchmarks/engine_speed.py                       # cpu (and cuda when available), 10 and 100 clients
    python benchmarks/engine_speed.py --devices cpu --clients 10 --samples 12000
    python benchmarks/engine_speed.py --real                # real MNIST from the data root, if present

Random tensors stand in for MNIST by default (the speed does not depend on the pixel values).
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch
import torch.nn.functional as F

from fedlearn_nb.algorithms.fedavg import FedAvg
from fedlearn_nb.core import seed_everything, torch_generator
from fedlearn_nb.engine import FederatedData, LocalTraining, run_round
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


def plain_loop_seconds(model, x, y, training: LocalTraining, device) -> float:
    "The same number of SGD steps as the round, on one model over the pooled data (no federation)."
    optimizer = training.make_optimizer(model.parameters())
    model.train()
    sync(device); start = time.perf_counter()
    for index in training.batches(len(y), torch_generator(0)):
        index = index.to(device)
        loss = F.cross_entropy(model(x[index]), y[index])
        optimizer.zero_grad(set_to_none=True); loss.backward(); optimizer.step()
    sync(device)
    return time.perf_counter() - start


def time_round(num_clients: int, device: torch.device, train: Images, test: Images, model_name: str, batch_size: int, rounds: int) -> dict:
    parts = np.array_split(np.random.default_rng(0).permutation(len(train.y)), num_clients)
    data = FederatedData.from_partition(train, parts, test=test, device=device)
    seed_everything(0)
    model = build_model(model_name, num_classes=10, in_channels=1, image_size=28, seed=0)
    training = LocalTraining(epochs=1, batch_size=batch_size, lr=0.01)
    algorithm = FedAvg()
    algorithm.setup(model, data, LocalTraining(steps=2, batch_size=batch_size))
    run_round(algorithm, data, 0, list(range(num_clients)), evaluate=True)  # warm-up: kernels, allocator, lazy imports
    algorithm.training = training
    fit_times, eval_times = [], []
    for round in range(1, rounds + 1):
        sync(device); start = time.perf_counter()
        run_round(algorithm, data, round, list(range(num_clients)), evaluate=False)
        sync(device); fit_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        algorithm.aggregate_evaluate(round, [(c, algorithm.client_evaluate(c, ins)) for c, ins in algorithm.configure_evaluate(round, data.clients)])
        sync(device); eval_times.append(time.perf_counter() - start)
    x = torch.cat([c.x_train for c in data.clients]); y = torch.cat([c.y_train for c in data.clients])
    plain = plain_loop_seconds(build_model(model_name, num_classes=10, in_channels=1, image_size=28, seed=0).to(device), x, y, training, device)
    seconds = float(np.median(fit_times))
    return {"device": str(device), "clients": num_clients, "seconds_per_round": seconds, "samples_per_second": len(train.y) / seconds,
            "eval_seconds": float(np.median(eval_times)), "plain_loop_seconds": plain, "overhead_ratio": seconds / plain}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, nargs="+", default=[10, 100])
    parser.add_argument("--devices", nargs="+", default=None, help="default: cpu, plus cuda when available")
    parser.add_argument("--samples", type=int, default=60000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--model", default="fedccl_cnn4")
    parser.add_argument("--rounds", type=int, default=1, help="timed rounds (median reported)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--real", action="store_true", help="use real MNIST (fedlearn_nb.data) instead of random tensors")
    args = parser.parse_args(argv)
    if args.threads: torch.set_num_threads(args.threads)
    devices = args.devices or (["cpu"] + (["cuda"] if torch.cuda.is_available() else []))
    train, test = make_data(args.samples, args.real)
    print(f"FedAvg, 1 local epoch, batch {args.batch_size}, model {args.model}, {len(train.y)} training samples, "
          f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads")
    print(f"{'device':>8} {'clients':>7} {'s/round':>9} {'samples/s':>10} {'eval s':>8} {'plain s':>8} {'round/plain':>11}")
    for device in devices:
        device = torch.device(device)
        if device.type == "cuda" and not torch.cuda.is_available(): print(f"{device}: not available, skipped"); continue
        for clients in args.clients:
            r = time_round(clients, device, train, test, args.model, args.batch_size, args.rounds)
            print(f"{r['device']:>8} {r['clients']:>7} {r['seconds_per_round']:>9.2f} {r['samples_per_second']:>10.0f} "
                  f"{r['eval_seconds']:>8.2f} {r['plain_loop_seconds']:>8.2f} {r['overhead_ratio']:>11.2f}", flush=True)


if __name__ == "__main__":
    main()
