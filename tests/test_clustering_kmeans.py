"""Torch k-means (fedlearn_nb.kmeans.kmeans) against scikit-learn's KMeans.

The tolerance: with the same number of k-means++ restarts, our objective (inertia) is at most 1% above scikit-learn's
best (`RELATIVE_TOLERANCE`); the two draw different seeds, so neither is always lower. From the same starting
centroids, Lloyd's iterations reach the same centroids. On separable data the partitions agree up to the names of the
clusters (adjusted Rand index 1)."""
import numpy as np
import pytest
import torch
from sklearn.cluster import KMeans
from sklearn.datasets import load_digits, make_blobs
from sklearn.metrics import adjusted_rand_score

from fedlearn_nb.kmeans import kmeans, kmeans_inertia, kmeans_plusplus
from fedlearn_nb.core import load_settings
from fedlearn_nb.data import DatasetNotFoundError, load_dataset

RELATIVE_TOLERANCE = 0.01


def _sklearn(points, k, n_init, seed=0, sample_weight=None):
    return KMeans(k, n_init=n_init, random_state=seed).fit(points, sample_weight=sample_weight)


@pytest.mark.parametrize("shape", [(300, 2, 3), (1000, 16, 8), (2000, 64, 10), (500, 300, 4)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_separable_blobs_give_the_true_partition(shape, dtype):
    count, dim, centres = shape
    points, truth = make_blobs(count, dim, centers=centres, cluster_std=0.5, center_box=(-20, 20), random_state=count + dim)
    centroids, labels = kmeans(points.astype(dtype), centres, seed=1, n_init=3)
    assert adjusted_rand_score(truth, labels.numpy()) == 1.0
    assert adjusted_rand_score(_sklearn(points.astype(dtype), centres, 3).labels_, labels.numpy()) == 1.0
    assert centroids.dtype == torch.from_numpy(np.zeros(1, dtype)).dtype and centroids.shape == (centres, dim)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_objective_on_overlapping_blobs_is_within_tolerance_of_sklearn(seed):
    "With CCFC's 10 restarts. (With 1-4 restarts either side may land 5-15% higher on a given seed: the seeds differ.)"
    points, _ = make_blobs(3000, 10, centers=12, cluster_std=3.0, random_state=seed)
    points = points.astype(np.float32)
    ours = kmeans_inertia(points, kmeans(points, 12, seed=seed, n_init=10)[0])
    reference = kmeans_inertia(points, _sklearn(points, 12, 10, seed).cluster_centers_)
    assert ours <= (1 + RELATIVE_TOLERANCE) * reference, (ours, reference)


def test_kmeans_plusplus_seeds_are_as_good_as_sklearns_on_average():
    "Over 40 seeds, the mean potential of the seeds is within 3% of scikit-learn's (single draws scatter by 5-7%)."
    from sklearn.cluster import kmeans_plusplus as sklearn_plusplus
    points, _ = make_blobs(3000, 10, centers=12, cluster_std=3.0, random_state=0)
    ours = np.mean([kmeans_inertia(points, kmeans_plusplus(points, 12, seed=s)) for s in range(40)])
    reference = np.mean([kmeans_inertia(points, sklearn_plusplus(points, 12, random_state=s)[0]) for s in range(40)])
    assert ours <= 1.03 * reference, (ours, reference)


@pytest.mark.parametrize("normalize", [False, True])
def test_objective_on_the_digits_is_within_tolerance_of_sklearn(normalize):
    "Real-ish data: 1,797 8x8 digits (64 features), raw or L2-normalised as the clustering methods use them."
    points = load_digits().data.astype(np.float32)
    if normalize: points /= np.linalg.norm(points, axis=1, keepdims=True)
    for k, n_init in ((10, 10), (30, 3)):
        ours = kmeans_inertia(points, kmeans(points, k, seed=0, n_init=n_init)[0])
        reference = kmeans_inertia(points, _sklearn(points, k, n_init).cluster_centers_)
        assert ours <= (1 + RELATIVE_TOLERANCE) * reference, (k, ours, reference)


def test_objective_on_mnist_is_within_tolerance_of_sklearn():
    "10,000 MNIST test images, L2-normalised pixels (784 features), k = 10, 3 restarts (skipped without the data)."
    try: data = load_dataset("mnist", split="test")
    except DatasetNotFoundError as error:
        pytest.skip(f"MNIST not found under {load_settings().data_root}: {str(error).splitlines()[0]}")
    points = torch.nn.functional.normalize(data.x.flatten(1), dim=1).numpy()
    ours = kmeans_inertia(points, kmeans(points, 10, seed=0, n_init=3)[0])
    reference = kmeans_inertia(points, _sklearn(points, 10, 3).cluster_centers_)
    assert ours <= (1 + RELATIVE_TOLERANCE) * reference, (ours, reference)


@pytest.mark.parametrize("seed", [0, 5])
def test_lloyd_from_the_same_start_reaches_sklearns_centroids(seed):
    generator = np.random.default_rng(seed)
    points = generator.normal(size=(800, 5))
    weights = generator.uniform(0.1, 3.0, size=800)
    start = points[generator.choice(800, 9, replace=False)]
    for sample_weight in (None, weights):
        reference = KMeans(9, init=start, n_init=1).fit(points, sample_weight=sample_weight)
        centroids, labels = kmeans(points, 9, init=start, sample_weight=sample_weight)
        np.testing.assert_allclose(centroids.numpy(), reference.cluster_centers_, atol=1e-9)
        assert (labels.numpy() == reference.labels_).all()


def test_integer_weights_act_as_repeated_points():
    points, _ = make_blobs(400, 4, centers=5, random_state=3)
    counts = np.random.default_rng(0).integers(1, 4, size=400)
    weighted = kmeans_inertia(points, kmeans(points, 5, seed=0, sample_weight=counts)[0], sample_weight=counts)
    repeated_points = np.repeat(points, counts, axis=0)
    repeated = kmeans_inertia(repeated_points, kmeans(repeated_points, 5, seed=0)[0])
    assert weighted == pytest.approx(repeated, rel=RELATIVE_TOLERANCE)
    assert kmeans_inertia(points, [[0.0] * 4], sample_weight=counts) == pytest.approx(float((counts * (points ** 2).sum(1)).sum()))


def test_inertia_is_sklearns():
    points, _ = make_blobs(500, 6, centers=4, random_state=0)
    model = _sklearn(points, 4, 2)
    assert kmeans_inertia(points, model.cluster_centers_) == pytest.approx(-model.score(points), rel=1e-9)


def test_same_seed_same_result_and_seeds_matter():
    points = np.random.default_rng(1).normal(size=(600, 8)).astype(np.float32)
    first, again = kmeans(points, 6, seed=11, n_init=3), kmeans(points, 6, seed=11, n_init=3)
    assert torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])
    generator = torch.Generator().manual_seed(11)
    assert torch.equal(kmeans(points, 6, n_init=3, generator=generator)[0], first[0])
    assert not torch.equal(kmeans_plusplus(points, 6, seed=11), kmeans_plusplus(points, 6, seed=12))


