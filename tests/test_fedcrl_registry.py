"The personalised-FL algorithms are found by name in a fresh process and run from a RunConfig."
import subprocess
import sys

import pytest

NAMES = ["fedcrl", "fedper", "fedrep", "lgfedavg", "ditto", "pfedme", "perfedavg"]


def test_names_resolve_in_a_fresh_process():
    code = ("from fedlearn_nb.engine import get_algorithm\n"
            f"for n in {NAMES!r}: assert get_algorithm(n).name == n, n\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("name", ["fedcrl", "ditto"])
def test_run_config_runs(name, tmp_path):
    import torch
    from fedlearn_nb.experiment import RunConfig, run
    torch.set_num_threads(1)
    config = RunConfig(dataset="digits5lite", partition="domains", model="fedcrl_cnn", model_kwargs={"conv_channels": [4, 8], "representation_dim": 16},
                       algorithm=name, rounds=2, batch_size=64, optimizer="adam", lr=0.003, results_dir=str(tmp_path))
    history = run(config, progress=False)
    assert len(history) == 2 and history.protocol == "personalised"
    assert 0 <= history.summary()["final_accuracy_mean"] <= 1
