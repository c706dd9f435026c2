"Randomised parity of fedlearn_nb.losses against plain-Python loop references, edge cases, dtypes and devices."
import math
from fractions import Fraction

import pytest
import torch
import torch.nn.functional as F

from fedlearn_nb.losses import (alpha_sparsity, average_per_class, fedplcc_top_phi_pull, fedplcc_weighted_contrast,
                                fedplvm_alpha_sparsity_contrast, fedplvm_alpha_sparsity_loss, fedplvm_correction,
                                fedproc_prototype_contrast, infonce_from_scores, multi_positive_infonce,
                                normalize_weights_per_class, prototype_l2_pull, unbiased_prototype_mse)

torch.set_num_threads(1)


# ---- loop references, straight from the equations (double precision Python floats) ----
def cosine(u, v):
    nu, nv = math.sqrt(sum(a * a for a in u)), math.sqrt(sum(b * b for b in v))
    return 0.0 if nu == 0 or nv == 0 else sum(a * b for a, b in zip(u, v)) / (nu * nv)


def loop_contrast(features, labels, bank, bank_labels, tau, weights=None, alpha=None):
    weights = [1.0] * len(bank) if weights is None else weights.tolist()
    similarity = cosine if alpha is None else (lambda u, v: max(cosine(u, v), 0.0) ** alpha)
    losses = []
    for z, y in zip(features.tolist(), labels.tolist()):
        numerator = denominator = 0.0
        for g, c, w in zip(bank.tolist(), bank_labels.tolist(), weights):
            term = w * math.exp(similarity(z, g) / tau)
            denominator += term
            numerator += term if c == y else 0.0
        if numerator > 0: losses.append(-math.log(numerator / denominator))
    return sum(losses) / len(losses) if losses else 0.0


def loop_top_phi(features, labels, bank, bank_labels, weights, alpha, phi):
    losses = []
    for z, y in zip(features.tolist(), labels.tolist()):
        values = sorted((max(cosine(z, g), 0.0) ** alpha * w for g, c, w in
                         zip(bank.tolist(), bank_labels.tolist(), weights.tolist()) if c == y and w > 0), reverse=True)
        if values: losses.append(-sum(values[:math.ceil(Fraction(str(phi)) * len(values))]))
    return sum(losses) / len(losses) if losses else 0.0


def loop_class_means(bank, bank_labels):
    means = {}
    for c in sorted(set(bank_labels.tolist())):
        rows = [g for g, k in zip(bank.tolist(), bank_labels.tolist()) if k == c]
        means[c] = [sum(column) / len(rows) for column in zip(*rows)]
    return means


def loop_mse(features, labels, means, per_dimension=True):
    losses = [sum((a - b) ** 2 for a, b in zip(z, means[y])) / (len(z) if per_dimension else 1)
              for z, y in zip(features.tolist(), labels.tolist()) if y in means]
    return sum(losses) / len(losses) if losses else 0.0


def loop_correction(features, labels, means, factor=2.0):
    losses = [factor * (cosine(z, means[y]) - 1) ** 2 for z, y in zip(features.tolist(), labels.tolist()) if y in means]
    return sum(losses) / len(losses) if losses else 0.0


def random_case(seed):
    "A random batch and bank: several vectors per class, some classes absent, some zero weights, mixed signs."
    g = torch.Generator().manual_seed(seed)
    num_classes = int(torch.randint(2, 7, (1,), generator=g))
    batch, width, bank_size = int(torch.randint(1, 20, (1,), generator=g)), int(torch.randint(2, 12, (1,), generator=g)), int(torch.randint(1, 25, (1,), generator=g))
    features = torch.randn(batch, width, generator=g, dtype=torch.float64)
    if seed % 2: features = features.relu() + 0.05  # post-ReLU features, as from a ResNet
    labels = torch.randint(0, num_classes + 1, (batch,), generator=g)  # class num_classes never has a vector
    bank = torch.randn(bank_size, width, generator=g, dtype=torch.float64)
    bank_labels = torch.randint(0, num_classes, (bank_size,), generator=g)
    weights = torch.rand(bank_size, generator=g, dtype=torch.float64)
    weights[torch.rand(bank_size, generator=g) < 0.2] = 0.0
    return features, labels, bank, bank_labels, weights


SEEDS = range(30)


