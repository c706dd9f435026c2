"""One FedAvg round in-process against the same round on Flower's simulation engine, for 10, 100 and 500 clients.

Fashion-MNIST (60000 training images, iid over the clients; its test set cut into equal shares), FedCRL's small CNN,
one local step of 32 images per client, evaluation of every client each round, one math thread everywhere. Each
measurement runs in its own child process; the parent samples the summed resident memory of that child and every
process it starts (Ray's GCS, raylet and ClientApp workers included) and reports the peak. The round time is the
engine's own per-round wall time (`History.seconds`), the median of the rounds after the first (round 1 also pays
building the federation in each worker). Ray's start-up is not in the round time; it is reported apart.

    nice -n 19 python benchmarks/flower_speed.py                     # 10, 100, 500 clients, 3 rounds each
    python benchmarks/flower_speed.py --clients 10 100 --rounds 3 --workers 2
    python benchmarks/flower_speed.py --model fedccl_cnn4 --client-batching sequential   # another model, the loop over clients

On a machine shared with other jobs, wall times include their contention: compare ratios measured in one run.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


WORKLOAD = {"model": "fedcrl_cnn", "local_steps": 1, "local_epochs": 1, "batch_size": 32, "client_batching": "auto"}


def config_for(clients: int, rounds: int, results_dir: str, workload: dict | None = None):
    "The benchmark's run: FedAvg on Fashion-MNIST over `clients` iid clients; `workload` overrides WORKLOAD's model and local work."
    from fedlearn_nb.experiment import RunConfig
    work = {**WORKLOAD, **(workload or {})}
    return RunConfig(dataset=work.get("dataset", "fashion_mnist"), partition="iid", num_clients=clients, model=work["model"], algorithm="fedavg", rounds=rounds,
                     local_steps=work["local_steps"], local_epochs=work["local_epochs"], batch_size=work["batch_size"], optimizer="sgd",
                     lr=0.01, results_dir=results_dir, name=f"speed-{clients}", client_batching=work["client_batching"],
                     client_workers=work.get("client_workers", 1))


def measure(backend: str, clients: int, rounds: int, workers: int, workload: dict | None = None) -> dict:
    "Run one experiment in this process and return its round times (the child side of the benchmark)."
    import torch
    torch.set_num_threads(1)
    from fedlearn_nb.experiment import run
    began = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        config = config_for(clients, rounds, folder, workload)
        if backend == "inprocess": history = run(config, resume=False, progress=False)
        else:
            from fedlearn_nb.tools.flower import run_on_flower, simulation_backend_config
            history = run_on_flower(config, resume=False, progress=False, backend_config=simulation_backend_config(workers))
    total = time.perf_counter() - began
    return {"seconds": history.seconds, "total": total, "accuracy": history[-1]["accuracy_weighted"]}


def tree_rss(root: int) -> int:
    "Resident bytes of process `root` and all its descendants (from /proc)."
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit(): continue
        try: ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError): continue
        children.setdefault(ppid, []).append(int(entry))
    total, stack = 0, [root]
    while stack:
        pid = stack.pop(); stack += children.get(pid, [])
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"): total += int(line.split()[1]) * 1024
        except OSError: pass
    return total


def run_child(backend: str, clients: int, rounds: int, workers: int, workload: dict | None = None) -> dict:
    "Measure in a child process, sampling the memory of its whole process tree."
    command = [sys.executable, __file__, "--child", backend, "--clients", str(clients), "--rounds", str(rounds), "--workers", str(workers),
               "--workload", json.dumps(workload or {})]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    peak, stop = [0], threading.Event()
    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], tree_rss(process.pid)); time.sleep(0.25)
    sampler = threading.Thread(target=sample, daemon=True); sampler.start()
    output, _ = process.communicate()
    stop.set(); sampler.join()
    if process.returncode != 0: raise RuntimeError(f"{backend} with {clients} clients failed (exit {process.returncode})")
    result = json.loads(output.strip().splitlines()[-1])
    return {**result, "peak_bytes": peak[0]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[10, 100, 500])
    parser.add_argument("--rounds", type=int, default=3, help="rounds per run (>= 2: the first is not timed)")
    parser.add_argument("--workers", type=int, default=2, help="Ray ClientApp workers (one CPU each)")
    parser.add_argument("--model", default=WORKLOAD["model"], help="model of the run (fedcrl_cnn has dropout: its clients train one by one)")
    parser.add_argument("--local-steps", type=int, default=WORKLOAD["local_steps"], help="local steps per client (0: --local-epochs epochs)")
    parser.add_argument("--local-epochs", type=int, default=WORKLOAD["local_epochs"])
    parser.add_argument("--batch-size", type=int, default=WORKLOAD["batch_size"])
    parser.add_argument("--client-batching", default="auto", choices=["auto", "batched", "sequential"], help="the in-process run's path")
    parser.add_argument("--workload", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child", choices=["inprocess", "flower"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    workload = json.loads(args.workload) if args.workload else {
        "model": args.model, "local_steps": args.local_steps or None, "local_epochs": args.local_epochs, "batch_size": args.batch_size,
        "client_batching": args.client_batching}
    if args.rounds < 2: parser.error("--rounds must be >= 2: the first round is not timed")
    if args.child:
        print(json.dumps(measure(args.child, args.clients[0], args.rounds, args.workers, workload))); return 0
    rows = []
    print(f"FedAvg on Fashion-MNIST, {workload}, {args.rounds} rounds (median of rounds 2..), "
          f"{args.workers} Ray workers, 1 math thread; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    for clients in args.clients:
        result = {backend: run_child(backend, clients, args.rounds, args.workers, workload) for backend in ("inprocess", "flower")}
        local, flower = (statistics.median(result[b]["seconds"][1:]) for b in ("inprocess", "flower"))
        start_up = result["flower"]["total"] - sum(result["flower"]["seconds"])
        row = {"clients": clients, "inprocess_s": local, "flower_s": flower, "ratio": flower / local,
               "inprocess_peak_gb": result["inprocess"]["peak_bytes"] / 1e9, "flower_peak_gb": result["flower"]["peak_bytes"] / 1e9,
               "flower_start_up_s": start_up, "same_accuracy": result["inprocess"]["accuracy"] == result["flower"]["accuracy"]}
        rows.append(row)
        print(f"{clients:4d} clients: in-process {local:7.2f} s/round, Flower {flower:7.2f} s/round, ratio {row['ratio']:5.1f}x; "
              f"peak memory {row['inprocess_peak_gb']:.2f} GB vs {row['flower_peak_gb']:.2f} GB; Flower start-up and set-up {start_up:.0f} s; "
              f"same final accuracy: {row['same_accuracy']}", flush=True)
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
