"""A pre-trained backbone from a weights file the user names: strict loading, freezing, input checks, no download.

Every weights file here is written by the test itself (randomly initialised models), so nothing touches the network."""
import copy
import importlib.util
import pickle
import sys
import warnings

import pytest
import torch
import torchvision
from torch import nn

from fedlearn_nb.algorithms.fedpcl import fedpcl_model
from fedlearn_nb.models import (BACKBONES, WEIGHTS_DIR_VARIABLE, FrozenBackboneMLP, backbone_architecture, build_model,
                                feature_dim_of, find_backbone_weights, pretrained_backbone, resolve_weights_path,
                                trainable_state_keys)

torch.set_num_threads(1)


def saved_model(path, model):
    "Give `model` non-default weights (so a load is visible), save its state_dict to `path`, return the saved tensors."
    with torch.no_grad():
        for parameter in model.parameters(): parameter.add_(0.01 * torch.randn_like(parameter))
    torch.save(model.state_dict(), path)
    return torch.load(path, weights_only=True)


# One xdist group: under `pytest -n 2 --dist loadgroup` this module's tests share a worker, so its module fixtures run once.
pytestmark = pytest.mark.xdist_group("pretrained")


@pytest.fixture(scope="module")
def resnet18_file(tmp_path_factory):
    "A full torchvision ResNet-18 (fc included), as `torch.save(resnet18(weights=...).state_dict(), path)` writes it."
    path = tmp_path_factory.mktemp("weights") / "resnet18.pt"
    torch.manual_seed(0)
    return path, saved_model(path, torchvision.models.resnet18())


def test_weights_come_from_the_file_and_are_frozen(resnet18_file):
    path, saved = resnet18_file
    backbone = pretrained_backbone("resnet18", path, image_size=32)
    state = backbone.state_dict()
    assert set(state) == {k for k in saved if not k.startswith("fc.")}       # only the ImageNet classifier is dropped
    assert all(torch.equal(state[k], saved[k]) for k in state)
    assert not any(p.requires_grad for p in backbone.parameters()) and not backbone.training
    assert backbone(torch.rand(2, 3, 32, 32)).shape == (2, 512)
    tuned = pretrained_backbone("resnet18", str(path), image_size=32, trainable=True)
    assert all(p.requires_grad for p in tuned.parameters()) and torch.equal(tuned.conv1.weight, saved["conv1.weight"])


def test_frozen_backbone_mlp_and_the_registry_use_the_file(resnet18_file):
    path, saved = resnet18_file
    model = build_model("frozen_backbone_mlp", 10, 3, 32, seed=0, backbone="resnet18", backbone_weights=str(path))
    assert isinstance(model, FrozenBackboneMLP) and model.backbone_dim == 512
    assert torch.equal(model.backbone.layer4[1].conv2.weight, saved["layer4.1.conv2.weight"])
    assert not any(k.startswith("features.backbone") for k in trainable_state_keys(model))
    before = model.backbone.bn1.running_mean.clone()
    model.train()(torch.rand(4, 3, 32, 32))
    assert torch.equal(model.backbone.bn1.running_mean, before)             # frozen: eval mode, statistics never move
    tuned = FrozenBackboneMLP(10, "resnet18", image_size=32, backbone_weights=path, freeze_backbone=False).train()
    assert tuned.backbone.training and any(k.startswith("features.backbone") for k in trainable_state_keys(tuned))


