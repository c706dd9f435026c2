"CCFC and the federated clustering baselines on the embedded digits (and on MNIST when it is present)."
from pathlib import Path

import numpy as np
import pytest
import torch

from fedlearn_nb.core import load_settings, seed_everything
from fedlearn_nb.data import DatasetNotFoundError, load_dataset
from fedlearn_nb.engine import LocalTraining, get_algorithm
from fedlearn_nb.history import History
from fedlearn_nb.loop import run_experiment
from fedlearn_nb.models import RawFeatures
from fedlearn_nb.federation import build_federation
from fedlearn_nb.clustering import centralised_clustering, clustering_scores
from fedlearn_nb.algorithms.kfed import KFed
from fedlearn_nb.algorithms.ffcm import FFCM
from fedlearn_nb.algorithms.ccfc import CCFC, SCFC, ccfc_mlp

torch.set_num_threads(min(2, torch.get_num_threads()))


# One xdist group: under `pytest -n 2 --dist loadgroup` this module's tests share a worker, so its module fixtures run once.
pytestmark = pytest.mark.xdist_group("ccfc")


@pytest.fixture(scope="module")
def digits():
    "The embedded stand-in, train and test merged, at 16x16, over 10 clients at p = 0 (IID)."
    data = load_dataset("digits", split="all", image_size=16)
    return build_federation(data, "pmix", p=0.0, seed=0)


def test_ccfc_beats_kfed_nmi_on_the_embedded_digits_at_p0(digits):
    "The end-to-end check: CCFC (with the authors' federated SimSiam pre-training) beats k-FED's NMI at p = 0."
    kfed = run_experiment(KFed(), digits, RawFeatures.for_data(digits), rounds=1, progress=False)[-1]["nmi"]
    seed_everything(0)
    model = ccfc_mlp(16 * 16, hidden_dim=256, latent_dim=64, predictor_hidden_dim=16)
    ccfc = CCFC(lambda_=0.001, pretrain_rounds=8, blur_probability=0.0, view_scale=(0.7, 1.0), kmeans_n_init=3)
    training = LocalTraining(epochs=3, batch_size=32, optimizer="sgd", lr=0.1, momentum=0.9)
    history = run_experiment(ccfc, digits, model, rounds=14, training=training, eval_every=14, seed=0, progress=False)
    for client in digits: client.state.clear()
    nmi = history[-1]["nmi"]
    assert nmi > kfed + 0.02, f"CCFC NMI {nmi:.3f} does not beat k-FED's {kfed:.3f}"
    assert history[-1]["kappa"] > 0.5


def test_every_clustering_method_is_registered_by_name():
    assert get_algorithm("ccfc") is CCFC and get_algorithm("kfed") is KFed and get_algorithm("ffcm") is FFCM
    assert get_algorithm("scfc") is SCFC      # registered when the ccfc module is imported (it is, above)


def test_an_interrupted_ccfc_run_resumes_to_the_same_history(digits, tmp_path):
    training = LocalTraining(batch_size=64, optimizer="sgd", lr=0.05, momentum=0.9)
    def run(folder=None, rounds=3, callbacks=()):
        for client in digits: client.state.clear()
        seed_everything(0)
        return run_experiment(CCFC(pretrain_rounds=1, kmeans_n_init=1, persistent_optimizer=True), digits, ccfc_mlp(256, 64, 16, 8),
                              rounds=rounds, training=training, run_dir=folder, callbacks=callbacks, progress=False)
    full = run()
    def crash(round, record):
        if round == 2: raise RuntimeError("simulated crash")
    with pytest.raises(RuntimeError, match="simulated crash"): run(tmp_path, callbacks=[crash])
    assert len(History.load(tmp_path)) == 2
    resumed = run(tmp_path)
    assert resumed.same_as(full)
    for client in digits: client.state.clear()


def test_kfed_and_ffcm_on_real_mnist_are_near_the_papers_baselines():
    "On 10,000 MNIST images at p = 0, k-FED and FFCM reach the NMI range of the paper's Table 1 (0.51-0.52)."
    try: data = load_dataset("mnist", split="test")
    except DatasetNotFoundError as error:
        pytest.skip(f"MNIST not found under {load_settings().data_root}: {str(error).splitlines()[0]}")
    federation = build_federation(data, "pmix", p=0.0, seed=0)
    kfed = run_experiment(KFed(kmeans_n_init=3), federation, RawFeatures.for_data(federation), rounds=1, progress=False)[-1]
    ffcm = run_experiment(FFCM(kmeans_n_init=3), federation, RawFeatures.for_data(federation), rounds=3, progress=False)[-1]
    for name, result in (("k-FED", kfed), ("FFCM", ffcm)):
        assert 0.4 < result["nmi"] < 0.65, (name, result["nmi"])


def test_fuzzy_cmeans_on_an_accelerator_computes_what_the_cpu_does(monkeypatch):
    "The torch branch of fuzzy c-means (used when the points are on a GPU) gives the NumPy branch's result."
    import fedlearn_nb.clustering as clustering
    points = np.random.default_rng(0).normal(size=(300, 5)) + np.repeat(np.eye(5)[:3] * 6, 100, axis=0)
    on_cpu = clustering.fuzzy_cmeans(points, 3, m=1.5, seed=0, tol=1e-8)
    monkeypatch.setattr(clustering, "_fcm_points", lambda p: torch.as_tensor(np.asarray(p), dtype=torch.float64))
    in_torch = clustering.fuzzy_cmeans(points, 3, m=1.5, seed=0, tol=1e-8, sample_weight=np.ones(300))
    np.testing.assert_allclose(in_torch.centroids, on_cpu.centroids, atol=1e-10)
    np.testing.assert_allclose(in_torch.memberships, on_cpu.memberships, atol=1e-10)
    assert in_torch.iterations == on_cpu.iterations and in_torch.converged


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_simsiam_step_on_a_gpu_never_waits_for_the_gpu():
    "Two augmented views (drawn on the CPU), CCFC's SimSiam loss with the regulariser, backward and Adam's step on CUDA: no host synchronisation."
    device = torch.device("cuda")
    seed_everything(0)
    model = ccfc_mlp(16 * 16, hidden_dim=64, latent_dim=16, predictor_hidden_dim=8).to(device)
    algorithm = CCFC(lambda_=0.1)
    context = {"phase": "sample", "views": torch.Generator().manual_seed(0), "global_model": algorithm.frozen_copy(model)}
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.rand(64, 1, 16, 16, device=device)
    def step():
        loss = algorithm.loss(model.train(), x, None, context)
        optimizer.zero_grad(set_to_none=True); loss.backward(); optimizer.step()
    step()                                                     # Adam's state is made on the first step
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(2): step()
    finally: torch.cuda.set_sync_debug_mode(0)
