"""The status page's method orderings: every committed table whose ordering differs from the paper's says why, in one of
the five categories, and every number its evidence quotes is in the paper notebook it comes from; the README's table
is the committed runs' (regenerate it with `ordering_markdown(ordering_agreement())`)."""
import json
import re
from pathlib import Path

from fedlearn_nb.tools.status import ORDERING_REASONS, REASON_CATEGORIES, ordering_agreement, ordering_markdown

ROOT = Path(__file__).resolve().parents[1]


def notebook_text(paper: str) -> str:
    "The markdown of papers/<paper>.ipynb, where the readings of the tables live."
    cells = json.loads((ROOT / "papers" / f"{paper}.ipynb").read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def test_every_disagreement_has_a_reason_in_a_known_category():
    agreement = ordering_agreement()
    assert len(agreement) >= 10                                                    # the committed runs have orderings to compare
    differing = agreement[agreement.ordering != "agrees"]
    assert not (differing["why it differs"] == "no reason recorded").any(), differing[["paper", "table", "spearman"]]
    assert (agreement[agreement.ordering == "agrees"]["why it differs"] == "").all()
    for reasons in ORDERING_REASONS.values():
        assert reasons and all(category in REASON_CATEGORIES for category, _ in reasons)


def test_every_quoted_number_is_in_the_notebooks_reading():
    "A reason is backed by the notebook's measured evidence: each number it quotes appears in that paper's notebook text."
    for (paper, table), reasons in ORDERING_REASONS.items():
        text = notebook_text(paper).replace("−", "-")
        for category, evidence in reasons:
            for number in re.findall(r"\d+(?:[.,]\d+)*", evidence):
                assert number in text, f"{paper} Table {table} ({category}): {number} is not in papers/{paper}.ipynb"


def test_readme_shows_the_committed_orderings():
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- ordering -->\n(.*?)\n<!-- /ordering -->", readme, re.S)
    assert block, "README.md has no <!-- ordering --> table"
    expected = ordering_markdown(ordering_agreement())
    assert block.group(1) == expected, ("README's ordering table differs from the committed runs; paste the output of "
                                        "python -c 'from fedlearn_nb.tools.status import *; print(ordering_markdown(ordering_agreement()))'")