def test_a_file_of_another_architecture_is_refused_with_the_keys_and_the_recipe(resnet18_file, tmp_path):
    path, _ = resnet18_file
    with pytest.raises(ValueError, match=r"does not fit the backbone 'resnet50'.*missing keys \['layer1.0.bn3") as error:
        pretrained_backbone("resnet50", path, image_size=32)
    assert "torch.save(torchvision.models.resnet50(weights='DEFAULT').state_dict(), path)" in str(error.value)
    with pytest.raises(ValueError, match=r"wrong shapes .*conv1.weight', \(64, 3, 7, 7\), \(64, 1, 7, 7\)"):
        pretrained_backbone("resnet18", path, in_channels=1, image_size=32)  # 3-channel weights, a 1-channel stem
    extra = tmp_path / "extra.pt"
    torch.save({**torch.load(path, weights_only=True), "projector.weight": torch.zeros(2)}, extra)
    with pytest.raises(ValueError, match=r"1 unexpected keys \['projector.weight'\]"):
        pretrained_backbone("resnet18", extra, image_size=32)
    not_a_state_dict = tmp_path / "list.pt"
    torch.save([torch.zeros(1)], not_a_state_dict)
    with pytest.raises(ValueError, match="does not hold a state_dict"):
        pretrained_backbone("resnet18", not_a_state_dict, image_size=32)
    with pytest.raises(FileNotFoundError, match="does not exist.*torchvision.models.resnet18"):
        pretrained_backbone("resnet18", tmp_path / "missing.pt", image_size=32)


def test_a_wrong_input_is_refused_clearly():
    resnet = pretrained_backbone("resnet18", image_size=32)
    with pytest.raises(ValueError, match=r"takes images of shape \(B, 3, H, W\), got \(2, 1, 32, 32\).*x.expand"):
        resnet(torch.rand(2, 1, 32, 32))
    assert resnet(torch.rand(1, 3, 64, 64)).shape == (1, 512)                 # a CNN takes any side
    vit = pretrained_backbone("vit_tiny", image_size=32)
    with pytest.raises(ValueError, match="takes 32x32 images"):
        vit(torch.rand(1, 3, 48, 48))
    with pytest.raises(ValueError, match="divisible by patch_size"):
        pretrained_backbone("vit_tiny", image_size=28)
    with pytest.raises(ValueError, match="takes 3 channels"):
        pretrained_backbone("vit_tiny", in_channels=1, image_size=32)
    with pytest.raises(ValueError, match="in_channels"):
        pretrained_backbone("resnet18", in_channels=0)
    with pytest.raises(ValueError, match="unknown backbone 'vgg11'"):
        pretrained_backbone("vgg11")
    with pytest.raises(ValueError, match="not both"):
        pretrained_backbone("resnet18", "some.pt", weights="DEFAULT")


def test_a_model_with_a_checked_backbone_copies_and_pickles(resnet18_file):
    path, _ = resnet18_file
    model = FrozenBackboneMLP(10, "resnet18", image_size=32, backbone_weights=path)
    x = torch.rand(2, 3, 32, 32)
    model.eval()
    for clone in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        assert torch.equal(clone.eval()(x), model(x))
        with pytest.raises(ValueError, match="takes images of shape"):
            clone(torch.rand(2, 1, 32, 32))


def test_torchvision_backbones_have_the_widths_listed():
    for name in ("resnet18", "vit_tiny"):                                  # vit_b_16: the models chapter
        assert feature_dim_of(backbone_architecture(name, 3, 32), 3, 32) == BACKBONES[name], name


def test_a_weights_folder_from_the_environment(resnet18_file, tmp_path, monkeypatch):
    path, saved = resnet18_file
    monkeypatch.delenv(WEIGHTS_DIR_VARIABLE, raising=False)
    assert find_backbone_weights("resnet18") is None
    with pytest.raises(FileNotFoundError, match=f"{WEIGHTS_DIR_VARIABLE} is not set"):
        resolve_weights_path("resnet18.pt")
    monkeypatch.setenv(WEIGHTS_DIR_VARIABLE, str(path.parent))
    monkeypatch.chdir(tmp_path)
    assert resolve_weights_path("resnet18.pt") == path                      # a relative name found in the folder
    assert find_backbone_weights("resnet18") == path and find_backbone_weights("resnet50") is None
    backbone = pretrained_backbone("resnet18", "resnet18.pt", image_size=32)
    assert torch.equal(backbone.conv1.weight, saved["conv1.weight"])


