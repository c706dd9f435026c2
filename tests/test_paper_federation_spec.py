"RunConfig.federation (a FederationSpec's options), as the engine's builder applies it: what FedCCL's runs rely on."
import numpy as np
import pytest

from fedlearn_nb.data import load_dataset, subsample_per_class
from fedlearn_nb.experiment import RunConfig, build_federated_data

SKEWED = dict(dataset="digits", partition="dirichlet", partition_kwargs={"alpha": 0.5}, num_clients=4)


def test_the_test_split_is_cut_per_class_and_the_federation_keeps_its_name():
    data = build_federated_data(RunConfig(**SKEWED, federation={"test_per_class": 5, "name": "digits"}))
    counts = data.class_counts("test").sum(axis=0)
    assert counts.tolist() == [5] * 10 and data.name == "digits"
    test = load_dataset("digits", split="test")
    kept = test.y[subsample_per_class(test.y.numpy(), 5, seed=0)]
    assert sorted(np.concatenate([c.y_test.numpy() for c in data]).tolist()) == sorted(kept.tolist())   # the seed-0 draw


def test_a_partition_seed_fixes_the_clients_across_run_seeds():
    fixed = [build_federated_data(RunConfig(**SKEWED, seed=s, federation={"partition_seed": 0})).class_counts() for s in (1, 2)]
    free = [build_federated_data(RunConfig(**SKEWED, seed=s)).class_counts() for s in (1, 2)]
    assert (fixed[0] == fixed[1]).all() and not (free[0] == free[1]).all()


def test_names_of_runs_without_it_are_unchanged_and_bad_options_are_refused():
    assert RunConfig(dataset="digits", partition="iid").run_name == "digits-fedavg-seed0-b2b5ee40"   # as before the field
    assert RunConfig(dataset="digits", partition="iid", federation={"partition_seed": 0}).run_name != "digits-fedavg-seed0-b2b5ee40"
    with pytest.raises(ValueError, match="test_per_clas.*did you mean 'test_per_class'"):
        RunConfig(**SKEWED, federation={"test_per_clas": 5})
    with pytest.raises(ValueError, match="data_kwargs test_per_class for a benchmark"):
        RunConfig(dataset="digits5lite", partition="domains", federation={"test_per_class": 5})
