"Invariants of fedlearn_nb.clustering (FINCH, FINCH*) on random inputs; parity with finch-clust is in test_clustering_parity.py."
import numpy as np
import pytest
import torch
from sklearn.metrics import adjusted_rand_score

from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from fedlearn_nb.clustering import (DISTANCES, canonical_labels, cluster_means, finch, first_neighbour_clusters,
                                    first_neighbours, weighted_finch)


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


def _near_tie(seed, dim=16, gap=1e-10):
    "Unit vector a, and b, c with cos(a, c) = cos(a, b) + gap (c is the nearer, by far less than float32 can see), turned at random."
    generator = np.random.default_rng(seed)
    w1, w2 = generator.normal(size=(2, dim - 1))
    w1, w2 = w1 / np.linalg.norm(w1), w2 / np.linalg.norm(w2)
    cos_b = generator.uniform(0.95, 0.999)
    cos_c = cos_b + gap
    a, b, c = np.eye(dim)[0], np.r_[cos_b, np.sqrt(1 - cos_b**2) * w1], np.r_[cos_c, np.sqrt(1 - cos_c**2) * w2]
    rotation = np.linalg.qr(generator.normal(size=(dim, dim)))[0]  # no longer axis-aligned: float32 sums round
    return a @ rotation.T, b @ rotation.T, c @ rotation.T


def test_float64_decision_fixes_a_float32_mistake():
    "Near-ties whose float32 scores rank the wrong candidate first, placed in different strips: the exact one wins."
    mistakes = 0
    for seed in range(20):
        a, b, c = _near_tie(seed)
        filler = -np.tile(a, (70, 1)) + 0.3 * np.random.default_rng(seed).normal(size=(70, len(a)))  # far away
        points = np.concatenate([a[None], filler[:40], b[None], filler[40:], c[None]])
        where_b, where_c = 41, 72
        unit = torch.from_numpy(points / np.linalg.norm(points, axis=1, keepdims=True)).float()
        float32 = (unit[:1] @ unit[[where_b, where_c]].T)[0]
        mistakes += int(float32[0] > float32[1])                 # float32 alone would pick b
        for block_size in (None, 32):
            assert first_neighbours(points, "cosine", block_size=block_size)[0][0].item() == where_c
    assert mistakes >= 1, "no constructed case fooled float32; the test needs other seeds"


@pytest.mark.parametrize("distance", DISTANCES)
def test_screening_in_strips_matches_brute_force(distance):
    "Many strips (both halves of the screening, padding), exact ties across strips, against a float64 brute force."
    generator = np.random.default_rng(7)
    points = generator.normal(size=(301, 6)) + 3.0
    points[[70, 130]] = points[5]                                 # three copies in three different strips
    unit = points / np.linalg.norm(points, axis=1, keepdims=True)
    full = 1 - unit @ unit.T if distance == "cosine" else np.sqrt(((points[:, None] - points[None]) ** 2).sum(-1))
    np.fill_diagonal(full, np.inf)
    expected = full.argmin(1)                                     # argmin takes the lowest index among exact ties
    for block_size in (None, 32, 64, 100):
        neighbours = first_neighbours(points.astype(np.float32), distance, block_size=block_size)[0].numpy()
        np.testing.assert_array_equal(neighbours, expected)
    assert expected[5] == 70 and expected[70] == 5 and expected[130] == 5


@pytest.mark.parametrize("distance", DISTANCES)
def test_mass_ties_fall_back_to_whole_rows(distance):
    "Hundreds of copies of one point (more tied candidates than a row keeps): each picks the lowest-index other copy."
    generator = np.random.default_rng(8)
    points = np.concatenate([generator.normal(size=(50, 3)) - 5.0, np.tile([[1.0, 2.0, 3.0]], (400, 1))])
    points = points[generator.permutation(len(points))]
    copies = np.nonzero((points == [1.0, 2.0, 3.0]).all(1))[0]
    for block_size in (None, 64):
        neighbours = first_neighbours(points, distance, block_size=block_size)[0].numpy()
        assert neighbours[copies[0]] == copies[1] and (neighbours[copies[1:]] == copies[0]).all()


def _brute_force(points, distance):
    "First neighbours from the whole float64 distance matrix (argmin: the lowest index among exact ties)."
    points = points.astype(np.float64)
    if distance == "cosine":
        norms = np.linalg.norm(points, axis=1, keepdims=True)
        unit = points / np.where(norms > 0, norms, 1)
        full = 1 - unit @ unit.T
    else: full = ((points[:, None] - points[None]) ** 2).sum(-1)
    np.fill_diagonal(full, np.inf)
    return full.argmin(1)


