"The federated engine end to end: `run(config)` with the real models; resume, determinism, bad checkpoints, learning."
import json

import numpy as np
import pytest
import torch

from fedlearn_nb.core import torch_generator
from fedlearn_nb.engine import get_algorithm
from fedlearn_nb.history import History
from fedlearn_nb.loop import CHECKPOINT_NAME
from fedlearn_nb.experiment import RunConfig, run, run_folder
from fedlearn_nb.federation import FederatedData


class Images:
    "Labelled images with the data chapter's interface (x, y, classes, name)."
    def __init__(self, x, y, name="synthetic"): self.x, self.y, self.classes, self.name = x, y, [str(i) for i in range(10)], name


def synthetic_federation(num_clients=4, per_client=60, seed=0) -> FederatedData:
    "Ten classes of 28x28 images: a class-specific bright square plus noise; label-skewed clients."
    g = torch_generator(seed)
    def make(n):
        y = torch.randint(0, 10, (n,), generator=g)
        x = 0.3 * torch.rand(n, 1, 28, 28, generator=g)
        for i, label in enumerate(y.tolist()):
            row, col = divmod(label, 5)
            x[i, 0, 4 + 10 * row: 12 + 10 * row, 1 + 5 * col: 6 + 5 * col] += 0.7
        return Images(x, y)
    train, test = make(num_clients * per_client), make(200)
    order = np.argsort(train.y.numpy() + np.random.default_rng(seed).random(len(train.y)))  # label-sorted: skewed clients
    return FederatedData.from_partition(train, np.array_split(order, num_clients), test=test, seed=seed)


def config(tmp_path, **kw) -> RunConfig:
    base = dict(dataset="synthetic", partition="iid", model="fedccl_cnn4", algorithm="fedavg", rounds=4, batch_size=16,
                lr=0.05, momentum=0.9, fraction=0.75, seed=3, device="cpu", results_dir=str(tmp_path), name="run")
    base.update(kw)
    return RunConfig(**base)


class Crash(RuntimeError): pass


def crash_after(n):
    def callback(round, record):
        if round == n: raise Crash(f"simulated crash after round {n}")
    return callback


# One xdist group: under `pytest -n 2 --dist loadgroup` this module's tests share a worker, so its module fixtures run once.
pytestmark = pytest.mark.xdist_group("engine")


@pytest.fixture(scope="module")
def federation():
    torch.set_num_threads(1)
    return synthetic_federation()


@pytest.mark.parametrize("algorithm, kwargs", [("fedavg", {}), ("moon", {"mu": 1.0})])
def test_resume_after_interrupt_gives_the_same_history(tmp_path, federation, algorithm, kwargs):
    cfg = config(tmp_path, algorithm=algorithm, algorithm_kwargs=kwargs)
    uninterrupted = run(config(tmp_path / "full", algorithm=algorithm, algorithm_kwargs=kwargs), progress=False, data=federation)
    with pytest.raises(Crash):
        run(cfg, progress=False, data=federation, callbacks=[crash_after(2)])
    folder = run_folder(cfg)
    assert (folder / CHECKPOINT_NAME).exists()
    assert len(History.load(folder)) == 2  # the history so far is on disk
    resumed = run(cfg, progress=False, data=federation)
    assert resumed.same_as(uninterrupted)
    assert History.load(folder).same_as(uninterrupted)
    rounds = resumed.to_frame()["round"].tolist()
    assert rounds == [1, 2, 3, 4]


def test_a_finished_run_is_reused_and_can_be_extended(tmp_path, federation):
    first = run(config(tmp_path, rounds=2), progress=False, data=federation)
    again = run(config(tmp_path, rounds=2), progress=False, data=federation)
    assert again.same_as(first)
    longer = run(config(tmp_path, rounds=3), progress=False, data=federation)   # continues from round 2
    fresh = run(config(tmp_path / "fresh", rounds=3), progress=False, data=federation)
    assert longer.same_as(fresh)


def test_same_seed_same_history_other_seed_differs(tmp_path, federation):
    a = run(config(tmp_path / "a", rounds=2), progress=False, data=federation)
    b = run(config(tmp_path / "b", rounds=2), progress=False, data=federation)
    c = run(config(tmp_path / "c", rounds=2, seed=4), progress=False, data=federation)
    assert a.same_as(b)
    assert not a.same_as(c)


def test_corrupt_checkpoint_names_the_file_and_the_fix(tmp_path, federation):
    cfg = config(tmp_path, rounds=2)
    run(cfg, progress=False, data=federation)
    checkpoint = run_folder(cfg) / CHECKPOINT_NAME
    checkpoint.write_bytes(checkpoint.read_bytes()[:100])  # truncated, as by a crash mid-write without atomic replace
    with pytest.raises(RuntimeError, match="corrupt or unreadable") as error:
        run(cfg, progress=False, data=federation)
    assert str(checkpoint) in str(error.value) and "resume=False" in str(error.value)
    history = run(cfg, resume=False, progress=False, data=federation)  # the named fix works
    assert len(history) == 2


