"SDA-FC (SDA-FC-KM, SDA-FC-FCM): registration, the paper-sized networks, checkpoint/resume, the federated-GAN option."
import numpy as np
import pytest
import torch

from fedlearn_nb.core import torch_generator
from fedlearn_nb.data import load_dataset
from fedlearn_nb.engine import LocalTraining, get_algorithm
from fedlearn_nb.history import History
from fedlearn_nb.loop import run_experiment
from fedlearn_nb.models import RawFeatures
from fedlearn_nb.federation import build_federation
from fedlearn_nb.algorithms.sdafc import SDAFC, SDAFCFCM, SDAFCKM, build_gan, latent_codes, synthesize, train_gan
from fedlearn_nb.losses import discriminator_loss, generator_loss

torch.set_num_threads(1)
SMALL = dict(gan_width=8, gan_hidden_dim=32, noise_dim=16, lr_generator=2e-3, lr_discriminator=1e-3, synthetic_per_client=30, kmeans_n_init=2)
SHORT = LocalTraining(steps=5, batch_size=32)


# One xdist group: under `pytest -n 2 --dist loadgroup` this module's tests share a worker, so its module fixtures run once.
pytestmark = pytest.mark.xdist_group("sdafc")


@pytest.fixture(scope="module")
def digits():
    "The embedded digits (train and test) at 16x16 over 10 clients at p = 0.5."
    return build_federation(load_dataset("digits", split="all", image_size=16), "pmix", p=0.5, seed=0)


def test_registered_by_name():
    assert get_algorithm("sdafc_km") is SDAFCKM and get_algorithm("SDAFC_FCM") is SDAFCFCM
    assert SDAFCKM().clustering == "km" and SDAFCFCM().clustering == "fcm" and SDAFC(clustering="fcm").m == 1.1


@pytest.mark.parametrize("shape", [(1, 28, 28), (3, 32, 32)])
def test_the_papers_networks_train_on_mnist_and_cifar_shapes(shape):
    "The authors' sizes (width 64, FC 1024) on the two image shapes: two steps move both networks, losses start near 2 log 2 and log 2."
    gan = build_gan(shape, seed=0)
    before = {k: v.clone() for k, v in gan.state_dict().items()}
    losses = train_gan(gan, torch.rand(16, *shape), LocalTraining(steps=2, batch_size=8), torch_generator(0))
    assert abs(losses["discriminator_loss"] - 2 * np.log(2)) < 0.5 and abs(losses["generator_loss"] - np.log(2)) < 0.5, losses
    for part in ("generator.fc.0.weight", "discriminator.conv.0.weight"):
        assert not torch.equal(before[part], gan.state_dict()[part])
    images = synthesize(gan, 7, torch_generator(1), batch_size=3)
    assert images.shape == (7, *shape) and 0 <= images.min() and images.max() <= 1


def test_losses_are_binary_cross_entropies():
    real, fake = torch.tensor([2.0, -1.0]), torch.tensor([0.5, -3.0])
    expected = -(torch.log(torch.sigmoid(real)).mean() + torch.log(1 - torch.sigmoid(fake)).mean())
    assert torch.isclose(discriminator_loss(real, fake), expected)
    assert torch.isclose(generator_loss(fake), -torch.log(torch.sigmoid(fake)).mean())
    assert latent_codes(10, 2, 5, torch_generator(0))[:, :5].argmax(1).tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]


@pytest.mark.parametrize("method", [SDAFCKM, SDAFCFCM])
def test_one_shot_upload_and_labels_for_every_client(digits, method):
    history = run_experiment(method(**SMALL), digits, RawFeatures.for_data(digits), rounds=2, training=SHORT, progress=False)
    assert [r["bytes_up"] for r in history] == [10 * 30 * 256 * 4, 0]
    assert [r["num_participants"] for r in history] == [10, 0]
    assert 0 <= history[-1]["nmi"] <= 1 and len(history.clients_frame().query("round == 2")) == 10
    for client in digits: client.state.clear()


def test_an_interrupted_run_resumes_to_the_same_history(digits, tmp_path):
    "The federated-GAN option checkpoints its global GAN: a crash after round 2 of 3 resumes to the uninterrupted history."
    def run(folder, callbacks=()):
        return run_experiment(SDAFCKM(**SMALL, gan="federated"), digits, RawFeatures.for_data(digits), rounds=3, training=SHORT,
                              run_dir=folder, progress=False, callbacks=callbacks)
    full = run(tmp_path / "full")
    assert [r["bytes_down"] for r in full][1] > 0 and [r["num_participants"] for r in full] == [10, 10, 10]
    def crash(round, record):
        if round == 2: raise RuntimeError("simulated crash")
    with pytest.raises(RuntimeError, match="simulated crash"): run(tmp_path / "crashed", callbacks=[crash])
    assert len(History.load(tmp_path / "crashed")) == 2
    assert run(tmp_path / "crashed").same_as(full)
    for client in digits: client.state.clear()


def test_bad_settings_name_the_parameter():
    with pytest.raises(ValueError, match="lr_generator"): SDAFCKM(lr_generator=0)
    with pytest.raises(ValueError, match="clustering must be one of"): SDAFC(clustering="dbscan")
    with pytest.raises(ValueError, match="divisible by 4"): build_gan((1, 18, 18), seed=0)
