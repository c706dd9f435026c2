"The documentation builder without a browser: failures during a build, the command line, the project's own config."
import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

import yaml

from fedlearn_nb.tools.docs import build_site, check_output_cache, make_example_project, read_sidebar, write_notebook

ROOT = Path(__file__).resolve().parents[1]


def test_a_chapter_that_fails_to_execute_still_gets_its_page(tmp_path):
    project = make_example_project(tmp_path / "demo")
    write_notebook(project / "nbs" / "01_plots.ipynb", [
        {"cell_type": "markdown", "source": "# Plots\n\n> Broken."},
        {"cell_type": "code", "source": "x = 1\nprint('ran')"},
        {"cell_type": "code", "source": "1/0"}])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = build_site(project, tmp_path / "site", execute=True, jobs=2)  # two kernels at once
    page = report.page("nbs/01_plots.ipynb")
    assert page.executed == "failed" and page.notes
    assert report.page("nbs/00_shapes.ipynb").executed == "yes"
    html = (tmp_path / "site" / "plots.html").read_text()
    assert "executing it for the docs failed" in html and "ZeroDivisionError" in html
    assert any("01_plots.ipynb: executing it for the docs failed" in w for w in report.warnings)
    assert (tmp_path / "site" / "shapes.html").is_file()  # the rest of the site is built


def test_command_line_help_and_errors(tmp_path):
    run = lambda *args: subprocess.run([sys.executable, "-m", "fedlearn_nb.tools.docs", *args], capture_output=True, text=True,
                                       timeout=300, cwd=tmp_path)
    help_text = run("--help")
    assert help_text.returncode == 0 and "--execute-only" in help_text.stdout and "_quarto.yml" in help_text.stdout
    missing = run("--path", str(tmp_path))
    assert missing.returncode == 1 and "no pyproject.toml" in missing.stderr
    quarto = run("--path", str(tmp_path), "--engine", "quarto")
    assert quarto.returncode == 1 and ("quarto is not installed" in quarto.stderr or "pyproject.toml" in quarto.stderr)


def test_the_projects_sidebar_has_the_agreed_sections():
    title, sections = read_sidebar(ROOT / "_quarto.yml")
    assert title == "fedlearn_nb"
    assert [s.title for s in sections] == [None, "Foundations", "Clustering", "Losses", "Algorithms", "Papers", "Tools", "Reference"]
    tools = next(s for s in sections if s.title == "Tools")
    assert {e.source for e in tools.walk()} >= {"nbs/90_docs.ipynb", "nbs/91_runner.ipynb", "nbs/93_flower.ipynb", "nbs/94_main.ipynb"}
    config = yaml.safe_load((ROOT / "_quarto.yml").read_text())
    assert config["project"]["type"] == "website" and config["format"]["html"]["css"] == "styles.css"
    assert (ROOT / "styles.css").is_file()
    listed = {e.source for s in sections for e in s.walk()}
    chapters = {p.relative_to(ROOT).as_posix() for p in (ROOT / "nbs").glob("*.ipynb") if not p.name.startswith("_")}
    assert not chapters - listed, f"chapters missing from the sidebar of _quarto.yml: {sorted(chapters - listed)}"


def test_the_command_shows_progress_and_no_kernel_warning(tmp_path):
    "fedlearn-docs: a progress bar over executions and pages, and no 'running over TCP without encryption' from the kernels."
    project = make_example_project(tmp_path / "demo")
    result = subprocess.run([sys.executable, "-m", "fedlearn_nb.tools.docs", "--path", str(project), "--dest", str(tmp_path / "site")],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "executing chapters: 100%" in result.stderr and "2/2" in result.stderr   # both chapters of the example executed
    assert "building pages: 100%" in result.stderr
    assert "without encryption" not in result.stderr + result.stdout and "IPKernelApp" not in result.stderr
    quiet = subprocess.run([sys.executable, "-m", "fedlearn_nb.tools.docs", "--path", str(project), "--dest", str(tmp_path / "site"),
                            "--no-progress"], capture_output=True, text=True, timeout=600)
    assert quiet.returncode == 0 and "building pages" not in quiet.stderr


def test_the_site_ships_its_math_renderer(tmp_path):
    "Pages load MathJax from the site itself (a copy of the installed bundle), never from another host."
    from fedlearn_nb.tools.docs import MATHJAX_FILE, mathjax_bundle
    project = make_example_project(tmp_path / "demo")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        build_site(project, tmp_path / "site", execute=False)
    assert (tmp_path / "site" / MATHJAX_FILE).read_bytes() == mathjax_bundle().read_bytes()
    page = (tmp_path / "site" / "papers" / "alpha.html").read_text()
    assert f'src="../{MATHJAX_FILE}"' in page and "cdn" not in page.lower()


# an absolute POSIX path (/home/..., /work/...) or a Windows drive; not a relative path, a URL, a ratio or base64
ABSOLUTE_PATH = re.compile(r"(?<![\w.:/+=<>~*%&-])/[A-Za-z_][\w.-]*/[\w.-]+|(?<!\w)[A-Za-z]:\\\\+[A-Za-z]")


def _published_text(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".ipynb": return text
    notebook = json.loads(text)  # figures are base64, which is full of slashes: left out
    for cell in notebook.get("cells", []):
        for output in cell.get("outputs", []):
            for kind in [k for k in output.get("data", {}) if k.startswith("image/")]: del output["data"][kind]
    return json.dumps(notebook)


def test_no_committed_result_names_a_machines_path():
    "papers/results is published (the site shows it): no absolute path of the machine a run was made on."
    assert ABSOLUTE_PATH.search("not found at /work/shared/data/svhn") and ABSOLUTE_PATH.search('"C:\\\\Users\\\\me"')
    assert not ABSOLUTE_PATH.search("not in the data folder (svhn) at 12.5 img/s, see papers/results/x.csv or https://x.org/a/b")
    found = {}
    for path in sorted((ROOT / "papers" / "results").rglob("*")):
        if path.is_file() and path.suffix in (".csv", ".json", ".md", ".ipynb", ".txt"):
            hits = ABSOLUTE_PATH.findall(_published_text(path))
            if hits: found[path.relative_to(ROOT).as_posix()] = sorted(set(hits))[:3]
    assert not found, f"{len(found)} committed result files name absolute paths, e.g. {dict(list(found.items())[:5])}"


def test_the_chapters_figure_cache_is_neither_missing_nor_stale():
    "Every chapter that draws has its figures in nbs/_outputs for builds that do not execute it, cached from its current cells."
    problems = check_output_cache(ROOT)
    assert problems == [], "\n".join(problems)
    size = sum(p.stat().st_size for p in (ROOT / "nbs" / "_outputs").rglob("*") if p.is_file())
    assert size < 2_000_000, f"nbs/_outputs holds {size / 1024:.0f} KB: keep the committed figures small"


def test_every_notebook_opens_with_the_python3_kernel():
    "JupyterLab asks for a kernel when a notebook names none: every chapter and paper notebook names python3, as nbdev-clean keeps it."
    notebooks = sorted((ROOT / "nbs").glob("*.ipynb")) + sorted((ROOT / "papers").glob("*.ipynb"))
    assert len(notebooks) > 50
    wrong = {p.relative_to(ROOT).as_posix(): json.loads(p.read_text(encoding="utf-8"))["metadata"].get("kernelspec") for p in notebooks}
    wrong = {name: spec for name, spec in wrong.items()
             if not spec or spec.get("name") != "python3" or spec.get("language") != "python"}
    assert not wrong, f"{len(wrong)} notebooks without the python3 kernelspec, e.g. {dict(list(wrong.items())[:3])}"