@pytest.mark.parametrize("seed", SEEDS)
def test_contrasts_match_loops(seed):
    features, labels, bank, bank_labels, weights = random_case(seed)
    tau = (0.07, 0.1, 0.5, 1.0)[seed % 4]
    alpha = (0.25, 0.5, 1.0)[seed % 3]
    assert multi_positive_infonce(features, labels, bank, bank_labels, tau).item() == pytest.approx(
        loop_contrast(features, labels, bank, bank_labels, tau), abs=1e-9)
    assert fedplvm_alpha_sparsity_contrast(features, labels, bank, bank_labels, alpha, tau).item() == pytest.approx(
        loop_contrast(features, labels, bank, bank_labels, tau, alpha=alpha), abs=1e-9)
    assert fedplcc_weighted_contrast(features, labels, bank, bank_labels, weights, alpha, tau).item() == pytest.approx(
        loop_contrast(features, labels, bank, bank_labels, tau, weights=weights, alpha=alpha), abs=1e-9)
    assert fedproc_prototype_contrast(features, labels, bank, bank_labels).item() == pytest.approx(
        loop_contrast(features, labels, bank, bank_labels, 1.0), abs=1e-9)


@pytest.mark.parametrize("seed", SEEDS)
def test_pulls_match_loops(seed):
    features, labels, bank, bank_labels, weights = random_case(seed)
    alpha, phi = (0.25, 0.5, 1.0)[seed % 3], (0.3, 0.5, 0.7, 1.0)[seed % 4]
    assert fedplcc_top_phi_pull(features, labels, bank, bank_labels, weights, alpha, phi).item() == pytest.approx(
        loop_top_phi(features, labels, bank, bank_labels, weights, alpha, phi), abs=1e-9)
    means = loop_class_means(bank, bank_labels)
    assert unbiased_prototype_mse(features, labels, bank, bank_labels).item() == pytest.approx(
        loop_mse(features, labels, means), abs=1e-9)
    assert fedplvm_correction(features, labels, bank, bank_labels).item() == pytest.approx(
        loop_correction(features, labels, means), abs=1e-9)
    mean_bank, mean_labels = average_per_class(bank, bank_labels)
    assert prototype_l2_pull(features, labels, mean_bank, mean_labels, distance="squared_l2").item() == pytest.approx(
        loop_mse(features, labels, means, per_dimension=False), abs=1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_gradients_reach_features_only_and_match_finite_differences(seed):
    features, labels, bank, bank_labels, weights = random_case(2 * seed + 1)  # post-ReLU: smooth almost everywhere
    weights = weights + 0.1
    losses = [lambda z: multi_positive_infonce(z, labels, bank, bank_labels, 0.5),
              lambda z: fedplvm_alpha_sparsity_loss(z, labels, bank, bank_labels, 0.5, 0.5),
              lambda z: fedplcc_weighted_contrast(z, labels, bank, bank_labels, weights, 0.5, 0.5),
              lambda z: fedplcc_top_phi_pull(z, labels, bank, bank_labels, weights, 0.5, 1.0),
              lambda z: unbiased_prototype_mse(z, labels, bank, bank_labels)]
    for loss_fn in losses:
        assert torch.autograd.gradcheck(loss_fn, (features.clone().requires_grad_(),))
    trained, signals = features.clone().requires_grad_(), bank.clone().requires_grad_()
    (fedplcc_weighted_contrast(trained, labels, signals, bank_labels, weights)
     + fedplcc_top_phi_pull(trained, labels, signals, bank_labels, weights)
     + fedplvm_alpha_sparsity_loss(trained, labels, signals, bank_labels)).backward()
    assert signals.grad is None and torch.isfinite(trained.grad).all()


def test_empty_batch_and_empty_bank():
    features, labels = torch.zeros(0, 4), torch.zeros(0, dtype=torch.long)
    bank, bank_labels, weights = torch.randn(3, 4), torch.tensor([0, 1, 1]), torch.ones(3)
    for loss in (multi_positive_infonce(features, labels, bank, bank_labels),
                 fedplcc_weighted_contrast(features, labels, bank, bank_labels, weights),
                 fedplcc_top_phi_pull(features, labels, bank, bank_labels, weights),
                 fedplvm_alpha_sparsity_loss(features, labels, bank, bank_labels),
                 prototype_l2_pull(features, labels, bank[:2], bank_labels[:2])):
        assert loss.item() == 0.0
    assert multi_positive_infonce(features, labels, bank, bank_labels, reduction="none").shape == (0,)
    features, labels = torch.randn(5, 4, requires_grad=True), torch.tensor([0, 1, 2, 0, 1])
    empty, empty_labels = torch.zeros(0, 4), torch.zeros(0, dtype=torch.long)
    total = (multi_positive_infonce(features, labels, empty, empty_labels)
             + fedplcc_top_phi_pull(features, labels, empty, empty_labels, torch.zeros(0))
             + fedplvm_alpha_sparsity_loss(features, labels, empty, empty_labels)
             + unbiased_prototype_mse(features, labels, empty, empty_labels))
    total.backward()  # round 1: nothing in the bank yet, the terms are zero and harmless
    assert total.item() == 0.0 and torch.equal(features.grad, torch.zeros(5, 4))


def test_all_zero_weights_means_no_term():
    features, labels = torch.randn(4, 3), torch.tensor([0, 0, 1, 1])
    bank, bank_labels = torch.randn(4, 3), torch.tensor([0, 0, 1, 1])
    weights = torch.tensor([0.0, 0.0, 1.0, 2.0])  # class 0 has vectors, all of weight 0: absent
    per_sample = fedplcc_weighted_contrast(features, labels, bank, bank_labels, weights, reduction="none")
    assert torch.equal(per_sample[:2], torch.zeros(2)) and (per_sample[2:] == 0).all()  # class 1 is alone: log 1 = 0
    pulls = fedplcc_top_phi_pull(features, labels, bank, bank_labels, weights, reduction="none")
    assert torch.equal(pulls[:2], torch.zeros(2))
    assert torch.allclose(normalize_weights_per_class(weights, bank_labels), torch.tensor([0.0, 0.0, 1 / 3, 2 / 3]))


def test_alpha_sparsity_is_safe_at_and_below_zero():
    cosine_values = torch.tensor([-1.0, -1e-9, 0.0, 1e-7, 1e-3, 1.0], dtype=torch.float64, requires_grad=True)
    values = alpha_sparsity(cosine_values, 0.25)
    values.sum().backward()
    assert torch.isfinite(cosine_values.grad).all()
    assert values[:4].tolist() == [0.0, 0.0, 0.0, 0.0]  # at or below eps = 1e-6: clamped
    assert values[4].item() == pytest.approx(1e-3 ** 0.25) and values[5].item() == 1.0


def test_small_temperature_does_not_overflow_in_float32():
    g = torch.Generator().manual_seed(3)
    features, bank = torch.randn(32, 16, generator=g), torch.randn(20, 16, generator=g)
    labels, bank_labels = torch.randint(0, 5, (32,), generator=g), torch.randint(0, 5, (20,), generator=g)
    for tau in (1e-2, 1e-3):
        loss = multi_positive_infonce(features, labels, bank, bank_labels, tau)
        reference = multi_positive_infonce(features.double(), labels, bank.double(), bank_labels, tau)
        assert torch.isfinite(loss) and loss.item() == pytest.approx(reference.item(), rel=1e-4)


def test_infonce_from_scores_equals_cross_entropy_with_one_vector_per_class():
    g = torch.Generator().manual_seed(4)
    scores, labels = torch.randn(10, 6, generator=g, dtype=torch.float64), torch.randint(0, 6, (10,), generator=g)
    assert infonce_from_scores(scores, labels, torch.arange(6), 0.3).item() == pytest.approx(
        F.cross_entropy(scores / 0.3, labels).item(), abs=1e-12)
    with pytest.raises(ValueError, match="need \\(B, K\\) scores"):
        infonce_from_scores(scores, labels[:3], torch.arange(6), 0.3)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_features_give_close_finite_losses(dtype):
    g = torch.Generator().manual_seed(5)
    features, bank = torch.randn(16, 32, generator=g).relu(), torch.randn(12, 32, generator=g).relu() + 0.01
    labels, bank_labels = torch.randint(0, 4, (16,), generator=g), torch.arange(12) % 4
    weights = normalize_weights_per_class(torch.rand(12, generator=g) + 0.1, bank_labels)
    for loss_fn in (lambda z: multi_positive_infonce(z, labels, bank, bank_labels, 0.1),
                    lambda z: fedplcc_weighted_contrast(z, labels, bank, bank_labels, weights, 0.5, 0.1),
                    lambda z: fedplcc_top_phi_pull(z, labels, bank, bank_labels, weights)):
        low, full = loss_fn(features.to(dtype)), loss_fn(features)
        assert low.dtype == dtype and torch.isfinite(low)
        assert low.float().item() == pytest.approx(full.item(), rel=0.05, abs=0.02)


def test_same_inputs_same_result():
    features, labels, bank, bank_labels, weights = random_case(7)
    first = fedplcc_top_phi_pull(features, labels, bank, bank_labels, weights, reduction="none")
    assert torch.equal(first, fedplcc_top_phi_pull(features, labels, bank, bank_labels, weights, reduction="none"))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here; the losses' device path is checked on a GPU machine")
def test_cuda_matches_cpu():
    features, labels, bank, bank_labels, weights = random_case(11)
    for loss_fn in (lambda z: multi_positive_infonce(z, labels, bank, bank_labels),
                    lambda z: fedplvm_alpha_sparsity_loss(z, labels, bank, bank_labels),
                    lambda z: fedplcc_weighted_contrast(z, labels, bank, bank_labels, weights),
                    lambda z: fedplcc_top_phi_pull(z, labels, bank, bank_labels, weights),
                    lambda z: unbiased_prototype_mse(z, labels, bank, bank_labels)):
        on_gpu = loss_fn(features.cuda())
        assert on_gpu.device.type == "cuda"
        assert on_gpu.item() == pytest.approx(loss_fn(features).item(), abs=1e-9)
