"""The suite's own layout: every test module with a module-scoped fixture carries an xdist group.

pytest runs with `--dist loadgroup` (pyproject.toml). Under `pytest -n 2` a module without a group has its tests
dealt to both workers, and a module fixture then runs once on each: a paper notebook's smoke run twice, a minute of
CI lost. See CONTRIBUTING.md.
"""
import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def module_scoped_fixtures(tree: ast.Module) -> list[str]:
    "Names of the functions decorated with `pytest.fixture(scope=\"module\")` in a parsed module."
    names = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef): continue
        for decorator in node.decorator_list:
            if isinstance(decorator, ast.Call) and ast.unparse(decorator.func) == "pytest.fixture" and any(
                    k.arg == "scope" and isinstance(k.value, ast.Constant) and k.value.value == "module"
                    for k in decorator.keywords):
                names.append(node.name)
    return names


def xdist_groups(tree: ast.Module) -> list[str]:
    "The group names given by `pytest.mark.xdist_group(...)` in the module's top-level `pytestmark`."
    groups = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            for call in ast.walk(node.value):
                if isinstance(call, ast.Call) and ast.unparse(call.func) == "pytest.mark.xdist_group" and call.args:
                    groups.append(ast.literal_eval(call.args[0]))
    return groups


def test_the_checks_read_fixtures_and_groups():
    tree = ast.parse('import pytest\npytestmark = [pytest.mark.skipif(False, reason="x"), pytest.mark.xdist_group("g")]\n'
                     '@pytest.fixture(scope="module")\ndef heavy(): pass\n@pytest.fixture\ndef light(): pass\n')
    assert module_scoped_fixtures(tree) == ["heavy"] and xdist_groups(tree) == ["g"]
    assert xdist_groups(ast.parse("import pytest\npytestmark = pytest.mark.slow\n")) == []


def test_every_module_with_a_module_fixture_has_an_xdist_group():
    missing = []
    for path in sorted(TESTS.glob("test_*.py")):
        tree = ast.parse(path.read_text())
        fixtures = module_scoped_fixtures(tree)
        if fixtures and not xdist_groups(tree): missing.append(f"{path.name} ({', '.join(fixtures)})")
    assert not missing, ("these modules have module fixtures but no `pytestmark = pytest.mark.xdist_group(...)`, so "
                         "`pytest -n 2` may run their fixtures once per worker: " + "; ".join(missing))
