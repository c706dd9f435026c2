"""Every link leads somewhere: README.md's relative links work when read on the repository, and the built site's
links (text, files, #anchors) all resolve, with nothing loaded from another host."""
from pathlib import Path

import pytest

from fedlearn_nb.tools.docs import check_markdown_links, check_site_links

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.xdist_group("sites")  # the sites (conftest.py) are built once, shared with test_docs_site.py


def test_readme_links_work_on_the_repository():
    readme = ROOT / "README.md"
    assert check_markdown_links(readme, ROOT) == []
    assert readme.read_text().count("](nbs/") > 40  # the chapter links are there, relative to the repository root


def test_the_example_site_links_resolve(example_site):
    site, _ = example_site
    assert check_site_links(site) == []


def test_the_project_site_links_resolve(project_site):
    "The project's site (chapters with their committed outputs, papers, API reference): no dead or empty link."
    site, _ = project_site
    problems = check_site_links(site)
    assert problems == [], f"{len(problems)} link problems, e.g.\n" + "\n".join(problems[:20])
    api = (site / "api.html").read_text()
    assert api.count("<dt") > 100  # the API reference was checked, with its links into the chapters