def test_empty_clusters_are_refilled():
    "Two starting centroids far from every point: their clusters are empty and move to the farthest points."
    points = np.concatenate([np.zeros((5, 2)), np.full((5, 2), 10.0), np.full((5, 2), -10.0)])
    start = np.array([[0.0, 0.0], [100.0, 100.0], [200.0, 200.0]])
    centroids, labels = kmeans(points, 3, init=start)
    assert sorted(map(tuple, centroids.tolist())) == [(-10.0, -10.0), (0.0, 0.0), (10.0, 10.0)]
    assert len(set(labels.tolist())) == 3


def test_a_tensor_stays_a_tensor_where_it_is():
    points = torch.randn(200, 3, dtype=torch.float64)
    centroids, labels = kmeans(points, 4, n_init=2)
    assert centroids.device == points.device and centroids.dtype == torch.float64 and labels.shape == (200,)


@pytest.mark.parametrize("call, message", [
    (lambda p: kmeans(p, 11), "cannot form num_clusters=11 clusters; lower num_clusters to at most 10"),
    (lambda p: kmeans(p, 0), "num_clusters must be a positive integer"),
    (lambda p: kmeans(p, 2.5), "num_clusters must be a positive integer"),
    (lambda p: kmeans(p, 2, n_init=0), "n_init must be a positive integer"),
    (lambda p: kmeans(p, 2, max_iter=0), "max_iter must be a positive integer"),
    (lambda p: kmeans(p, 2, tol=-1.0), "tol must be a number >= 0"),
    (lambda p: kmeans(p[:, 0], 2), "2-D"),
    (lambda p: kmeans(p[None], 2), "2-D"),
    (lambda p: kmeans(p[:0], 2), "no points"),
    (lambda p: kmeans(p[:, :0], 2), "no features"),
    (lambda p: kmeans(np.where(np.eye(10, 3) > 0, np.inf, p), 2), "NaN or infinite"),
    (lambda p: kmeans(p, 2, init=np.zeros((2, 4))), "init must be (2, 3)"),
    (lambda p: kmeans(p, 2, sample_weight=np.ones(9)), "one weight per point"),
    (lambda p: kmeans(p, 2, sample_weight=-np.ones(10)), ">= 0, with a positive sum"),
    (lambda p: kmeans(p, 2, sample_weight=np.zeros(10)), ">= 0, with a positive sum"),
    (lambda p: kmeans_plusplus(p, 12), "lower num_clusters to at most 10"),
    (lambda p: kmeans_inertia(p, np.zeros((2, 4))), "centroids must be (k, 3)"),
])
def test_bad_input_is_refused_with_the_fix(call, message):
    points = np.random.default_rng(0).normal(size=(10, 3))
    with pytest.raises(ValueError) as error: call(points)
    assert message in str(error.value), str(error.value)
