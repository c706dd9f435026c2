"""Speed and objective of fedlearn_nb's torch k-means against scikit-learn's KMeans at CCFC's server/client scale.

The problem of issue 25: 70,000 x 256 points (all of MNIST, each image's 784 pixels through one fixed random Gaussian
projection to 256 features, L2-normalised like CCFC's latents; blobs of the same shape when MNIST is absent or with
`--data blobs`), k = 10, 10 k-means++ restarts, scikit-learn's defaults otherwise (Lloyd, tol 1e-4, max_iter 300).
Both run on the CPU with the same thread count (default 1: torch.set_num_threads and threadpoolctl for scikit-learn).
The repeats alternate between the two so that other work on the machine slows both alike; the script prints each
run, then the medians: wall-clock and CPU seconds (this process), the ratio ours / scikit-learn (below 1 = ours is
faster), each one's objective (inertia, in float64) and its relative difference. Same seed each repeat, so the
objectives repeat too. Not a test: minutes on a 2-core machine.

    python benchmarks/kmeans_speed.py                    # 70,000 x 256, k = 10, 10 restarts, 3 repeats, 1 thread
    python benchmarks/kmeans_speed.py --size 20000x256 --repeats 2 --threads 2
"""
import argparse
import os
import time

import numpy as np
import torch
from sklearn.cluster import KMeans
from threadpoolctl import threadpool_limits

from fedlearn_nb.kmeans import kmeans, kmeans_inertia
from fedlearn_nb.data import DatasetNotFoundError, load_dataset


def mnist_features(count: int, dim: int, seed: int = 0) -> np.ndarray | None:
    "`count` MNIST images (train and test) through a fixed Gaussian projection to `dim` features, L2-normalised; None without MNIST."
    try: images = load_dataset("mnist", split="all").x[:count].flatten(1)
    except DatasetNotFoundError: return None
    projection = torch.randn(images.shape[1], dim, generator=torch.Generator().manual_seed(seed)) / images.shape[1] ** 0.5
    return torch.nn.functional.normalize(images @ projection, dim=1).numpy()


def blob_features(count: int, dim: int, seed: int = 0, centres: int = 10) -> np.ndarray:
    "Overlapping Gaussian blobs, float32, L2-normalised."
    generator = np.random.default_rng(seed)
    means = generator.normal(size=(centres, dim))
    rows = means[generator.integers(0, centres, size=count)] + 2.0 * generator.normal(size=(count, dim))
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def timed(function):
    "The result of `function()`, its wall-clock seconds and this process's CPU seconds."
    wall, cpu = time.perf_counter(), time.process_time()
    result = function()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="70000x256", help="N x D")
    parser.add_argument("--clusters", type=int, default=10)
    parser.add_argument("--n-init", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--data", choices=("mnist", "blobs"), default="mnist")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    count, dim = (int(part) for part in args.size.lower().split("x"))
    points = mnist_features(count, dim) if args.data == "mnist" else None
    source = f"MNIST, {count} images projected to {dim}, L2-normalised"
    if points is None: points, source = blob_features(count, dim), f"blobs {count} x {dim}, L2-normalised"
    torch.set_num_threads(args.threads)
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}; load average {os.getloadavg()}")
    print(f"data: {source}; k = {args.clusters}, n_init = {args.n_init}, threads = {args.threads}, torch {torch.__version__}")
    runs = {"ours": [], "sklearn": []}
    with threadpool_limits(args.threads):
        for repeat in range(args.repeats):
            for name in (("ours", "sklearn") if repeat % 2 == 0 else ("sklearn", "ours")):
                if name == "ours":
                    (centroids, _), wall, cpu = timed(lambda: kmeans(points, args.clusters, seed=args.seed, n_init=args.n_init))
                else:
                    model, wall, cpu = timed(lambda: KMeans(args.clusters, n_init=args.n_init, random_state=args.seed).fit(points))
                    centroids = model.cluster_centers_
                inertia = kmeans_inertia(points, centroids)
                runs[name].append((wall, cpu, inertia))
                print(f"  repeat {repeat}  {name:8s} wall {wall:7.2f} s  cpu {cpu:7.2f} s  inertia {inertia:.4f}", flush=True)
    ours, reference = (np.median(np.array(runs[name]), axis=0) for name in ("ours", "sklearn"))
    print(f"medians of {args.repeats}: ours {ours[0]:.2f} s wall / {ours[1]:.2f} s CPU; scikit-learn {reference[0]:.2f} s wall / {reference[1]:.2f} s CPU")
    print(f"ratio ours / scikit-learn: wall {ours[0] / reference[0]:.3f}, CPU {ours[1] / reference[1]:.3f} (below 1 = ours faster)")
    print(f"objective: ours {ours[2]:.4f}, scikit-learn {reference[2]:.4f}, relative difference {(ours[2] - reference[2]) / reference[2]:+.2e}")
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}; load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