def test_fedpcl_takes_its_backbone_from_a_file(resnet18_file, tmp_path, monkeypatch):
    path, saved = resnet18_file
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))                         # an empty torch cache
    monkeypatch.setenv("FEDLEARN_DOWNLOAD", "false")
    monkeypatch.delenv(WEIGHTS_DIR_VARIABLE, raising=False)
    with pytest.warns(UserWarning, match="randomly initialised frozen backbone"):
        random_model = fedpcl_model(10, 3, 32, seed=0)
    assert not torch.equal(random_model.backbone.conv1.weight, saved["conv1.weight"])
    with pytest.raises(RuntimeError, match="FEDLEARN_WEIGHTS_DIR"):
        fedpcl_model(10, 3, 32, pretrained=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                                      # weights found: no warning
        named = fedpcl_model(10, 3, 32, backbone_weights=path, seed=0)
        monkeypatch.setenv(WEIGHTS_DIR_VARIABLE, str(path.parent))
        found = fedpcl_model(10, 3, 32, pretrained=True, seed=0)            # resnet18.pt in the weights folder
    for model in (named, found):
        assert torch.equal(model.backbone.conv1.weight, saved["conv1.weight"])
        assert [n for n, p in model.named_parameters() if p.requires_grad] == [
            "features.hidden.0.weight", "features.hidden.0.bias", "head.weight", "head.bias"]
    assert torch.equal(named.head.weight, found.head.weight)                # same seed, same head
    assert not torch.equal(fedpcl_model(10, 3, 32, pretrained=False, seed=0).backbone.conv1.weight, saved["conv1.weight"])


@pytest.mark.skipif(importlib.util.find_spec("safetensors") is None, reason="safetensors is not installed (pip install safetensors)")
def test_a_safetensors_file(resnet18_file, tmp_path):
    from safetensors.torch import save_file
    _, saved = resnet18_file
    path = tmp_path / "resnet18.safetensors"
    save_file({k: v.contiguous() for k, v in saved.items()}, str(path))
    backbone = pretrained_backbone("resnet18", path, image_size=32)
    assert torch.equal(backbone.layer1[0].conv1.weight, saved["layer1.0.conv1.weight"])


def test_timm_backbone_from_a_file(tmp_path):
    timm = pytest.importorskip("timm", reason="timm is not installed (pip install 'fedlearn_nb[pretrained]')")
    torch.manual_seed(0)
    full = timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=32)   # with its classifier head
    path = tmp_path / "vit_tiny_patch16_224.pt"
    saved = saved_model(path, full)
    model = FrozenBackboneMLP(10, "timm:vit_tiny_patch16_224", image_size=32, backbone_weights=path)
    assert model.backbone_dim == 192
    state = model.backbone.state_dict()
    assert set(state) == {k for k in saved if not k.startswith("head.")}
    assert all(torch.equal(state[k], saved[k]) for k in state)
    assert not any(p.requires_grad for p in model.backbone.parameters())
    assert model(torch.rand(2, 3, 32, 32)).shape == (2, 10)
    with pytest.raises(ValueError, match="takes 32x32 images"):
        model(torch.rand(2, 3, 64, 64))
    with pytest.raises(ValueError, match=r"wrong shapes .*pos_embed"):              # weights saved at another size
        pretrained_backbone("timm:vit_tiny_patch16_224", path, image_size=64)
    with pytest.raises(ValueError, match=r"timm.create_model\('vit_small_patch16_224', pretrained=True\)"):
        pretrained_backbone("timm:vit_small_patch16_224", path, image_size=32)
    with pytest.raises(ValueError, match="timm has no model 'vit_tiny_patch16_22'.*did you mean"):
        pretrained_backbone("timm:vit_tiny_patch16_22")
    with pytest.raises(ValueError, match="use 'timm:vit_tiny_patch16_224'"):
        pretrained_backbone("vit_tiny_patch16_224")


def test_timm_missing_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "timm", None)                          # as if timm were not installed
    with pytest.raises(ImportError, match=r"pip install 'fedlearn_nb\[pretrained\]'"):
        pretrained_backbone("timm:vit_tiny_patch16_224")
    with pytest.raises(ValueError, match="unknown backbone"):
        pretrained_backbone("vit_tiny_patch16_224")
