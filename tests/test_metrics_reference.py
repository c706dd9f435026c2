"Metrics against independent computations on random inputs (brute force, explicit formulas, plain NumPy)."
from itertools import permutations

import numpy as np
import pytest
import torch

from fedlearn_nb.metrics import (accuracy, ari, clustering_accuracy, kappa, knn_accuracy, nmi, payload_bytes)


def _kappa_by_formula(true: np.ndarray, renamed: np.ndarray) -> float:
    labels = np.union1d(true, renamed)
    p_observed = np.mean(true == renamed)
    p_expected = sum(np.mean(true == c) * np.mean(renamed == c) for c in labels)
    return (p_observed - p_expected) / (1 - p_expected)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("num_classes,num_clusters", [(4, 4), (3, 5), (5, 3)])
def test_hungarian_metrics_match_brute_force(seed, num_classes, num_clusters):
    generator = np.random.default_rng(seed)
    true = generator.integers(0, num_classes, 80)
    pred = np.where(generator.random(80) < 0.6, true % num_clusters, generator.integers(0, num_clusters, 80))
    # every one-to-one map between clusters and classes; unmatched clusters get a label that is no class
    unmatched = -1
    if num_clusters <= num_classes:
        maps = [dict(zip(range(num_clusters), perm)) for perm in permutations(range(num_classes), num_clusters)]
    else:
        maps = [{cluster: c for c, cluster in enumerate(perm)} for perm in permutations(range(num_clusters), num_classes)]
    scored = []
    for mapping in maps:
        renamed = np.array([mapping.get(p, unmatched) for p in pred])
        scored.append((np.mean(renamed == true), _kappa_by_formula(true, renamed)))
    best_acc = max(acc for acc, _ in scored)
    assert clustering_accuracy(true, pred) == pytest.approx(best_acc)
    kappas_of_best_maps = [k for acc, k in scored if acc == best_acc]   # ties: any best map is a valid answer
    assert any(kappa(true, pred) == pytest.approx(k) for k in kappas_of_best_maps)

def test_kappa_matches_formula_for_a_fixed_map():
    generator = np.random.default_rng(7)
    true = generator.integers(0, 4, 200)
    pred = np.where(generator.random(200) < 0.7, (true + 1) % 4, generator.integers(0, 4, 200))  # clusters = classes + 1
    assert clustering_accuracy(true, pred) > 0.7
    assert kappa(true, pred) == pytest.approx(_kappa_by_formula(true, (pred - 1) % 4))


def test_nmi_ari_are_invariant_to_renaming():
    generator = np.random.default_rng(3)
    true, pred = generator.integers(0, 5, 300), generator.integers(0, 5, 300)
    renamed = np.array([4, 0, 3, 1, 2])[pred]
    assert nmi(true, pred) == pytest.approx(nmi(true, renamed))
    assert ari(true, pred) == pytest.approx(ari(true, renamed))
    assert nmi(true, pred) == pytest.approx(nmi(pred, true))     # symmetric


@pytest.mark.parametrize("metric", ["euclidean", "cosine"])
def test_knn_matches_numpy(metric):
    generator = np.random.default_rng(1)
    train_x, test_x = generator.normal(size=(120, 6)), generator.normal(size=(40, 6))
    train_y, test_y = generator.integers(0, 3, 120), generator.integers(0, 3, 40)
    if metric == "cosine":
        a = test_x / np.linalg.norm(test_x, axis=1, keepdims=True)
        b = train_x / np.linalg.norm(train_x, axis=1, keepdims=True)
        distances = 1 - a @ b.T
    else:
        distances = np.linalg.norm(test_x[:, None] - train_x[None], axis=2)
    nearest = np.argsort(distances, axis=1)[:, :7]
    votes = np.stack([np.bincount(train_y[row], minlength=3) for row in nearest])
    expected = np.mean(votes.argmax(1) == test_y)                 # ties -> smallest class, as scikit-learn
    assert knn_accuracy(torch.tensor(train_x), train_y, test_x, torch.tensor(test_y), k=7, metric=metric) == pytest.approx(expected)


def test_payload_of_a_model_equals_its_parameter_bytes():
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Linear(8, 10))
    expected = sum(p.numel() for p in model.parameters()) * 4
    assert payload_bytes(model) == expected
    assert payload_bytes({"model": model, "protos": [torch.zeros(5, 8)]}) == expected + 160
    assert accuracy(torch.eye(3), torch.arange(3)) == 1.0
