"""The library's figures over rounds follow the project's rules: whole-number round ticks (no 1.25, 1.5), a title,
and a legend beside the axes, never over the data."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pytest

from fedlearn_nb.history import History


def history(rounds: int, accuracy: float, clusters=None) -> History:
    records = []
    for r in range(1, rounds + 1):
        clients = [{"client": c, "domain": "ab"[c % 2], **({"cluster": clusters[c]} if clusters else {})} for c in range(4)]
        records.append({"round": r, "accuracy_weighted": accuracy + 0.01 * r, "clients": clients})
    return History(records, [0.0] * rounds, name="x")


def assert_round_ticks_are_whole(ax):
    ax.figure.canvas.draw()
    low, high = ax.get_xlim()
    ticks = [t for t in ax.get_xticks() if low <= t <= high]
    assert ticks and all(float(t).is_integer() for t in ticks), ticks


def assert_legend_outside(ax):
    ax.figure.canvas.draw()
    legend = ax.get_legend()
    assert legend is not None
    renderer = ax.figure.canvas.get_renderer()
    box, area = legend.get_window_extent(renderer), ax.get_window_extent(renderer)
    assert box.x0 >= area.x1 - 1 or box.x1 <= area.x0 + 1 or box.y0 >= area.y1 - 1 or box.y1 <= area.y0 + 1, (box, area)


@pytest.mark.parametrize("rounds", [2, 3, 7])
def test_plot_accuracy_rounds_title_legend(rounds):
    from fedlearn_nb.reporting import plot_accuracy
    ax = plot_accuracy({"FedAvg": [history(rounds, 0.5)], "FedCCL": [history(rounds, 0.6)]}, title="Figure 3: accuracy per round")
    assert_round_ticks_are_whole(ax)
    assert ax.get_title() == "Figure 3: accuracy per round" and ax.get_xlabel() == "round"
    assert_legend_outside(ax)
    plt.close(ax.figure)


def test_plot_cluster_identities_rounds_and_title():
    from fedlearn_nb.algorithms.ifca import plot_cluster_identities
    ax = plot_cluster_identities(history(3, 0.5, clusters=[0, 1, 0, 1]))
    assert_round_ticks_are_whole(ax)
    assert ax.get_title() and ax.get_xlabel().startswith("round")
    plt.close(ax.figure)


def test_every_legend_in_the_chapters_and_paper_notebooks_sits_outside_the_axes():
    "A legend drawn by a chapter or a paper notebook is anchored outside its axes (bbox_to_anchor), never over the data."
    import json, re
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    inside = []
    for path in sorted([*root.glob("nbs/*.ipynb"), *root.glob("papers/*.ipynb")]):
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] != "code": continue
            for call in re.findall(r"\.legend\((.*)", "".join(cell["source"])):
                if "bbox_to_anchor" not in call: inside.append(f"{path.name}: .legend({call[:60]}")
    assert not inside, inside
