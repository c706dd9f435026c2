"Tests of fedlearn_nb.models beyond the chapter's inline ones: every registered network on both input shapes, training, seeding, weight transfer, pretrained-weight policy, real data."
import copy
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
import torch.nn.functional as F

from fedlearn_nb.models import (MODEL_ALIASES, MODEL_BUILDERS, CPCFLNet, ContrastivePretrainNet, FrozenBackboneMLP,
                                available_models, build_model, check_model_contract, count_parameters,
                                trainable_state_keys, _checked_weights)

torch.set_num_threads(1)


def _kwargs_for(name: str, in_channels: int, image_size: int) -> dict:
    "Extra arguments a network needs for a small test input."
    if name in ("cpcfl_cnn", "cpcfl_encoder", "cpcfl_pretrain") and image_size < 31: return {"padding": 1}
    if name == "frozen_backbone_mlp": return {"backbone": "resnet18"}
    return {}


@pytest.mark.parametrize("name", available_models())
@pytest.mark.parametrize("in_channels,image_size", [(1, 28), (3, 32)])
def test_every_model_trains_on_both_input_shapes(name, in_channels, image_size):
    model = build_model(name, 10, in_channels, image_size, seed=0, **_kwargs_for(name, in_channels, image_size))
    feature_shape, output_shape = check_model_contract(model, in_channels, image_size, batch_size=3)
    assert feature_shape == (3, model.feature_dim)
    if not any(p.requires_grad for p in model.parameters()): return   # raw_features: the images themselves, nothing to train
    model.train()
    x = torch.rand(4, in_channels, image_size, image_size)
    features, outputs = model.forward_with_features(x)
    (outputs.square().mean() + features.square().mean()).backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert grads and all(g is not None and torch.isfinite(g).all() for g in grads)


def test_aliases_point_to_registered_builders():
    assert set(MODEL_ALIASES.values()) <= set(MODEL_BUILDERS)
    assert type(build_model("ccfc_encoder", 10, 1, 28)) is type(build_model("ccfc_simsiam", 10, 1, 28))


@pytest.mark.parametrize("name", ["ccfc_simsiam", "resnet10", "fedcrl_cnn"])
def test_same_seed_same_initial_state(name):
    a, b, c = (build_model(name, 10, 3, 32, seed=s) for s in (5, 5, 6))
    assert all(torch.equal(a.state_dict()[k], b.state_dict()[k]) for k in a.state_dict())
    assert not all(torch.equal(a.state_dict()[k], c.state_dict()[k]) for k in a.state_dict())


def test_small_cnn_fits_a_fixed_batch():
    generator = torch.Generator().manual_seed(0)
    x, y = torch.rand(16, 1, 28, 28, generator=generator), torch.randint(0, 10, (16,), generator=generator)
    model = build_model("fedccl_cnn4", 10, 1, 28, seed=0)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    first = F.cross_entropy(model(x), y).item()
    for _ in range(60):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
    assert loss.item() < 0.3 * first


def test_sharing_only_the_features_leaves_the_head_local():
    "FedCRL sends phi (the features) and keeps pi (the head): loading one client's phi must not touch the head."
    sender, receiver = build_model("fedcrl_cnn", 10, 3, 32, seed=1), build_model("fedcrl_cnn", 10, 3, 32, seed=2)
    head_before = copy.deepcopy(receiver.head.state_dict())
    receiver.features.load_state_dict(sender.features.state_dict())
    assert all(torch.equal(v, sender.features.state_dict()[k]) for k, v in receiver.features.state_dict().items())
    assert all(torch.equal(v, head_before[k]) for k, v in receiver.head.state_dict().items())


def test_averaged_state_of_batchnorm_models_loads():
    "FedAvg over whole state dicts (running statistics and integer batch counters included) gives a loadable model."
    models = [build_model("ccfc_simsiam", 10, 1, 28, seed=s) for s in (0, 1)]
    for model in models:
        model.train(); model(torch.rand(8, 1, 28, 28))
    states = [m.state_dict() for m in models]
    average = {k: (states[0][k] + states[1][k]) / 2 if states[0][k].is_floating_point() else states[0][k]
               for k in states[0]}
    target = build_model("ccfc_simsiam", 10, 1, 28)
    target.load_state_dict(average)
    torch.testing.assert_close(target.features.backbone[1].running_mean,
                               (models[0].backbone[1].running_mean + models[1].backbone[1].running_mean) / 2)
    assert target.eval()(torch.rand(2, 1, 28, 28)).shape == (2, 256)