def test_a_checkpoint_of_another_experiment_is_refused(tmp_path, federation):
    run(config(tmp_path, rounds=1), progress=False, data=federation)
    with pytest.raises(ValueError, match="different experiment"):
        run(config(tmp_path, rounds=1, lr=0.1), progress=False, data=federation)  # same folder name, other lr


def test_results_files_carry_metadata(tmp_path, federation):
    cfg = config(tmp_path, rounds=1)
    run(cfg, progress=False, data=federation)
    folder = run_folder(cfg)
    saved = json.loads((folder / "history.json").read_text())
    assert saved["metadata"]["config"]["algorithm"] == "fedavg" and saved["metadata"]["versions"]["torch"] == torch.__version__
    assert json.loads((folder / "config.json").read_text())["config"]["seed"] == 3
    assert (folder / "history.csv").read_text().startswith("round,")
    assert "participated" in (folder / "clients.csv").read_text().splitlines()[0]


def test_fedavg_learns_on_synthetic_images(tmp_path, federation):
    history = run(config(tmp_path, rounds=4, fraction=1.0, local_epochs=3), progress=False, data=federation)
    assert history.summary()["final_accuracy_weighted"] > 0.8  # chance is 0.1
    assert history.summary()["best_accuracy_weighted"] >= history.summary()["final_accuracy_weighted"]


def test_fedavg_learns_on_the_embedded_digits(tmp_path):
    "The main job's FedAvg configuration on digits5lite (embedded, offline) is well above chance after 4 rounds."
    data = pytest.importorskip("fedlearn_nb.data", reason="fedlearn_nb.data (the data chapter) is not exported yet")
    from fedlearn_nb.tools.main import main_config
    torch.set_num_threads(1)
    history = run(main_config("fedavg", rounds=4, results_dir=tmp_path, device="cpu"), progress=False)
    summary = history.summary()
    assert summary["final_accuracy_weighted"] > 0.5, summary   # chance is 0.1 (ten digits)
    assert summary["final_accuracy_domain_mean"] > 0.5, summary
    assert summary["final_accuracy_mean"] > 0.5, summary
    assert len(history[-1]["clients"]) == len(data.load_benchmark("digits5lite").domains)


