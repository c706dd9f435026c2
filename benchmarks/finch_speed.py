"""Speed and parity of fedlearn_nb's FINCH against the reference `finch-clust` on large inputs.

For each size and distance: seconds for ours on the CPU (and on CUDA when there is a GPU), seconds for finch-clust
(CPU, `ensure_early_exit=False`, exact neighbours), the ratio ours / reference, and whether every partition of the
hierarchy is identical. This takes minutes at the largest sizes and is not a test.

    python benchmarks/finch_speed.py                       # 1,000x64 ... 20,000x512, both distances
    python benchmarks/finch_speed.py --sizes 2000x64 5000x128 --threads 2 --json results/finch_speed.json
"""
import argparse
import time
import warnings

import numpy as np
import torch
from sklearn.metrics import adjusted_rand_score, pairwise_distances
from threadpoolctl import threadpool_limits

from fedlearn_nb.clustering import DISTANCES, canonical_labels, finch, first_neighbours
from fedlearn_nb.core import atomic_write_json, run_metadata

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # finch-clust warns that its optional approximate-neighbour package is absent
    from finch import FINCH

DEFAULT_SIZES = ["1000x64", "5000x128", "10000x256", "20000x512"]


def features(count: int, dim: int, seed: int = 0) -> np.ndarray:
    "Feature-like float32 data: non-negative (ReLU-like) gaussian blobs, about 25 points per blob at the finest scale."
    generator = np.random.default_rng(seed)
    centres = generator.normal(size=(max(2, count // 200), dim))
    members = generator.integers(0, len(centres), size=count)
    return np.maximum(centres[members] + 0.6 * generator.normal(size=(count, dim)), 0).astype(np.float32)


def timed(function, repeats: int, synchronise=None):
    "The result of `function()` and its best wall time over `repeats` runs."
    best, result = np.inf, None
    for _ in range(repeats):
        start = time.perf_counter()
        result = function()
        if synchronise: synchronise()
        best = min(best, time.perf_counter() - start)
    return result, best


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
    parser.add_argument("--repeats", type=int, default=1, help="best of this many runs (each)")
    parser.add_argument("--no-cuda", action="store_true", help="skip the GPU timings even when a GPU is present")
    parser.add_argument("--json", default=None, help="also write the rows (with run metadata) to this JSON file")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    use_cuda = torch.cuda.is_available() and not args.no_cuda
    print(f"CPU threads: {args.threads}; CUDA: {torch.cuda.get_device_name() if use_cuda else 'not used'}")
    header = f"{'size':>11} {'distance':>9} {'levels':>24} {'ours cpu':>9} {'finch-clust':>11} {'ratio':>6}"
    print(header + (f" {'ours cuda':>9} {'ratio':>6}" if use_cuda else "") + "  parity")
    rows = []
    for size in args.sizes:
        count, dim = (int(part) for part in size.lower().split("x"))
        data = features(count, dim, args.seed)
        for distance in args.distances:
            with threadpool_limits(args.threads):
                reference, reference_time = timed(lambda: FINCH(data, distance=distance, ensure_early_exit=False,
                                                                ann_threshold=count + 1, verbose=False)[0], args.repeats)
            ours, ours_time = timed(lambda: finch(data, distance), args.repeats)
            row = {"size": size, "distance": distance, "num_clusters": ours.num_clusters,
                   "ours_cpu_s": ours_time, "reference_cpu_s": reference_time, "ratio_cpu": ours_time / reference_time,
                   "parity_cpu": compare(ours.as_matrix(), reference)}
            line = (f"{size:>11} {distance:>9} {str(ours.num_clusters):>24} {ours_time:9.2f} {reference_time:11.2f} "
                    f"{ours_time / reference_time:6.2f}")
            if use_cuda:
                finch(data[:256], distance, device="cuda")  # warm up the GPU
                on_gpu, gpu_time = timed(lambda: finch(data, distance, device="cuda"), max(args.repeats, 2),
                                         torch.cuda.synchronize)
                row.update(ours_cuda_s=gpu_time, ratio_cuda=gpu_time / reference_time,
                           parity_cuda=compare(on_gpu.as_matrix(), reference))
                line += f" {gpu_time:9.3f} {gpu_time / reference_time:6.3f}"
            parities = {row["parity_cpu"], row.get("parity_cuda", row["parity_cpu"])}
            print(line + "  " + " / ".join(sorted(parities)), flush=True)
            if row["parity_cpu"] != "identical" and (ours.partitions[0] != canonical_labels(reference[:, 0])).any():
                row["level0_explained"] = explain_level0(data, distance)
                print(" " * 13 + row["level0_explained"], flush=True)
            rows.append(row)
    if args.json:
        atomic_write_json(args.json, {"meta": run_metadata(vars(args), device="cuda" if use_cuda else "cpu"), "rows": rows})
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