def test_pretraining_trains_the_classifier_encoder():
    "CP-CFL: the pre-training model shares the classifier's encoder module, so a pre-training step moves both."
    classifier = CPCFLNet(10, 3, 32)
    pretrainer = ContrastivePretrainNet(classifier.features, "simsiam", image_size=32)
    before = classifier.features[0].weight.detach().clone()
    optimizer = torch.optim.SGD(pretrainer.parameters(), lr=0.1)
    z = pretrainer(torch.rand(4, 3, 32, 32))
    (-F.cosine_similarity(pretrainer.predictor(z), z.detach()).mean()).backward()
    optimizer.step()
    assert not torch.equal(before, classifier.features[0].weight)


def test_frozen_backbone_survives_deepcopy_and_training_mode():
    model = FrozenBackboneMLP(10, "resnet18", image_size=32)
    clone = copy.deepcopy(model).train()
    assert clone.training and not clone.backbone.training
    assert count_parameters(clone, trainable_only=True) == 512 * 128 + 128 + 128 * 10 + 10
    assert all(not k.startswith("features.backbone") for k in trainable_state_keys(clone))
    custom = FrozenBackboneMLP(10, nn.Sequential(nn.Conv2d(1, 4, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten()),
                               hidden_dims=(8,), in_channels=1, image_size=28)
    assert custom.backbone_dim == 4 and custom.feature_dim == 8
    with pytest.raises(ValueError, match="only applies to a named backbone"):
        FrozenBackboneMLP(10, nn.Flatten(), weights="DEFAULT", image_size=8)


def test_pretrained_weights_are_never_downloaded_without_permission(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    monkeypatch.setenv("FEDLEARN_DOWNLOAD", "false")
    with pytest.raises(RuntimeError, match="downloads are off"):
        build_model("resnet18", 10, 3, 32, weights="DEFAULT")
    with pytest.raises(RuntimeError, match="downloads are off"):
        build_model("frozen_backbone_mlp", 10, 3, 224, backbone="resnet18", weights="IMAGENET1K_V1")
    # with the checkpoint already in the cache, the weights resolve without any download
    from torchvision.models import ResNet18_Weights
    checkpoint = tmp_path / "hub" / "checkpoints" / Path(ResNet18_Weights.DEFAULT.url).name
    checkpoint.parent.mkdir(parents=True)
    checkpoint.write_bytes(b"")
    assert _checked_weights("resnet18", "DEFAULT") is ResNet18_Weights.IMAGENET1K_V1
    with pytest.raises(ValueError, match="unknown weights"):
        _checked_weights("resnet18", "NOT_A_WEIGHT")


def test_bad_arguments_say_what_to_fix():
    with pytest.raises(ValueError, match="num_classes must be a positive integer"):
        build_model("fedccl_cnn4", 0, 1, 28)
    with pytest.raises(ValueError, match="in_channels must be a positive integer"):
        build_model("resnet10", 10, 0, 32)
    with pytest.raises(ValueError, match="too small"):
        build_model("fedcrl_cnn", 10, 3, 12)
    with pytest.raises(ValueError, match="padding=1"):
        build_model("cpcfl_cnn", 10, 1, 28)
    with pytest.raises(ValueError, match="head_depth must be 0, 1, 2 or 3"):
        build_model("cpcfl_cnn", 10, 3, 96, head_depth=4)
    with pytest.raises(TypeError, match="does not take"):
        build_model("resnet10", 10, 3, 32, weights="DEFAULT")
    assert build_model("fedccl_cnn4", np.int64(10), np.int64(1), np.int64(28))(torch.rand(2, 1, 28, 28)).shape == (2, 10)


def test_models_on_the_embedded_digits_data():
    "The models take the embedded offline datasets as the data chapter builds them."
    data = pytest.importorskip("fedlearn_nb.data", reason="the data chapter (fedlearn_nb.data) is not exported yet")
    dataset = data.load_dataset("digits")
    _, channels, height, width = dataset.x.shape
    assert height == width, f"square images expected, got {height}x{width}"
    for name in ("fedccl_cnn4", "fedcrl_cnn", "resnet10"):
        model = build_model(name, dataset.num_classes, channels, height, seed=0).eval()
        with torch.no_grad(): assert model(dataset.x[:4]).shape == (4, dataset.num_classes)
    benchmark = data.load_benchmark("digits5lite")
    x = benchmark.domains[0].train.x[:4]
    model = build_model("resnet10", len(benchmark.classes), x.shape[1], x.shape[-1], seed=0).eval()
    with torch.no_grad(): assert model.features(x).shape == (4, 512)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
def test_models_run_on_cuda():
    for name in ("resnet10", "ccfc_simsiam", "fedcrl_cnn"):
        model = build_model(name, 10, 3, 32).cuda()
        assert model(torch.rand(2, 3, 32, 32, device="cuda")).device.type == "cuda"
