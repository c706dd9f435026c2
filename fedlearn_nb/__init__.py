"""Clustering- and contrastive-based federated learning, implemented, explained and reproduced in notebooks

Modules:

- `fedlearn_nb.clustering`: FINCH, the parameter-free first-neighbour clustering hierarchy that FedCCL (Eqs. 8-10, 13-14), FPL and FedPLVM use to turn many feature vectors into a few prototypes, written in torch for CPU or GPU; and FedPLCC's weighted FINCH* (FedPLCC Eqs. 9-10)."""

__version__ = "0.0.1"
