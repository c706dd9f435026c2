"""Parity of fedlearn_nb.clustering.finch with the reference FINCH (the `finch-clust` package).

Every partition of the hierarchy must equal the reference's, label for label (both number clusters in order of first
appearance), on a suite of random and structured inputs, for both distances, with `ensure_early_exit=False` (how
FPL and FedPLVM call it). A nearest-neighbour decision that is closer than float32 rounding could be decided
either way by two correct implementations, so each case also checks that it is *well posed*: at every level, each
point's nearest neighbour beats the next candidate by a clear margin, or the candidates are tied exactly (duplicates,
grids), where both implementations take the lowest index. "Clear" is 5e-7 of the data's scale, about eight float32
rounding units.
"""
import os
import warnings

import numpy as np
import pytest
import torch
from scipy.spatial.distance import cdist

from fedlearn_nb import clustering
from fedlearn_nb.clustering import DISTANCES, canonical_labels, finch, weighted_finch

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # finch-clust warns that its optional approximate-neighbour package is absent
    finch_reference = pytest.importorskip("finch", reason="finch-clust (the reference FINCH) is not installed: pip install finch-clust")


def _blobs(seed, count, dim, centres, spread=1.0, offset=0.0):
    generator = np.random.default_rng(seed)
    means = generator.normal(scale=6.0, size=(centres, dim)) + offset
    members = generator.integers(0, centres, size=count)
    return means[members] + spread * generator.normal(size=(count, dim))


def _uniform(seed, count, dim):
    return np.random.default_rng(seed).uniform(size=(count, dim))


def _with_duplicates(seed, count, dim, centres, fraction=0.25):
    generator = np.random.default_rng(seed + 100)
    base = _blobs(seed, count, dim, centres)
    copies = base[generator.integers(0, count, size=int(fraction * count))]
    data = np.concatenate([base, copies])
    return data[generator.permutation(len(data))]


def _circle(seed, count):
    angles = np.sort(np.random.default_rng(seed).uniform(0, 2 * np.pi, size=count))
    radii = np.random.default_rng(seed + 1).uniform(0.5, 3.0, size=count)
    return np.stack([radii * np.cos(angles), radii * np.sin(angles)], axis=1)


