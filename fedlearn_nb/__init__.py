"""Clustering- and contrastive-based federated learning, implemented, explained and reproduced in notebooks

Modules:

- `fedlearn_nb.clustering`: FINCH, the parameter-free first-neighbour clustering hierarchy that FedCCL (Eqs. 8-10, 13-14), FPL and FedPLVM use to turn many feature vectors into a few prototypes, written in torch for CPU or GPU; FedPLCC's weighted FINCH* (FedPLCC Eqs. 9-10); and the k-means, fuzzy c-means, nearest-centroid assignment (CCFC Eq. 3) and clustering scores of the federated clustering methods.
- `fedlearn_nb.data`: Every dataset the five papers use behind one registry and one `load_dataset` call, and the multi-domain benchmarks (Digit-5, Office-10, DomainNet-10) as first-class objects; the embedded, download-free stand-ins built from scikit-learn's digits are the default everywhere.
- `fedlearn_nb.readers`: How each dataset's files are found, checked against the published checksums and parsed: the readers of the standard formats (IDX, CIFAR pickles, STL-10 binaries, SVHN `.mat`, USPS, `.npz` copies, image folders), and one loader per dataset that the registry in `fedlearn_nb.data` calls.
- `fedlearn_nb.standins`: Download-free stand-ins for MNIST and Digit-5 (`digits`, `digits5lite`), built from scikit-learn's 8x8 digits: the default data everywhere in this project.
- `fedlearn_nb.tools.cost`: A meter that times a few rounds of every headline column of each paper, at the paper's own settings, on the present device, and projects the wall time of each full table: `fedlearn-repro cost <paper|all> --scale paper`.
- `fedlearn_nb.tools.layers`: The drawing of which module imports which, read from the source, and the checks that keep it a stack of layers: every import points down, nothing goes round in a circle, and algorithms do not borrow from one another.
- `fedlearn_nb.tools.papers`: What every notebook in `papers/` needs besides its own set-up: reading its parameters, naming run folders, running a table's independent runs through `run(config)` (one after another or side by side), and setting our numbers beside the paper's, table by table. Used by the FedCCL, FedPLCC, FedCRL, CCFC and CP-CFL notebooks and the cross-paper benchmark."""

__version__ = "0.0.1"
