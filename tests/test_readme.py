"README.md is generated from nbs/index.ipynb, and CI runs exactly the test command README gives."
import ast
import re
from pathlib import Path

from fedlearn_nb.tools.docs import project_readme

ROOT = Path(__file__).resolve().parents[1]


def _shell_commands(text: str) -> list[str]:
    return [block.strip() for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S)]


def test_readme_is_generated_from_index():
    assert (ROOT / "README.md").read_text() == project_readme(ROOT), (
        "README.md is out of date: run `fedlearn-docs --readme` and commit it")


def test_ci_runs_the_readme_test_command():
    commands = [c for c in _shell_commands((ROOT / "README.md").read_text()) if "pytest" in c]
    assert len(commands) == 1, commands
    test_command = commands[0].split("&&")[-1].strip()
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert test_command in ci_lines, f"`.ci/run` must run README's test command `{test_command}` as a line of its own"


def test_readme_main_job_is_a_paper_run_on_embedded_data():
    main_job = [c for c in _shell_commands((ROOT / "README.md").read_text()) if "fedlearn-repro run" in c]
    assert main_job and "--scale smoke" in main_job[0]


def _python_blocks(text: str) -> list[str]:
    return [block for block in re.findall(r"```python\n(.*?)```", text, flags=re.S)]


SHOWS = {"print", "savefig"}  # calls whose effect a script sees; any other bare expression is only displayed by Jupyter


def test_readme_python_shows_its_results_as_a_script():
    "Run as a script, the README's examples print their table and save their figure: a bare last expression (Jupyter's "
    "display) printed nothing. (tests/test_notebooks.py executes them, in nbs/index.ipynb.)"
    blocks = _python_blocks((ROOT / "README.md").read_text())
    assert blocks, "README.md has no python example"
    calls = set()
    for block in blocks:
        for statement in ast.parse(block).body:
            if not isinstance(statement, ast.Expr): continue
            called = statement.value.func if isinstance(statement.value, ast.Call) else None
            name = getattr(called, "attr", None) or getattr(called, "id", None)
            assert name in SHOWS | {"set_num_threads", "mkdir"}, (
                f"`{ast.unparse(statement)}` shows nothing when README's example runs as a script: print it or save it")
        calls |= {getattr(node.func, "attr", None) or getattr(node.func, "id", None) for node in ast.walk(ast.parse(block))
                  if isinstance(node, ast.Call)}
    assert {"print", "savefig"} <= calls


def test_readme_says_what_no_execute_builds_from():
    "`fedlearn-docs --no-execute` runs no code: README says its pages are the notebooks as committed."
    text = " ".join((ROOT / "README.md").read_text().split())
    assert "`fedlearn-docs --no-execute` runs no code: it uses the notebooks as committed" in text
