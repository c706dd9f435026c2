"""Speed and parity of fedlearn_nb's FINCH against the reference `finch-clust` on large inputs.

For each size and distance: the median time of ours on the CPU (and on CUDA when there is a GPU) and of
finch-clust (CPU, `ensure_early_exit=False`, exact neighbours), over repeats that alternate between the two so
that a machine shared with other work slows both alike; the ratio ours / finch-clust (below 1 = ours is faster)
in wall-clock time and in CPU time (the process's own CPU seconds, which other processes on a loaded machine
barely disturb); and whether every partition of the hierarchy is identical. This takes minutes at the largest
sizes and is not a test.

Each timed run follows an untimed run of the same library on the same data (a small warm-up would not start the
threads that ours shares its strips among from N*N*D = 2^30), and happens in a fresh Python process of its own unless
`--in-process`: the reference's BLAS threads stay busy for about 0.1 s after it returns, and in one shared process
the run timed next (ours, every other repeat) pays for that busy core in its wall time and its CPU time.

    python benchmarks/finch_speed.py --threads 1            # 2,000 / 5,000 / 20,000 x 128 and x 512, both distances
    python benchmarks/finch_speed.py --sizes 2000x64 5000x128 --repeats 5 --json results/finch_speed.json
"""
import argparse
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from sklearn.metrics import adjusted_rand_score, pairwise_distances
from threadpoolctl import threadpool_limits

from fedlearn_nb.clustering import DISTANCES, canonical_labels, finch, first_neighbours
from fedlearn_nb.core import atomic_write_json, run_metadata

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # finch-clust warns that its optional approximate-neighbour package is absent
    from finch import FINCH

DEFAULT_SIZES = ["2000x128", "5000x128", "20000x128", "2000x512", "5000x512", "20000x512"]


