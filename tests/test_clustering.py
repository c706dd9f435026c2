"Invariants of fedlearn_nb.clustering (FINCH, FINCH*) on random inputs; parity with finch-clust is in test_clustering_parity.py."
import numpy as np
import pytest
import torch
from sklearn.metrics import adjusted_rand_score

from fedlearn_nb.clustering import (DISTANCES, canonical_labels, cluster_means, finch, first_neighbours,
                                    weighted_finch)


def _blobs(seed, count=600, dim=12, centres=8):
    generator = np.random.default_rng(seed)
    means = generator.normal(scale=5.0, size=(centres, dim))
    return (means[generator.integers(0, centres, size=count)] + generator.normal(size=(count, dim))).astype(np.float32)


@pytest.mark.parametrize("distance", DISTANCES)
def test_block_size_does_not_change_first_neighbours(distance):
    points = _blobs(0, count=257)
    points[10] = points[3]  # an exact tie that must resolve the same way in every block layout
    whole = first_neighbours(points, distance)[0]
    for rows in (1, 2, 7, 64, 256, 1000):
        assert torch.equal(first_neighbours(points, distance, block_size=rows)[0], whole)
    assert whole[10].item() == 3 and whole[3].item() == 10


@pytest.mark.parametrize("distance", DISTANCES)
def test_hierarchy_is_nested_canonical_and_shrinks(distance):
    result = finch(_blobs(1), distance)
    assert len(result.partitions) >= 3
    for labels, count in zip(result.partitions, result.num_clusters):
        assert labels.dtype == np.int64 and labels.shape == (600,)
        np.testing.assert_array_equal(labels, canonical_labels(labels))  # 0..k-1 in first-appearance order
        assert set(np.unique(labels)) == set(range(count))
    for fine, coarse, fine_count, coarse_count in zip(result.partitions, result.partitions[1:],
                                                      result.num_clusters, result.num_clusters[1:]):
        assert len(set(zip(fine, coarse))) == fine_count       # whole clusters merge, none split
        assert 2 <= coarse_count <= fine_count // 2             # each step at least halves, never reaches 1


@pytest.mark.parametrize("distance", DISTANCES)
def test_permuting_the_points_permutes_the_partitions(distance):
    points = _blobs(2)
    order = np.random.default_rng(0).permutation(len(points))
    base, permuted = finch(points, distance), finch(points[order], distance)
    assert base.num_clusters == permuted.num_clusters
    for level in range(len(base.partitions)):
        assert adjusted_rand_score(base.partitions[level][order], permuted.partitions[level]) == 1.0


def test_distances_are_invariant_where_they_should_be():
    points = _blobs(3)
    scales = np.random.default_rng(1).uniform(0.5, 4.0, size=(len(points), 1)).astype(np.float32)
    base = finch(points, "cosine")
    # rescaling each row keeps every direction, so level 0; the means above it move (means of unequal-length vectors)
    assert np.array_equal(finch(points * scales, "cosine").partitions[0], base.partitions[0])
    assert np.array_equal(finch(points * 2.5, "cosine").as_matrix(), base.as_matrix())
    moved = (points * 3.0 + 40.0).astype(np.float32)
    assert np.array_equal(finch(moved, "euclidean").as_matrix(), finch(points, "euclidean").as_matrix())


def test_means_are_the_means_of_the_original_points():
    points = _blobs(4)
    result = finch(points, "euclidean")
    for level, labels in enumerate(result.partitions):
        expected = np.stack([points[labels == k].astype(np.float64).mean(0) for k in range(result.num_clusters[level])])
        np.testing.assert_allclose(result.means(level).numpy(), expected, rtol=1e-5, atol=1e-5)


def test_same_input_same_output():
    points = _blobs(5)
    assert np.array_equal(finch(points).as_matrix(), finch(points.copy()).as_matrix())


def test_weighted_finch_weights_and_centroids():
    points = _blobs(6, count=200)
    weights = np.random.default_rng(2).integers(1, 20, size=len(points)).astype(np.float64)
    star = weighted_finch(points, weights, "euclidean", centroid="weighted")
    for labels, centroids, cluster_weights in zip(star.partitions, star.centroids, star.weights):
        np.testing.assert_allclose(cluster_weights.numpy(), np.bincount(labels, weights=weights), rtol=1e-6)
        expected = np.stack([np.average(points[labels == k], axis=0, weights=weights[labels == k])
                             for k in range(labels.max() + 1)])
        np.testing.assert_allclose(centroids.numpy(), expected, rtol=1e-5, atol=1e-5)
    plain = weighted_finch(points, weights, "euclidean")
    for level, centroids in enumerate(plain.centroids):
        np.testing.assert_allclose(centroids.numpy(), plain.means(level).numpy())


@pytest.mark.parametrize("bad,message", [
    (np.full(200, -1.0), "positive"), (np.r_[np.ones(199), np.nan], "positive"), (np.ones(10), "one weight per point")])
def test_weighted_finch_rejects_bad_weights(bad, message):
    with pytest.raises(ValueError, match=message):
        weighted_finch(_blobs(7, count=200), bad)


def test_cluster_means_checks_its_labels():
    points = torch.ones(4, 2)
    with pytest.raises(ValueError, match="lie in"):
        cluster_means(points, [0, 1, 2, 3], num_clusters=2)
    with pytest.raises(ValueError, match="lie in"):
        cluster_means(points, [0, -1, 0, 0])