@pytest.mark.parametrize("distance", DISTANCES)
def test_first_neighbours_match_brute_force_across_sizes(distance):
    "Random gaussian, uniform and ReLU-blob inputs on both sides of the small-input threshold, every block layout."
    generator = np.random.default_rng(11)
    for count, dim in ((2, 1), (5, 3), (150, 64), (181, 128), (300, 7), (700, 200), (1100, 16)):
        for kind in ("gaussian", "uniform", "blobs"):
            if kind == "gaussian": points = generator.normal(size=(count, dim)) + 2.0 * generator.normal(size=(1, dim))
            elif kind == "uniform": points = generator.random((count, dim))
            else:
                centres = generator.normal(size=(max(2, count // 50), dim))
                points = np.maximum(centres[generator.integers(0, len(centres), count)] + 0.5 * generator.normal(size=(count, dim)), 0)
                points[:, 0] += 1.0                              # no zero rows: their cosine ties are a separate rule
            points = points.astype(np.float32)
            expected = _brute_force(points, distance)
            for block_size in (None, 32, 512):
                got = first_neighbours(points, distance, block_size=block_size)[0].numpy()
                np.testing.assert_array_equal(got, expected, err_msg=f"{count}x{dim} {kind} block_size={block_size}")


@pytest.mark.parametrize("distance", DISTANCES)
def test_extreme_magnitudes_keep_their_neighbours(distance):
    "Float32 rows near the ends of the float32 range (squares would overflow or underflow) find the same neighbours."
    generator = np.random.default_rng(12)
    points = (generator.normal(size=(400, 24)) + 3.0).astype(np.float32)
    expected = _brute_force(points, distance)
    for factor in (2.0**-100, 2.0**-60, 2.0**60, 2.0**100, 2.0**124):   # powers of two: every distance scales exactly
        for block_size in (None, 64):
            got = first_neighbours(points * np.float32(factor), distance, block_size=block_size)[0].numpy()
            np.testing.assert_array_equal(got, expected, err_msg=f"factor {factor}, block_size={block_size}")
    # entries up to 2^127.3: finite in float32, but their differences are not (the centring falls back to float64)
    spread = np.clip(generator.normal(size=(400, 24)), -2.5, 2.5)
    huge = (spread * 2.0**126).astype(np.float32)
    with np.errstate(over="ignore"):
        assert np.isfinite(huge).all() and not np.isfinite(huge.max(0) - huge.min(0)).all()
    for block_size in (None, 64):
        got = first_neighbours(huge, distance, block_size=block_size)[0].numpy()
        np.testing.assert_array_equal(got, _brute_force(huge, distance), err_msg=f"block_size={block_size}")


def test_small_input_path_agrees_with_the_screening():
    "Below the small-input threshold one float64 product decides; the strips give the same neighbours, ties included."
    generator = np.random.default_rng(13)
    points = generator.normal(size=(160, 20)).astype(np.float32)
    points[[40, 90, 150]] = points[7]                             # exact ties: the lowest-index copy wins
    for distance in DISTANCES:
        direct = first_neighbours(points, distance)[0]
        assert torch.equal(direct, first_neighbours(points, distance, block_size=32)[0])
        assert direct[7].item() == 40 and direct[40].item() == 7 and direct[150].item() == 7


def test_first_neighbour_clusters_match_scipy():
    generator = np.random.default_rng(9)
    for count in (1, 2, 3, 50, 3000):
        pointers = generator.integers(0, count, size=count)
        kept = generator.random(count) < 0.8
        graph = coo_matrix((np.ones(kept.sum()), (np.arange(count)[kept], pointers[kept])), shape=(count, count))
        expected = canonical_labels(connected_components(graph, connection="weak")[1])
        np.testing.assert_array_equal(first_neighbour_clusters(pointers, kept), expected)
        np.testing.assert_array_equal(first_neighbour_clusters(torch.from_numpy(pointers)),
                                      canonical_labels(connected_components(coo_matrix(
                                          (np.ones(count), (np.arange(count), pointers)), shape=(count, count)),
                                          connection="weak")[1]))


@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_first_neighbours_rejects_bad_block_size(bad):
    with pytest.raises(ValueError, match="block_size"):
        first_neighbours(_blobs(0, count=20), block_size=bad)


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
