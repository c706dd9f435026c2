"""Clustering- and contrastive-based federated learning, implemented, explained and reproduced in notebooks

Modules:

- `fedlearn_nb.clustering`: FINCH, the parameter-free first-neighbour clustering hierarchy that FedCCL (Eqs. 8-10, 13-14), FPL and FedPLVM use to turn many feature vectors into a few prototypes, written in torch for CPU or GPU; and FedPLCC's weighted FINCH* (FedPLCC Eqs. 9-10).
- `fedlearn_nb.data`: Every dataset the five papers use behind one registry and one `load_dataset` call, the multi-domain benchmarks (Digit-5, Office-10, DomainNet-10) as first-class objects, and an embedded, download-free stand-in built from scikit-learn's digits that is the default everywhere."""

__version__ = "0.0.1"
