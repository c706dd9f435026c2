"""Clustering- and contrastive-based federated learning, implemented, explained and reproduced in notebooks

Modules:

- `fedlearn_nb.clustering`: FINCH, the parameter-free first-neighbour clustering hierarchy that FedCCL (Eqs. 8-10, 13-14), FPL and FedPLVM use to turn many feature vectors into a few prototypes, written in torch for CPU or GPU; FedPLCC's weighted FINCH* (FedPLCC Eqs. 9-10); and the k-means, fuzzy c-means, nearest-centroid assignment (CCFC Eq. 3) and clustering scores of the federated clustering methods.
- `fedlearn_nb.data`: Every dataset the five papers use behind one registry and one `load_dataset` call, the multi-domain benchmarks (Digit-5, Office-10, DomainNet-10) as first-class objects, and an embedded, download-free stand-in built from scikit-learn's digits that is the default everywhere.
- `fedlearn_nb.tools.cost`: A meter that times a few rounds of every headline column of each paper, at the paper's own settings, on the present device, and projects the wall time of each full table: `fedlearn-repro cost <paper|all> --scale paper`.
- `fedlearn_nb.tools.layers`: The drawing of which module imports which, read from the source, and the checks that keep it a stack of layers: every import points down, nothing goes round in a circle, and algorithms do not borrow from one another.
- `fedlearn_nb.tools.papers`: What every notebook in `papers/` needs besides its own set-up: reading its parameters, naming run folders, running a table's independent runs through `run(config)` (one after another or side by side), and setting our numbers beside the paper's, table by table. Used by the FedCCL, FedPLCC, FedCRL, CCFC and CP-CFL notebooks and the cross-paper benchmark.
- `fedlearn_nb.tools.protocols.ccfc`: The experiments of Yan et al.'s CCFC paper (cluster-contrastive federated clustering) as the notebook `papers/ccfc.ipynb` runs them: the scales, the datasets and their p-mix federations, the run of every federated-clustering method (CCFC, k-FED, FFCM, SDA-FC, PPFC-GAN) and of the centralised KM and FCM, the paper's transcribed numbers, and the builders of its tables and figures.
- `fedlearn_nb.tools.protocols.cpcfl`: Everything the CP-CFL paper notebook (`papers/cpcfl.ipynb`) runs besides its tables' prose: the scales, the tasks ("pre-training data → client data") that stand for each column of the paper, the clients, the runs of every table, the paper's transcribed numbers and the builders that set ours beside them.
- `fedlearn_nb.tools.protocols.fedcrl`: What the FedCRL paper notebook runs: the columns of Tables II and III at each scale, how each column's clients are cut, the sixteen methods' settings, the paper's numbers, the runs, and the tables and figures built from them."""

__version__ = "0.0.1"
