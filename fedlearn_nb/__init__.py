"""Clustering- and contrastive-based federated learning, implemented, explained and reproduced in notebooks

Modules:

- `fedlearn_nb.clustering`: FINCH, the parameter-free first-neighbour clustering hierarchy that FedCCL (Eqs. 8-10, 13-14), FPL and FedPLVM use to turn many feature vectors into a few prototypes, written in torch for CPU or GPU; FedPLCC's weighted FINCH* (FedPLCC Eqs. 9-10); and the k-means, fuzzy c-means, nearest-centroid assignment (CCFC Eq. 3) and clustering scores of the federated clustering methods.
- `fedlearn_nb.data`: Every dataset the five papers use behind one registry and one `load_dataset` call, the multi-domain benchmarks (Digit-5, Office-10, DomainNet-10) as first-class objects, and an embedded, download-free stand-in built from scikit-learn's digits that is the default everywhere.
- `fedlearn_nb.tools.cost`: A meter that times a few rounds of every headline column of each paper, at the paper's own settings, on the present device, and projects the wall time of each full table: `fedlearn-repro cost <paper|all> --scale paper`.
- `fedlearn_nb.tools.layers`: The drawing of which module imports which, read from the source, and the checks that keep it a stack of layers: every import points down, nothing goes round in a circle, and algorithms do not borrow from one another.
- `fedlearn_nb.tools.papers`: What every notebook in `papers/` needs besides its own set-up: reading its parameters, naming run folders, running a table's independent runs through `run(config)` (one after another or side by side), and setting our numbers beside the paper's, table by table. Used by the FedCCL, FedPLCC, FedCRL, CCFC and CP-CFL notebooks and the cross-paper benchmark.
- `fedlearn_nb.tools.protocols.fedccl`: The experimental protocol of Qiao et al.'s FedCCL, as `papers/fedccl.ipynb` runs it: the scales, the paper's domains and federations, the run of every table entry, the paper's own numbers (Tables 1-8) and the builders of Tables 1-8 and Figures 3-6, so that the paper notebook only declares its tables, shows them and says what they mean."""

__version__ = "0.0.1"
