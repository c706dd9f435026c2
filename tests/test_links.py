"""Every link leads somewhere: README.md's relative links work when read on the repository, and the built site's
links (text, files, #anchors) all resolve, with nothing loaded from another host."""
import subprocess
import sys
from pathlib import Path

from fedlearn_nb.tools.docs import build_site, check_markdown_links, check_site_links, make_example_project

ROOT = Path(__file__).resolve().parents[1]


def test_readme_links_work_on_the_repository():
    readme = ROOT / "README.md"
    assert check_markdown_links(readme, ROOT) == []
    assert readme.read_text().count("](nbs/") > 40  # the chapter links are there, relative to the repository root


def test_the_example_site_links_resolve(tmp_path):
    project = make_example_project(tmp_path / "demo")
    build_site(project, tmp_path / "site", execute=True)
    assert check_site_links(tmp_path / "site") == []


def test_the_project_site_links_resolve(tmp_path):
    "The project's site (chapters with their committed outputs, papers, API reference): no dead or empty link."
    result = subprocess.run([sys.executable, "-m", "fedlearn_nb.tools.docs", "--path", str(ROOT), "--dest", str(tmp_path / "site"),
                             "--no-execute", "--no-progress"], capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    problems = check_site_links(tmp_path / "site")
    assert problems == [], f"{len(problems)} link problems, e.g.\n" + "\n".join(problems[:20])
    api = (tmp_path / "site" / "api.html").read_text()
    assert api.count("<dt") > 100  # the API reference was checked, with its links into the chapters
