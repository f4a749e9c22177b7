"""Which lib modules each notebook runs, as make prerequisites, so a change reruns only the notebooks it reaches (Makefile).

  python -m lib.notebook_deps OUT.mk NB.ipynb ...

A notebook's modules are those its code cells import from lib, then those these import, and so on, found in the
syntax tree (imports inside functions count too, whether the function runs or not), plus lib/__init__.py, which
every import of lib runs; its rule adds the modules of the runner, lib.notebooks. No lib module imports another by
a computed name (tests/test_notebook_deps.py checks), so the tree shows every one. Standard library only: make runs
this with the system Python, before .venv exists.
"""
from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

from . import paths

LIB = Path(__file__).resolve().parent
PACKAGE = LIB.name
RUNNER = "notebooks"        # lib.notebooks runs every notebook (make figures): its modules are everyone's


def lib_imports(source: str, package_relative: bool = False) -> set[str]:
    """Names of the lib modules a piece of code imports anywhere in it ('from .x', when package_relative)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[1] for a in node.names if a.name.startswith(PACKAGE + ".")}
        elif isinstance(node, ast.ImportFrom):
            relative = node.level == 1 and package_relative
            if relative or (node.level == 0 and node.module and node.module.split(".")[0] == PACKAGE):
                parts = (node.module or "").split(".")[0 if relative else 1:]
                # 'from lib.x import f' and 'from .x import f' read x; 'from lib import x' and 'from . import x' read x
                found |= {parts[0]} if parts and parts[0] else {a.name for a in node.names}
    return {m for m in found if (LIB / f"{m}.py").is_file()}


def module_imports(module: str) -> set[str]:
    """The lib modules one lib module imports (relative or absolute)."""
    return lib_imports((LIB / f"{module}.py").read_text(), package_relative=True)


def closure(modules: set[str], imports=module_imports) -> set[str]:
    """`modules` and every lib module they import, directly or through others."""
    seen, todo = set(), list(modules)
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo += imports(m) - seen
    return seen


# IPython cell magics whose cell body is still Python (the others run bash, HTML, a file write, ...)
PYTHON_CELL_MAGICS = {"time", "timeit", "capture", "prun", "debug"}


def notebook_code(notebook: Path) -> str:
    """The Python of a notebook's code cells as one source: % and ! lines left out, and cells of other languages."""
    cells = ["".join(c["source"]) for c in json.loads(Path(notebook).read_text())["cells"] if c["cell_type"] == "code"]
    python = [cell for cell in cells if not cell.lstrip().startswith("%%")
              or (cell.lstrip()[2:].split() or [""])[0] in PYTHON_CELL_MAGICS]
    return "\n".join(line for cell in python for line in cell.splitlines() if not line.lstrip().startswith(("%", "!")))


def notebook_modules(notebook: Path) -> list[str]:
    """Paths (lib/NAME.py) of every lib module a notebook runs, lib/__init__.py first."""
    names = closure(lib_imports(notebook_code(notebook)))
    return [f"{PACKAGE}/__init__.py"] + [f"{PACKAGE}/{m}.py" for m in sorted(names - {"__init__"})]


def make_rules(notebooks: list[Path]) -> str:
    """One make rule per notebook: build/notebooks/NAME.ipynb depends on the lib modules it and the runner use."""
    runner = [f"{PACKAGE}/{m}.py" for m in sorted(closure({RUNNER}))]
    return "".join(f"build/notebooks/{Path(nb).name}: {' '.join(dict.fromkeys(notebook_modules(nb) + runner))}\n"
                   for nb in notebooks)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2:
        print("usage: python -m lib.notebook_deps OUT.mk NB.ipynb ...", file=sys.stderr)
        return 2
    out, notebooks = Path(args[0]), [Path(a) for a in args[1:]]
    for nb in notebooks:
        try:
            notebook_modules(nb)
        except (OSError, ValueError, KeyError, SyntaxError) as e:   # missing, not JSON, no cells, bad code
            print(f"error: {nb}: {type(e).__name__}: {e}", file=sys.stderr)
            return 2
    out.parent.mkdir(parents=True, exist_ok=True)
    paths.write_atomic(out, lambda tmp: tmp.write_text(make_rules(notebooks)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
