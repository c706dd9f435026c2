"""Time a table of independent runs one after another (`parallel=1`) and side by side (`parallel=2`, two forked worker
processes) through `tools.papers.PaperRuns.run_all`, the way a paper notebook with `--parallel N` runs them, and check
that the histories are the same.

The table: `--runs` seeds of FedAvg and FedCCL on the embedded digits (Dirichlet 0.5, 5 clients, fedccl_cnn4, SGD), a
few rounds each, one math thread per process. Each setting starts in an empty results folder; the two settings alternate
`--repeats` times and the median walls are reported with their ratio and the load average (uptime) before and after.

    python benchmarks/parallel_runs.py                  # 8 runs of 3 rounds, 2 repeats
    python benchmarks/parallel_runs.py --runs 12 --rounds 5 --repeats 3
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch

from fedlearn_nb.experiment import RunConfig
from fedlearn_nb.tools.papers import PaperRuns, RunRequest


def table(folder: Path, runs: int, rounds: int) -> list[RunRequest]:
    "`runs` independent runs: FedAvg and FedCCL alternately, each with its own seed."
    base = RunConfig(dataset="digits", partition="dirichlet", partition_kwargs={"alpha": 0.5}, num_clients=5, model="fedccl_cnn4",
                     rounds=rounds, local_epochs=1, batch_size=32, optimizer="sgd", lr=0.05, momentum=0.5, device="cpu",
                     results_dir=str(folder / "runs"), client_workers=1)
    return [RunRequest(index, dataclasses.replace(base, algorithm=("fedavg", "fedccl")[index % 2], seed=index // 2)) for index in range(runs)]


def cpu_seconds() -> float:
    "CPU seconds of this process and its finished children (the workers)."
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def timed(parallel: int, runs: int, rounds: int) -> tuple[float, float, list]:
    "Wall and CPU seconds of the table run with `parallel` processes, and its histories."
    with tempfile.TemporaryDirectory() as folder:
        began, cpu = time.perf_counter(), cpu_seconds()
        histories = PaperRuns(folder, parallel=parallel).run_all(table(Path(folder), runs, rounds))
        return time.perf_counter() - began, cpu_seconds() - cpu, [h.to_frame(with_time=False) for h in histories]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"load average before: {os.getloadavg()}")
    walls, cpus = {1: [], 2: []}, {1: [], 2: []}
    for repeat in range(args.repeats):
        for parallel in (1, 2):
            wall, cpu, frames = timed(parallel, args.runs, args.rounds)
            walls[parallel].append(wall); cpus[parallel].append(cpu)
            if parallel == 1: reference = frames
            else: assert all(a.equals(b) for a, b in zip(reference, frames)), "parallel histories differ from sequential ones"
            print(f"repeat {repeat}: parallel={parallel}: {wall:.1f} s wall, {cpu:.1f} CPU-s (load {os.getloadavg()[0]:.2f})", flush=True)
    one, two = statistics.median(walls[1]), statistics.median(walls[2])
    print(f"{args.runs} runs of {args.rounds} rounds: sequential {one:.1f} s, parallel 2 {two:.1f} s, wall ratio {two / one:.2f}; "
          f"CPU-s {statistics.median(cpus[1]):.1f} vs {statistics.median(cpus[2]):.1f} (histories identical); load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
