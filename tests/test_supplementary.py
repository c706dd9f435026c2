"The supplementary experiments under papers/supplementary: their settings are the paper's, checked without training."
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "papers" / "supplementary" / f"{name}.py")
    module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)
    return module


def test_ccfc_full_mnist_keeps_the_papers_setup_but_the_width(tmp_path):
    config = load("ccfc_full_mnist").full_mnist_config(tmp_path)
    assert (config.dataset, config.per_class, config.data_split, config.partition, config.partition_kwargs) == ("mnist", None, "all", "pmix", {"p": 0.0})
    assert (config.num_clients, config.optimizer, config.lr, config.batch_size, config.local_epochs) == (10, "adam", 1e-3, 128, 1)
    kwargs = config.algorithm_kwargs
    assert config.rounds == 130 and kwargs["pretrain_rounds"] == 100       # 100 SimSiam + 30 CCFC rounds
    assert kwargs["persistent_optimizer"] is True and kwargs["kmeans_n_init"] == 10
    assert config.model == "ccfc_cnn3" and config.model_kwargs["channels"] == [16, 32, 64]   # a quarter of (64, 128, 256)
    assert config.eval_every == 1                                           # NMI every round


def test_ccfc_full_mnist_refuses_bad_widths_before_writing(tmp_path):
    module = load("ccfc_full_mnist")
    with pytest.raises(ValueError, match="--channels must be 3 positive widths"):
        module.main(["--channels", "8,16", "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work")])
    assert not (tmp_path / "out").exists() and not (tmp_path / "work").exists()


def test_ccfc_full_mnist_plots_the_finished_history(tmp_path):
    module = load("ccfc_full_mnist")
    out = tmp_path / "out"; out.mkdir()
    with pytest.raises(SystemExit): module.main(["--plot", "--out", str(out)])      # no history yet: says so, draws nothing
    assert not (out / "nmi_per_round.png").exists()
    (out / "history.csv").write_text("round,nmi,kappa\n1,0.1,0.1\n2,0.5,0.4\n3,0.3,0.35\n")
    module.main(["--plot", "--out", str(out)])
    png = (out / "nmi_per_round.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    (tmp_path / "other.csv").write_text("round,accuracy\n1,0.5\n")
    with pytest.raises(ValueError, match="no round/nmi columns"): module.plot_nmi(tmp_path / "other.csv", tmp_path / "x.png")
    assert module.run_label({"per_class": 500, "model_kwargs": {"channels": [64, 128, 256]}}) == "500 images per class, conv widths [64, 128, 256]"
    assert module.run_label({"per_class": None, "model_kwargs": {"channels": [16, 32, 64]}}) == "all 70,000 images, conv widths [16, 32, 64]"
