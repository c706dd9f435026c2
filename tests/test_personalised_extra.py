"FedAMP, FedALA, FedGH and FedPAC are found by name in a fresh process and run from a RunConfig on the embedded data."
import subprocess
import sys

import pytest

NAMES = ["fedamp", "fedala", "fedgh", "fedpac"]


def test_names_resolve_in_a_fresh_process():
    code = ("from fedlearn_nb.engine import get_algorithm\n"
            f"for n in {NAMES!r}: assert get_algorithm(n).name == n, n\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("name", NAMES)
def test_run_config_runs_and_repeats(name, tmp_path):
    import torch
    from fedlearn_nb.experiment import RunConfig, run
    torch.set_num_threads(1)
    def once(folder):
        config = RunConfig(dataset="digits5lite", partition="domains", model="fedcrl_cnn",
                           model_kwargs={"conv_channels": [4, 8], "representation_dim": 16}, algorithm=name, rounds=2,
                           batch_size=64, optimizer="adam", lr=0.003, results_dir=str(folder))
        return run(config, progress=False)
    history = once(tmp_path / "a")
    assert len(history) == 2 and history.protocol == "personalised"
    assert 0 <= history.summary()["final_accuracy_mean"] <= 1
    assert once(tmp_path / "b").same_as(history)  # same seed, same history


def test_bad_hyperparameters_say_what_is_wrong():
    from fedlearn_nb.algorithms.fedala import FedALA
    from fedlearn_nb.algorithms.fedamp import FedAMP
    from fedlearn_nb.algorithms.fedgh import FedGH
    from fedlearn_nb.algorithms.fedpac import FedPAC
    with pytest.raises(ValueError, match="sigma"): FedAMP(sigma=-1)
    with pytest.raises(ValueError, match="sample_fraction"): FedALA(sample_fraction=1.5)
    with pytest.raises(ValueError, match="server_epochs"): FedGH(server_epochs=0)
    with pytest.raises(ValueError, match="head_epochs"): FedPAC(head_epochs=0)


@pytest.mark.parametrize("name,options,passes", [
    ("fedrep", {"head_epochs": 2}, 2 + 1),        # two head epochs, then one epoch of the representation
    ("fedpac", {"head_epochs": 1}, 1 + 1),
    ("ditto", {"personal_epochs": 2}, 2 + 1),     # two epochs of the personal model, then FedAvg's epoch
    ("pfedme", {}, 1),
    ("perfedavg", {}, 1),
])
def test_every_phase_of_local_training_sees_the_train_time_augmentation(name, options, passes):
    "The one local loop augments every training sample of every phase (the personalised methods' own loops did not)."
    from toys import TinyNet, toy_federation
    from fedlearn_nb.core import seed_everything
    from fedlearn_nb.engine import LocalTraining, get_algorithm
    from fedlearn_nb.loop import run_experiment
    fed, seen = toy_federation(clients=4, n=160), []
    fed.train_augmentation = lambda image: seen.append(image.shape) or image.flip(-1)
    seed_everything(0)
    run_experiment(get_algorithm(name)(**options), fed, TinyNet(), rounds=1, training=LocalTraining(batch_size=16, lr=0.05),
                   progress=False)
    extra = 16 if name == "perfedavg" else 0    # 40 examples a client: batches of 16, 16, 8, and the first again to make a pair
    assert len(seen) == 4 * (passes * 40 + extra)
    assert all(shape == (1, 2, 4) for shape in seen)


def test_fedper_and_lgfedavg_are_one_mechanism_with_the_other_part_shared():
    "LG-FedAvg is FedPer naming the head as its shared part: on the same model their shared keys split it in two."
    from toys import TinyNet
    from fedlearn_nb.algorithms.fedper import FedPer
    from fedlearn_nb.algorithms.lgfedavg import LGFedAvg
    assert issubclass(LGFedAvg, FedPer) and (FedPer.shared_part, LGFedAvg.shared_part) == ("features", "head")
    names = list(TinyNet().state_dict())
    shared = {cls: [n for n in names if cls().is_shared(n)] for cls in (FedPer, LGFedAvg)}
    assert shared[FedPer] == ["features.1.weight", "features.1.bias"] and shared[LGFedAvg] == ["head.weight", "head.bias"]
    assert sorted(shared[FedPer] + shared[LGFedAvg]) == sorted(names)
    assert LGFedAvg().protocol == "personalised"
