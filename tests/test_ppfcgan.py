"PPFC-GAN: registration, the DCN on a known mixture, the encoder the clients receive, bad settings."
import pytest
import torch

from fedlearn_nb.core import seed_everything, torch_generator
from fedlearn_nb.data import load_dataset
from fedlearn_nb.engine import LocalTraining, get_algorithm, set_parameters
from fedlearn_nb.loop import run_experiment
from fedlearn_nb.federation import build_federation
from fedlearn_nb.clustering import assign_to_centroids, clustering_scores
from fedlearn_nb.algorithms.ppfcgan import PPFCGAN, dcn_encoder, mlp_decoder, train_dcn, update_centroids

torch.set_num_threads(1)


def test_registered_by_name():
    assert get_algorithm("ppfcgan") is PPFCGAN
    algorithm = PPFCGAN()
    assert (algorithm.normalize, algorithm.distance, algorithm.gan) == (False, "euclidean", "local")


def test_dcn_separates_two_gaussian_clusters_of_images():
    "Two clusters of 4x4 images around opposite grey levels: the DCN's centroids label every image by its cluster."
    generator = torch_generator(0)
    truth = torch.arange(2).repeat_interleave(80)
    images = (0.2 + 0.6 * truth.float()[:, None, None, None] + 0.05 * torch.randn(160, 1, 4, 4, generator=generator)).clamp(0, 1)
    seed_everything(0)
    encoder, decoder = dcn_encoder(16, (16,), 2), mlp_decoder(2, (1, 4, 4), (16,))
    centroids, losses = train_dcn(encoder, decoder, images, 2, torch_generator(1), pretrain_epochs=10, epochs=3, batch_size=32, kmeans_n_init=2)
    with torch.no_grad(): labels = assign_to_centroids(encoder.features(images), centroids)
    assert clustering_scores(truth, labels)["nmi"] == 1.0
    assert set(losses) == {"pretrain_loss", "reconstruction_loss", "clustering_loss"}


def test_centroid_step_is_the_running_mean_over_batches():
    "Two batches through DCN's centroid step give the mean of the initial centroid (count 1) and every code since."
    centroids, counts = torch.zeros(1, 2), torch.ones(1)
    codes = torch.randn(7, 2, generator=torch_generator(0))
    update_centroids(centroids, counts, codes[:3], torch.zeros(3, dtype=torch.long))
    update_centroids(centroids, counts, codes[3:], torch.zeros(4, dtype=torch.long))
    assert torch.allclose(centroids[0], codes.sum(0) / 8) and counts.item() == 8


def test_the_clients_label_their_data_with_the_servers_encoder():
    "After the run the server holds the trained encoder; the clients' Eq. 3 labels are those of that encoder and the centroids."
    data = build_federation(load_dataset("digits", split="all", image_size=16), "pmix", p=1.0, seed=0)
    algorithm = PPFCGAN(gan_width=8, gan_hidden_dim=32, noise_dim=16, synthetic_per_client=40, pretrain_epochs=2, dcn_epochs=1,
                        dcn_batch_size=64, decoder_hidden_dims=(32,), kmeans_n_init=2)
    seed_everything(0)
    model = dcn_encoder(256, (32,), 10)
    history = run_experiment(algorithm, data, model, rounds=1, training=LocalTraining(steps=3, batch_size=32), progress=False)
    labels = algorithm.cluster_labels()
    set_parameters(model, algorithm.server["params"])
    with torch.no_grad(): direct = assign_to_centroids(model.eval().features(data[3].x_train), algorithm.server["centroids"])
    assert torch.equal(torch.as_tensor(labels[3]), direct)
    assert history[-1]["synthetic_images"] == 400 and history[-1]["bytes_up"] == 400 * 256 * 4
    for client in data: client.state.clear()


def test_bad_settings_name_the_parameter():
    with pytest.raises(ValueError, match="lambda_"): PPFCGAN(lambda_=-0.5)
    with pytest.raises(ValueError, match="pretrain_epochs"): PPFCGAN(pretrain_epochs=-1)
    with pytest.raises(ValueError, match="gan must be one of"): PPFCGAN(gan="central")
