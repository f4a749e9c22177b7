"""Which lib modules each notebook runs (lib.notebook_deps): the make prerequisites that decide what `make figures` reruns."""
import ast
import json
import subprocess
import sys

import pytest

from lib import notebook_deps as ND
from lib import paths

NOTEBOOKS = sorted((paths.ROOT / "notebooks").glob("[0-9]*.ipynb"))


def test_lib_imports_reads_every_form_of_import_anywhere_in_the_code():
    code = """
import numpy as np
import lib.paths
import lib.tiles as T
from lib import data, plotting, PAPER_THING
from lib.kernels import predict
from lib.nonexistent import x
def later():
    from lib.forecast import forecast   # inside a function: counts, whether it runs or not
"""
    assert ND.lib_imports(code) == {"paths", "tiles", "data", "plotting", "kernels", "forecast"}
    relative = "from . import paths\nfrom .graph import load_config\nfrom .cli import Parser\nimport os\n"
    assert ND.lib_imports(relative, package_relative=True) == {"paths", "graph", "cli"}
    assert ND.lib_imports(relative) == set()        # in a notebook, 'from .' is no import of lib


def test_notebook_code_leaves_out_ipython_magics(tmp_path):
    nb = tmp_path / "nb.ipynb"
    cells = [{"cell_type": "code", "source": ["%%bash\n", "echo from lib import forecast\n"]},
             {"cell_type": "markdown", "source": ["from lib import graph"]},
             {"cell_type": "code", "source": ["%matplotlib inline\n", "!ls\n", "from lib import tiles\n"]},
             {"cell_type": "code", "source": ["%%time\n", "import lib.paths\n"]},    # a Python cell magic
             {"cell_type": "code", "source": ["%%capture\n", "if True:\n", "    !pip list\n", "    import lib.paths\n"]}]
    nb.write_text(json.dumps({"cells": cells}))
    # an indented shell escape is no Python either; %%capture's body is
    assert ND.notebook_code(nb) == "from lib import tiles\nimport lib.paths\nif True:\n    import lib.paths"
    assert ND.notebook_modules(nb) == ["lib/__init__.py"] + [f"lib/{m}.py" for m in sorted(ND.closure({"tiles", "paths"}))]


def test_closure_follows_imports_through_other_modules():
    graph = {"a": {"b"}, "b": {"c", "a"}, "c": set(), "d": {"a"}}
    assert ND.closure({"a"}, graph.__getitem__) == {"a", "b", "c"}
    assert ND.closure({"d"}, graph.__getitem__) == {"a", "b", "c", "d"}
    assert ND.closure(set(), graph.__getitem__) == set()
    assert "paths" in ND.closure({"profile"}) and "profile_ops" in ND.closure({"profile"})


def test_each_notebook_reaches_the_modules_it_runs_and_not_others():
    mods = {nb.stem[:2]: set(ND.notebook_modules(nb)) for nb in NOTEBOOKS}
    assert all(m[0] == "lib/__init__.py" for m in map(ND.notebook_modules, NOTEBOOKS))
    assert "lib/profile_all.py" in mods["01"] and "lib/forecast.py" in mods["05"]
    collectors = {f"lib/{m}.py" for m in ("profile", "profile_all", "profile_model", "profile_ops")}
    assert collectors <= mods["01"]
    assert not any(collectors & m for k, m in mods.items() if k != "01")   # README: an edit of them reruns 01 alone
    assert "lib/notebook_deps.py" not in set().union(*mods.values())


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem[:2])
def test_the_modules_python_loads_for_a_notebooks_imports_are_all_listed(notebook):
    # Python's own import machinery as the reference: run the notebook's import statements in a fresh interpreter
    # and list the lib modules it loaded (what a notebook only imports inside a cell's function is not seen here)
    tree = ast.parse(ND.notebook_code(notebook))
    imports = "\n".join(ast.unparse(n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom)))
    probe = imports + "\nimport sys\nprint(' '.join(sorted(m for m in sys.modules if m.startswith('lib.'))))"
    out = subprocess.run([sys.executable, "-c", probe], cwd=paths.ROOT, capture_output=True, text=True, check=True)
    loaded = {f"lib/{m.split('.')[1]}.py" for m in out.stdout.split()}
    assert loaded and loaded <= set(ND.notebook_modules(notebook))


def test_no_lib_module_imports_another_by_a_computed_name():
    # importlib.import_module / __import__ with a lib name would hide a dependency from the syntax tree
    for path in sorted((paths.ROOT / "lib").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                    "import_module", "__import__"):
                target = ast.unparse(node.args[0]) if node.args else ""
                assert "lib" not in target and not target.strip("f'\"").startswith("."), f"{path.name}: {target}"


def test_the_command_writes_one_rule_per_notebook_and_names_a_broken_notebook(tmp_path, capsys):
    out = tmp_path / "sub" / "deps.mk"
    assert ND.main([str(out), *map(str, NOTEBOOKS)]) == 0
    rules = out.read_text().splitlines()
    assert [r.split(":")[0] for r in rules] == [f"build/notebooks/{nb.name}" for nb in NOTEBOOKS]
    for nb, rule in zip(NOTEBOOKS, rules):   # the notebook's modules, then the runner's (lib.notebooks) not yet listed
        listed = rule.split(": ")[1].split()
        assert listed[:len(ND.notebook_modules(nb))] == ND.notebook_modules(nb) and len(listed) == len(set(listed))
        assert {"lib/notebooks.py", "lib/reference_weights.py"} <= set(listed)
    broken = tmp_path / "broken.ipynb"
    broken.write_text(json.dumps({"cells": [{"cell_type": "code", "source": ["x = (\n"]}]}))
    assert ND.main([str(out), str(broken)]) == 2
    assert f"error: {broken}: SyntaxError" in capsys.readouterr().err
    assert out.read_text().splitlines() == rules          # the earlier file stands: nothing half-written
    assert ND.main([str(out)]) == 2
