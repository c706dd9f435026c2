"A tiny network and a four-class toy federation shared by the algorithm tests (8 features seen as 1x2x4 images)."
import numpy as np
import torch
import torch.nn as nn

from fedlearn_nb.core import torch_generator
from fedlearn_nb.engine import FederatedData


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