def _patches(seed, count):
    "`count` unit squares (2 x 2 integer grids) at random integer places: exact ties inside every patch."
    corners = np.random.default_rng(seed).choice(60 * 60, size=count, replace=False)
    corners = np.stack([corners // 60, corners % 60], axis=1) * 3
    square = np.array([[0, 0], [0, 1], [1, 0], [1, 1]])
    return (corners[:, None, :] + square[None]).reshape(-1, 2).astype(float)


# name -> (points, distances to test)
CASES = {
    "3 points": (_uniform(0, 3, 4), DISTANCES),
    "4 points": (_uniform(1, 4, 3), DISTANCES),
    "7 points": (_blobs(2, 7, 5, 2), DISTANCES),
    "20 points": (_blobs(3, 20, 3, 4), DISTANCES),
    "blobs 200x2": (_blobs(4, 200, 2, 6), ("euclidean",)),
    "circle 40x2": (_circle(5, 40), DISTANCES),
    "blobs 500x16": (_blobs(6, 500, 16, 8), DISTANCES),
    "uniform 300x8": (_uniform(7, 300, 8), DISTANCES),
    "uniform 1000x32": (_uniform(8, 1000, 32), DISTANCES),
    # (with cosine, points this far from the origin all point almost the same way: float32 cannot rank them)
    "far from origin 500x8": (_blobs(9, 500, 8, 5, offset=100.0), ("euclidean",)),
    "duplicates 400x8": (_with_duplicates(10, 400, 8, 6), DISTANCES),
    "integer patches 40x4x2": (_patches(14, 40), ("euclidean",)),
    "non-negative features 800x128": (np.abs(_blobs(11, 800, 128, 10, spread=2.0)), ("cosine",)),
    "blobs 1000x128": (_blobs(12, 1000, 128, 12, spread=3.0), DISTANCES),
    "blobs 2000x64": (_blobs(13, 2000, 64, 20, spread=2.0), DISTANCES),
}
PARAMETERS = [(name, distance) for name, (_, distances) in CASES.items() for distance in distances]


def _pairwise(points: np.ndarray, distance: str) -> np.ndarray:
    "Float64 distance matrix with +inf on the diagonal."
    points = np.asarray(points, dtype=np.float64)
    if distance == "cosine":
        norms = np.linalg.norm(points, axis=1, keepdims=True)
        unit = points / np.where(norms > 0, norms, 1.0)
        full = np.clip(1.0 - unit @ unit.T, 0.0, 2.0)
    else:
        full = cdist(points, points)  # from the differences: exactly 0 between duplicates
    np.fill_diagonal(full, np.inf)
    return full


def _worst_margin(points: np.ndarray, distance: str) -> float:
    "Smallest gap between a row's nearest distance and the next distance that is not (exactly) tied with it, in units of the scale."
    if len(points) < 3: return np.inf
    full = _pairwise(points, distance)
    scale = 1.0 if distance == "cosine" else np.abs(points).max()
    tie = 1e-12 * scale
    nearest = full.min(1, keepdims=True)
    others = np.where(full <= nearest + tie, np.inf, full)  # drop the exactly tied candidates
    return float(((others.min(1) - nearest[:, 0]) / scale).min())


def _reference(points: np.ndarray, distance: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        partitions, counts, _ = finch_reference.FINCH(points, distance=distance, ensure_early_exit=False, verbose=False)
    return partitions, list(counts)


@pytest.mark.parametrize("name,distance", PARAMETERS, ids=[f"{n}-{d}" for n, d in PARAMETERS])
def test_every_partition_matches_finch_clust(name, distance):
    points = CASES[name][0].astype(np.float32)
    ours = finch(points, distance)
    reference, counts = _reference(points, distance)
    # the case is well posed: at every level's input, no near-tie that float32 rounding could flip
    level_inputs = [points] + [ours.means(level).numpy() for level in range(len(ours.partitions))]
    margins = [_worst_margin(level, distance) for level in level_inputs]
    assert min(margins) > 5e-7, f"{name}/{distance} has a near-tie (margins {margins}); pick another seed"
    assert ours.num_clusters == counts, f"cluster counts differ: ours {ours.num_clusters}, finch-clust {counts}"
    for level in range(reference.shape[1]):
        np.testing.assert_array_equal(ours.partitions[level], canonical_labels(reference[:, level]),
                                      err_msg=f"level {level} differs from finch-clust")
    np.testing.assert_array_equal(ours.as_matrix(), reference)  # even the label numbering is the reference's


def test_suite_covers_what_it_claims():
    sizes = [len(points) for points, _ in CASES.values()]
    dims = [points.shape[1] for points, _ in CASES.values()]
    assert min(sizes) == 3 and max(sizes) >= 2000 and min(dims) == 2 and max(dims) >= 128
    assert {d for _, ds in CASES.values() for d in ds} == set(DISTANCES)
    data = CASES["duplicates 400x8"][0]
    assert len(np.unique(data, axis=0)) < len(data)  # really has duplicates
    assert max(len(finch(points.astype(np.float32), ds[0]).partitions) for points, ds in CASES.values()) >= 4


def test_float64_input_and_tensor_input_agree():
    points = _blobs(20, 300, 12, 5).astype(np.float32)
    for distance in DISTANCES:
        base = finch(points, distance).as_matrix()
        np.testing.assert_array_equal(finch(torch.from_numpy(points), distance).as_matrix(), base)
        np.testing.assert_array_equal(finch(points.astype(np.float64), distance).as_matrix(), base)


def test_weighted_finch_partitions_are_finch_partitions():
    points = _blobs(21, 400, 16, 7).astype(np.float32)
    weights = np.random.default_rng(0).integers(1, 50, size=len(points)).astype(float)
    reference, counts = _reference(points, "cosine")
    for centroid in ("plain", "weighted"):
        star = weighted_finch(points, weights, centroid=centroid)
        assert star.num_clusters == counts
        np.testing.assert_array_equal(star.as_matrix(), reference)
        for labels, cluster_weights in zip(star.partitions, star.weights):
            np.testing.assert_allclose(cluster_weights.numpy(), np.bincount(labels, weights=weights), rtol=1e-6)


def test_threads_give_the_one_thread_hierarchy(monkeypatch):
    "With the strips shared among 2 or 3 threads (forced at every size), every partition is the one-thread one, and the reference's."
    monkeypatch.setattr(clustering, "_THREADED_STRIPS", 0)
    cases = [(CASES["blobs 2000x64"][0], DISTANCES), (_with_duplicates(15, 1200, 16, 10), DISTANCES)]
    threads = torch.get_num_threads()
    try:
        for points, distances in cases:
            points = points.astype(np.float32)
            for distance in distances:
                torch.set_num_threads(1)
                alone = finch(points, distance).as_matrix()
                for count in (2, 3):
                    torch.set_num_threads(count)
                    np.testing.assert_array_equal(finch(points, distance).as_matrix(), alone)
                np.testing.assert_array_equal(alone, _reference(points, distance)[0])
    finally:
        torch.set_num_threads(threads)
    assert (os.getpid(), 3) in clustering._POOLS  # the threads did run


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_matches_cpu():
    for name in ("blobs 2000x64", "duplicates 400x8", "integer patches 40x4x2"):
        points, distances = CASES[name]
        for distance in distances:
            cpu = finch(points.astype(np.float32), distance).as_matrix()
            gpu = finch(points.astype(np.float32), distance, device="cuda").as_matrix()
            np.testing.assert_array_equal(gpu, cpu)