def test_get_algorithm_finds_variants_registered_in_other_modules():
    "FedCCL+ lives in algorithms/fedccl.py and SCFC in algorithms/ccfc.py: found by name all the same."
    import subprocess, sys
    code = ("from fedlearn_nb.engine import get_algorithm; "
            "print(get_algorithm('FedCCLPlus').__name__, get_algorithm('fedavgplus').__name__, get_algorithm('scfc').__name__)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)  # a fresh registry
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["FedCCLPlus", "FedAvgPlus", "SCFC"]
    with pytest.raises(KeyError, match="unknown algorithm"): get_algorithm("no-such-method")


def test_misspelt_keywords_name_the_valid_ones_and_the_closest(tmp_path):
    "RunConfig fields, partition/data options and algorithm hyper-parameters: refused when the config is made or built."
    with pytest.raises(TypeError, match=r"'rouns' \(did you mean 'rounds'\?\); valid: dataset, data_kwargs"):
        config(tmp_path, rouns=3)
    with pytest.raises(TypeError, match=r"partition_kwargs \(passed to partition_dirichlet\): unknown keyword 'alpah' \(did you mean 'alpha'\?\)"):
        config(tmp_path, partition="dirichlet", partition_kwargs={"alpah": 0.5})
    with pytest.raises(TypeError, match="'alpha' must be given"):
        config(tmp_path, partition="dirichlet")
    with pytest.raises(TypeError, match="'seed' is not an option here; it comes from seed"):
        config(tmp_path, partition_kwargs={"seed": 1})
    with pytest.raises(TypeError, match=r"data_kwargs \(passed to load_dataset\): unknown keyword 'imagesize' \(did you mean 'image_size'\?\)"):
        config(tmp_path, data_kwargs={"imagesize": 32})
    with pytest.raises(TypeError, match=r"data_kwargs \(passed to load_benchmark\).*'train_per_clas' \(did you mean 'train_per_class'\?\)"):
        RunConfig(data_kwargs={"train_per_clas": 8})
    with pytest.raises(TypeError, match=r"algorithm_kwargs \(passed to FedProx\): unknown keyword 'mu_' \(did you mean 'mu'\?\)"):
        run(config(tmp_path, algorithm="fedprox", algorithm_kwargs={"mu_": 0.1}), progress=False, data=synthetic_federation(2, 20))
    assert not (tmp_path / "run").exists()  # refused before anything was written


def test_model_kwargs_in_channels_comes_from_the_data(tmp_path, federation):
    "Contradicting the data's channels is a clear error at build time; repeating them is honoured (no 'multiple values')."
    with pytest.raises(ValueError, match="in_channels=3, but the data .* has in_channels=1: in_channels comes from the data"):
        run(config(tmp_path, model_kwargs={"in_channels": 3}), progress=False, data=federation)
    assert not (tmp_path / "run").exists()
    history = run(config(tmp_path, rounds=1, model_kwargs={"in_channels": 1, "num_classes": 10}), progress=False, data=federation)
    assert len(history) == 1


def test_a_model_that_ignores_the_datas_channels_is_refused_at_build(tmp_path, federation):
    "A model fixed to RGB input on grey images fails when the run is built, naming both channel counts, not inside conv2d."
    import torch.nn as nn
    from fedlearn_nb import models
    class RGBOnly(nn.Module):
        def __init__(self, num_classes):
            super().__init__()
            self.features = nn.Sequential(nn.Conv2d(3, 4, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten())
            self.head, self.feature_dim = nn.Linear(4, num_classes), 4
        def forward(self, x): return self.head(self.features(x))
    models.register_model("test_rgb_only")(lambda num_classes, in_channels, image_size: RGBOnly(num_classes))
    try:
        with pytest.raises(ValueError, match=r"'test_rgb_only' takes 3-channel images but the data .* has 1-channel images \(1, 28, 28\)"):
            run(config(tmp_path, model="test_rgb_only"), progress=False, data=federation)
    finally: models.MODEL_BUILDERS.pop("test_rgb_only")
    assert not (tmp_path / "run").exists()


def test_run_names_of_earlier_configs_are_unchanged():
    "Committed results are found by their run name: the fields added later name a run only when they are set."
    assert RunConfig().run_name == "digits5lite-fedavg-seed0-eff6bdbf"
    assert RunConfig(algorithm="fedprox", algorithm_kwargs={"mu": 0.01}, seed=2).run_name == "digits5lite-fedprox-seed2-98b60a59"
    assert RunConfig(dataset="digits", partition="dirichlet", num_clients=5, partition_kwargs={"alpha": 0.5}, test_fraction=0.2,
                     seed=3, model="mlp").run_name == "digits-fedavg-seed3-59cc618c"
    assert RunConfig(model_seed=0).run_name != RunConfig().run_name


def test_every_partition_scheme_is_a_config_with_checked_options():
    "Each scheme's options are checked against its partition function when the config is made, naming the fix."
    from fedlearn_nb.federation import SCHEMES
    required = {"dirichlet": {"alpha": 0.5}, "pathological": {"num_classes_per_partition": 2}, "pmix": {"p": 0.5}}
    for scheme in SCHEMES:
        dataset = "digits5lite" if scheme == "domains" else "digits"
        assert RunConfig(dataset=dataset, partition=scheme, partition_kwargs=required.get(scheme, {})).partition == scheme
    with pytest.raises(TypeError, match=r"partition_kwargs \(passed to partition_shards\): unknown keyword 'shards'"):
        RunConfig(dataset="digits", partition="shards", partition_kwargs={"shards": 2})
    with pytest.raises(TypeError, match="'num_clients' is not an option here; it comes from num_clients"):
        RunConfig(dataset="digits", partition="pmix", partition_kwargs={"p": 0.5, "num_clients": 4})
    with pytest.raises(ValueError, match="unknown partition 'by_writer'; choose one of"):
        RunConfig(dataset="digits", partition="by_writer")


def test_run_keeps_its_parts_and_loads_an_encoder(tmp_path):
    "run(config, parts=) hands back the built data, model and algorithm; encoder_path fills the model's features."
    from fedlearn_nb.experiment import build_model_for
    from fedlearn_nb.models import build_model
    from fedlearn_nb.selfsupervised import save_encoder
    base = dict(dataset="digits", partition="grouped_label_sets", num_clients=3, partition_kwargs={"samples_per_class": [5, 5, 5, 5]},
                encoder_input={"image_size": 8}, model="cpcfl_cnn", model_kwargs={"padding": 1}, rounds=1, results_dir=str(tmp_path),
                device="cpu", algorithm="local")
    encoder = build_model("cpcfl_cnn", 10, 3, 8, seed=123, padding=1).features.state_dict()
    path = save_encoder(tmp_path / "encoder.pt", encoder)
    parts = {}
    history = run(RunConfig(**base, pooled="domain", encoder_path=str(path)), progress=False, parts=parts)
    assert len(history) == 1 and sorted(parts) == ["algorithm", "data", "model"] and parts["algorithm"].name == "local"
    assert [c.domain for c in parts["data"]] == ["group 0", "group 1", "group 2"] and parts["data"].image_shape == (3, 8, 8)
    assert [c.num_examples for c in parts["data"]] == [20, 20, 20]
    loaded = build_model_for(RunConfig(**base, encoder_path=str(path)), parts["data"]).features.state_dict()
    fresh = build_model_for(RunConfig(**base), parts["data"]).features.state_dict()
    assert all(torch.equal(loaded[k], encoder[k]) for k in encoder)
    assert not all(torch.equal(fresh[k], encoder[k]) for k in encoder)
    with pytest.raises(ValueError, match="kept by the in-process engine only"):
        run(RunConfig(**base), progress=False, parts={}, backend="flower")