def features(count: int, dim: int, seed: int = 0) -> np.ndarray:
    "Feature-like float32 data: non-negative (ReLU-like) gaussian blobs, about 25 points per blob at the finest scale."
    generator = np.random.default_rng(seed)
    centres = generator.normal(size=(max(2, count // 200), dim))
    members = generator.integers(0, len(centres), size=count)
    return np.maximum(centres[members] + 0.6 * generator.normal(size=(count, dim)), 0).astype(np.float32)


def timed(function, synchronise=None):
    "The result of `function()`, its wall-clock seconds and its CPU seconds (this process, all threads)."
    wall, cpu = time.perf_counter(), time.process_time()
    result = function()
    if synchronise: synchronise()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def run_once(name: str, size: str, distance: str, threads: int, seed: int):
    "One timed run of ours or the reference on the CPU, after an untimed one on the same data: (hierarchy matrix, wall s, CPU s)."
    count, dim = (int(part) for part in size.lower().split("x"))
    data = features(count, dim, seed)
    if name == "ours":
        run = lambda: finch(data, distance).as_matrix()
    else:
        run = lambda: FINCH(data, distance=distance, ensure_early_exit=False, ann_threshold=count + 1, verbose=False)[0]
    with threadpool_limits(threads):   # the reference's BLAS threads; ours sets torch's threads
        run()  # first-call costs (thread pools started, memory mapped) are not part of the comparison
        return timed(run)


def run_apart(name: str, size: str, distance: str, threads: int, seed: int):
    "`run_once` in a fresh Python process, so that no thread left over from an earlier run shares its cores."
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "run.npz"
        subprocess.run([sys.executable, __file__, "--one", name, "--sizes", size, "--distances", distance, "--threads",
                        str(threads), "--seed", str(seed), "--out", str(out)], check=True)
        saved = np.load(out)
        return saved["hierarchy"], float(saved["wall"]), float(saved["cpu"])


def compare(ours: np.ndarray, reference: np.ndarray) -> str:
    "'identical', or how the hierarchies differ (levels, and the adjusted Rand index of each shared level)."
    if ours.shape == reference.shape and (ours == reference).all(): return "identical"
    shared = min(ours.shape[1], reference.shape[1])
    scores = [adjusted_rand_score(reference[:, level], ours[:, level]) for level in range(shared)]
    return f"DIFFERENT: levels {ours.shape[1]} vs {reference.shape[1]}, ARI per level {np.round(scores, 6).tolist()}"


def explain_level0(data: np.ndarray, distance: str, block: int = 2000) -> str:
    "Where our level-0 first neighbours differ from the reference's float32 ones: the exact (float64) gaps there."
    ours = first_neighbours(data, distance)[0].cpu().numpy()
    theirs = np.empty(len(data), dtype=np.int64)
    for start in range(0, len(data), block):  # the reference's computation: float32 distances, argmin
        part = pairwise_distances(data[start:start + block], data, metric=distance).astype(np.float32)
        part[np.arange(len(part)), np.arange(start, start + len(part))] = np.inf
        theirs[start:start + block] = part.argmin(1)
    rows = np.nonzero(ours != theirs)[0]
    gaps, exact_wins = [], 0
    for row in rows:
        exact = pairwise_distances(data[row:row + 1].astype(np.float64), data.astype(np.float64), metric=distance)[0]
        exact[row] = np.inf
        gaps.append(abs(exact[theirs[row]] - exact[ours[row]]))
        exact_wins += int(exact[ours[row]] <= exact[theirs[row]])
    largest = max(gaps, default=0.0)
    verdict = "a near-tie below float32 resolution" if largest < 1e-6 else "NOT a rounding effect: investigate"
    return (f"level 0: {len(rows)} point(s) with a different first neighbour; ours is the exact (float64) nearest in "
            f"{exact_wins} of them; their two candidates' distances differ by at most {largest:.1e} ({verdict})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=DEFAULT_SIZES, help="NxD sizes, e.g. 5000x128")
    parser.add_argument("--distances", nargs="+", default=list(DISTANCES), choices=DISTANCES)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="CPU threads for both implementations")
    parser.add_argument("--seed", type=int, default=0, help="seed of the generated data")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each, alternating; medians are reported")
    parser.add_argument("--no-cuda", action="store_true", help="skip the GPU timings even when a GPU is present")
    parser.add_argument("--json", default=None, help="also write the rows (with run metadata) to this JSON file")
    parser.add_argument("--in-process", action="store_true",
                        help="time every run in this one process (the way before: ours then pays for the reference's busy BLAS threads)")
    parser.add_argument("--one", choices=["ours", "reference"], help=argparse.SUPPRESS)  # a child process: one timed run
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.repeats < 1: parser.error("--repeats must be at least 1")
    torch.set_num_threads(args.threads)
    if args.one:
        hierarchy, wall, cpu = run_once(args.one, args.sizes[0], args.distances[0], args.threads, args.seed)
        np.savez(args.out, hierarchy=hierarchy, wall=wall, cpu=cpu)
        return
    use_cuda = torch.cuda.is_available() and not args.no_cuda
    print(f"CPU threads: {args.threads}; CUDA: {torch.cuda.get_device_name() if use_cuda else 'not used'}; "
          f"medians of {args.repeats} alternating runs, "
          f"{'in this one process' if args.in_process else 'each in a fresh process'}; ratio = ours / finch-clust (wall, CPU); speed-up = its inverse (wall / CPU)")
    header = (f"{'size':>10} {'distance':>9} {'levels':>22} {'ours s':>7} {'ref s':>7} {'wall':>6} {'cpu':>6} "
              f"{'speed-up':>12}")
    print(header + (f" {'cuda s':>7} {'ratio':>6}" if use_cuda else "") + "  parity")
    rows = []
    for size in args.sizes:
        count, dim = (int(part) for part in size.lower().split("x"))
        data = features(count, dim, args.seed)
        for distance in args.distances:
            times = {"ours": [], "reference": []}
            for repeat in range(args.repeats):  # alternate which goes first, so drifts in the machine's load cancel
                for name in (("ours", "reference") if repeat % 2 == 0 else ("reference", "ours")):
                    run = run_once if args.in_process else run_apart
                    result, wall, cpu = run(name, size, distance, args.threads, args.seed)
                    times[name].append((wall, cpu))
                    if name == "ours": ours = result
                    else: reference = result
            (ours_wall, ours_cpu), (reference_wall, reference_cpu) = (np.median(times[name], axis=0) for name in times)
            levels = [int(len(np.unique(ours[:, level]))) for level in range(ours.shape[1])]
            row = {"size": size, "distance": distance, "num_clusters": levels, "repeats": args.repeats,
                   "in_process": args.in_process,
                   "ours_wall_s": ours_wall, "reference_wall_s": reference_wall, "ratio_wall": ours_wall / reference_wall,
                   "ours_cpu_time_s": ours_cpu, "reference_cpu_time_s": reference_cpu, "ratio_cpu_time": ours_cpu / reference_cpu, "runs_wall_and_cpu_s": times, "parity_cpu": compare(ours, reference)}
            line = (f"{size:>10} {distance:>9} {str(levels):>22} {ours_wall:7.2f} {reference_wall:7.2f} "
                    f"{ours_wall / reference_wall:6.3f} {ours_cpu / reference_cpu:6.3f} {f'{reference_wall / ours_wall:.1f}x / {reference_cpu / ours_cpu:.1f}x':>12}")
            if use_cuda:
                finch(data[:256], distance, device="cuda")  # warm up the GPU
                gpu_runs = [timed(lambda: finch(data, distance, device="cuda"), torch.cuda.synchronize)
                            for _ in range(max(args.repeats, 2))]
                on_gpu, gpu_time = gpu_runs[-1][0], float(np.median([run[1] for run in gpu_runs]))
                row.update(ours_cuda_s=gpu_time, ratio_cuda=gpu_time / reference_wall,
                           parity_cuda=compare(on_gpu.as_matrix(), reference))
                line += f" {gpu_time:7.3f} {gpu_time / reference_wall:6.3f}"
            parities = {row["parity_cpu"], row.get("parity_cuda", row["parity_cpu"])}
            print(line + "  " + " / ".join(sorted(parities)), flush=True)
            if row["parity_cpu"] != "identical" and (canonical_labels(ours[:, 0]) != canonical_labels(reference[:, 0])).any():
                row["level0_explained"] = explain_level0(data, distance)
                print(" " * 12 + row["level0_explained"], flush=True)
            rows.append(row)
    if args.json:
        atomic_write_json(args.json, {"meta": run_metadata(vars(args), device="cuda" if use_cuda else "cpu"), "rows": rows})
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
