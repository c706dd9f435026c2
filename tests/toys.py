"The four-class toy federation and the crash-and-resume check shared by the algorithm tests (the network is fedlearn_nb.toys.TinyNet)."
import numpy as np
import torch

from fedlearn_nb.core import torch_generator
import pytest

from fedlearn_nb.core import seed_everything
from fedlearn_nb.data import LabelledData
from fedlearn_nb.engine import LocalTraining
from fedlearn_nb.history import History
from fedlearn_nb.loop import run_experiment
from fedlearn_nb.federation import FederatedData
from fedlearn_nb.toys import TOY_CLASSES, TinyNet, toy_centres  # noqa: F401 (TinyNet: re-used by the tests that import this module)


def toy_federation(clients=4, n=160):
    centres = toy_centres()
    g = torch_generator(0)
    y = torch.randint(0, 4, (n,), generator=g)
    x = (centres[y] + torch.randn(n, 8, generator=g)).view(n, 1, 2, 4)
    yt = torch.randint(0, 4, (80,), generator=g)
    xt = (centres[yt] + torch.randn(80, 8, generator=g)).view(80, 1, 2, 4)
    return FederatedData.from_partition(LabelledData(x, y, TOY_CLASSES, "toy"), np.array_split(np.arange(n), clients),
                                        test=LabelledData(xt, yt, TOY_CLASSES, "toy"))


def crash_and_resume(make, run_dir, rounds=4, crash_after=2, snapshot=lambda fed: None):
    """Train `make()` on the toy federation uninterrupted, then again with a crash after round `crash_after`, resumed
    from `run_dir`. Returns the full run's algorithm and history, `snapshot(fed)` taken right after it (client state is
    overwritten by the later runs), and the resumed run's algorithm and history."""
    fed, training = toy_federation(), LocalTraining(batch_size=16, lr=0.05)

    def crash(round, record):
        if round == crash_after: raise RuntimeError("simulated crash")

    seed_everything(0); full_algorithm = make()
    full = run_experiment(full_algorithm, fed, TinyNet(), rounds=rounds, training=training, progress=False)
    taken = snapshot(fed)
    seed_everything(0)
    with pytest.raises(RuntimeError, match="simulated crash"):
        run_experiment(make(), fed, TinyNet(), rounds=rounds, training=training, run_dir=run_dir, callbacks=[crash], progress=False)
    assert len(History.load(run_dir)) == crash_after
    resumed_algorithm = make()
    resumed = run_experiment(resumed_algorithm, fed, TinyNet(), rounds=rounds, training=training, run_dir=run_dir, progress=False)
    return full_algorithm, full, taken, resumed_algorithm, resumed
