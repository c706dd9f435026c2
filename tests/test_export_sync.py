"The exported library must be in sync with the notebooks: exporting again changes nothing."
import filecmp
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _python_files(folder: Path) -> dict[str, Path]:
    return {str(p.relative_to(folder)): p for p in folder.rglob("*.py") if "__pycache__" not in p.parts}


def test_library_matches_notebooks(tmp_path):
    for name in ("pyproject.toml", "settings.ini"): shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "nbs", tmp_path / "nbs", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    shutil.copytree(ROOT / "fedlearn_nb", tmp_path / "fedlearn_nb", ignore=shutil.ignore_patterns("__pycache__"))
    # the nbdev-export script beside this interpreter (a `python -c` main would be re-run by child processes)
    export = [shutil.which("nbdev-export", path=str(Path(sys.executable).parent)) or shutil.which("nbdev-export")]
    result = subprocess.run(export, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    committed, exported = _python_files(ROOT / "fedlearn_nb"), _python_files(tmp_path / "fedlearn_nb")
    assert sorted(committed) == sorted(exported), "modules differ: run nbdev-export and commit fedlearn_nb/"
    stale = [name for name in committed if not filecmp.cmp(committed[name], exported[name], shallow=False)]
    assert not stale, f"fedlearn_nb/ is out of sync with nbs/ in {stale}: run nbdev-export and commit both"
