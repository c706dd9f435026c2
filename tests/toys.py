"A tiny network and a four-class toy federation shared by the algorithm tests (8 features seen as 1x2x4 images)."
import numpy as np
import torch
import torch.nn as nn

from fedlearn_nb.core import torch_generator
import pytest

from fedlearn_nb.core import seed_everything
from fedlearn_nb.engine import FederatedData, History, LocalTraining, run_experiment


class TinyNet(nn.Module):
    def __init__(self, in_features=8, feature_dim=16, num_classes=4):
        super().__init__()
        self.features = nn.Sequential(nn.Flatten(), nn.Linear(in_features, feature_dim), nn.ReLU())
        self.head, self.feature_dim = nn.Linear(feature_dim, num_classes), feature_dim

    def forward(self, x): return self.head(self.features(x))


class Toy:
    def __init__(self, x, y): self.x, self.y, self.classes, self.name = x, y, ["a", "b", "c", "d"], "toy"


def toy_federation(clients=4, n=160):
    centres = 2.0 * torch.randn(4, 8, generator=torch_generator(99))
    g = torch_generator(0)
    y = torch.randint(0, 4, (n,), generator=g)
    x = (centres[y] + torch.randn(n, 8, generator=g)).view(n, 1, 2, 4)
    yt = torch.randint(0, 4, (80,), generator=g)
    xt = (centres[yt] + torch.randn(80, 8, generator=g)).view(80, 1, 2, 4)
    return FederatedData.from_partition(Toy(x, y), np.array_split(np.arange(n), clients), test=Toy(xt, yt))


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
