"""CCFC on all 70,000 MNIST images at p = 0, with the paper's schedule, on the CPU: does the amount of data explain our NMI?

The committed `quick` CCFC column trains on 500 images per class and reaches NMI 0.42, against the paper's 0.92; at that
size more training makes NMI worse. This run keeps everything of the paper's set-up (all 70,000 images, 10 clients, p = 0,
100 SimSiam + 30 CCFC rounds, Adam 1e-3 with its state kept, batch 128, k-means with 10 restarts) except the network's
width: the quarter-width 3-conv network of the quick scale (conv widths 16, 32, 64), so that it fits a CPU. NMI and
Kappa are logged every round. The run resumes from its checkpoints: run the same command again after an interruption.

    python papers/supplementary/ccfc_full_mnist.py [--rounds N] [--out papers/results/ccfc/full-mnist-cpu]
    python papers/supplementary/ccfc_full_mnist.py --plot      # draw nmi_per_round.png from the finished history.csv
    # the paper's own network on a GPU:
    python papers/supplementary/ccfc_full_mnist.py --channels 64,128,256 --device cuda --out papers/results/ccfc/paper
"""
import argparse, dataclasses, json, platform, time
from pathlib import Path

import torch

from fedlearn_nb.core import atomic_write_csv, atomic_write_json
from fedlearn_nb.experiment import run
from fedlearn_nb.tools.protocols import ccfc

QUARTER_WIDTH = [16, 32, 64]   # the paper's 3-conv network is (64, 128, 256)


def full_mnist_config(results: Path, seed: int = 0, rounds: int | None = None, per_class: int | None = None,
                      channels=QUARTER_WIDTH, device: str = "cpu"):
    "The paper-scale CCFC RunConfig of MNIST at p = 0 (Tables 1-2), with the 3-conv network of conv widths `channels`."
    if len(channels) != 3 or any(int(c) < 1 for c in channels): raise ValueError(f"--channels must be 3 positive widths, got {channels!r}")
    protocol = ccfc.Protocol.from_parameters(scale="paper", seeds=str(seed), datasets="mnist", methods="CCFC", results_dir=str(results),
                                             device=device, client_workers=1, num_threads=1, rounds=rounds)
    config = ccfc.method_config(protocol, "CCFC", "mnist", 0.0, seed)
    latent = config.model_kwargs.get("latent_dim", 256)
    return dataclasses.replace(config, model="ccfc_cnn3", model_kwargs={"channels": [int(c) for c in channels], "latent_dim": latent},
                               per_class=per_class, client_workers=1)


PAPER_NMI = ccfc.PAPER_NMI[("MNIST", 0.0)]["CCFC"]   # CCFC on MNIST at p = 0, the paper's Table 1 (0.9236)
QUICK_NMI = 0.41                                     # our committed quick column (500 images per class): 0.409 ± 0.042


def run_label(config: dict) -> str:
    "What a run's config.json says of its data and network, for the figure: images per class and conv widths."
    images = "all 70,000 images" if config.get("per_class") is None else f"{config['per_class']} images per class"
    return f"{images}, conv widths {config.get('model_kwargs', {}).get('channels', QUARTER_WIDTH)}"


def plot_nmi(history_csv: Path, png: Path, pretrain_rounds: int = 100, label: str = "all 70,000 images") -> Path:
    "NMI and Kappa per round from `history_csv`, the end of pre-training marked, the paper's and our quick column's NMI as lines."
    import matplotlib; matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd
    frame = pd.read_csv(history_csv)
    if not {"round", "nmi"} <= set(frame.columns): raise ValueError(f"{history_csv} has no round/nmi columns: is it a CCFC history?")
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.plot(frame["round"], frame["nmi"], label="NMI")
    if "kappa" in frame: ax.plot(frame["round"], frame["kappa"], label="Kappa", alpha=0.6)
    ax.axvline(pretrain_rounds + 0.5, color="grey", ls=":", label="SimSiam pre-training ends")
    ax.axhline(PAPER_NMI, color="black", ls="--", label=f"the paper's NMI ({PAPER_NMI})")
    ax.axhline(QUICK_NMI, color="tab:red", ls="--", label=f"our quick column's NMI ({QUICK_NMI}, 500 images per class)")
    best = frame.loc[frame["nmi"].idxmax()]
    ax.set(xlabel="round", ylabel="score", ylim=(0, 1),
           title=f"CCFC, MNIST p = 0, {label}\nNMI peak {best['nmi']:.3f} (round {int(best['round'])}), final {frame['nmi'].iloc[-1]:.3f}")
    ax.legend(fontsize=8, loc="lower right"); ax.grid(alpha=0.3)
    fig.tight_layout(); fig.savefig(png, dpi=110); plt.close(fig)
    return png


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=None, help="override the 130 rounds (pre-training becomes at most half)")
    parser.add_argument("--per-class", type=int, default=None, help="images per class (default: all, the paper's amount)")
    parser.add_argument("--out", default="papers/results/ccfc/full-mnist-cpu", help="where the per-round NMI and its record are written")
    parser.add_argument("--channels", default=",".join(map(str, QUARTER_WIDTH)), help="conv widths (the paper's network: 64,128,256)")
    parser.add_argument("--device", default="cpu", help="cpu | cuda | auto")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--work", default="results/papers/ccfc/full-mnist-cpu", help="the run's folder (checkpoints; not committed)")
    parser.add_argument("--plot", action="store_true", help="only draw nmi_per_round.png from <out>/history.csv (after the run)")
    args = parser.parse_args(argv)
    if args.plot:
        history = Path(args.out) / "history.csv"
        if not history.exists(): parser.error(f"--plot needs {history}: it is written when the run finishes")
        saved = json.loads((Path(args.out) / "config.json").read_text())["config"] if (Path(args.out) / "config.json").exists() else {}
        print(plot_nmi(history, Path(args.out) / "nmi_per_round.png", saved.get("algorithm_kwargs", {}).get("pretrain_rounds", 100), run_label(saved))); return
    torch.set_num_threads(args.threads)
    config = full_mnist_config(Path(args.work), rounds=args.rounds, per_class=args.per_class,
                               channels=[c for c in args.channels.split(",") if c.strip()], device=args.device)
    out = Path(args.out); out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / "config.json", {"config": dataclasses.asdict(config), "torch": torch.__version__, "python": platform.python_version(),
                                            "processor": platform.processor() or platform.machine(), "threads": torch.get_num_threads()}, indent=1)
    rows, clock = [], [time.process_time(), time.perf_counter()]

    def log_round(round_, record):   # after every round: NMI so far, written atomically (a resumed run starts its log again from its checkpoint)
        now = [time.process_time(), time.perf_counter()]   # CPU seconds of this process (on a GPU: the host's share), wall seconds
        rows.append({"round": round_, **{k: record[k] for k in ("nmi", "kappa", "loss", "train_loss") if k in record},
                     "cpu_seconds": round(now[0] - clock[0], 2), "wall_seconds": round(now[1] - clock[1], 2)})
        clock[:] = now
        atomic_write_csv(out / "log_this_process.csv", rows)

    history = run(config, progress=False, callbacks=[log_round])
    frame = history.to_frame()
    atomic_write_csv(out / "history.csv", frame)
    plot_nmi(out / "history.csv", out / "nmi_per_round.png", config.algorithm_kwargs.get("pretrain_rounds", 100), run_label(dataclasses.asdict(config)))
    print(frame[[c for c in ("round", "nmi", "kappa") if c in frame]].to_string(index=False))


if __name__ == "__main__":
    main()
