"README.md is generated from nbs/index.ipynb, and CI runs exactly the test command README gives."
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
