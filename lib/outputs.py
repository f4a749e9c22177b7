"""Maps: of figures/ (figures/INDEX.md: which notebook and section writes each table and figure), and of the long
notebooks (their tables of contents).

    python -m lib.outputs            write figures/INDEX.md from the notebooks' source (`make figures` runs it)
    python -m lib.outputs --check    exit 1 if INDEX.md is stale, a file in figures/ has no writer (or a writer no
                                     file), or a notebook's table of contents is stale
    python -m lib.outputs --contents rewrite the table of contents of each notebook that has one (a markdown cell with
                                     the id `contents`; notebooks 04 and 05): one linked line per ## and ### heading

A writer is a call save_table(df, "<name>") or save_figure(fig, "<name>") (lib.plotting) in a notebook's code cell, with
the name as a literal: figures/tables/<name>.csv and figures/<name>.png. Its section is the last markdown heading above
it, under the last heading one level up ("## A > ### B"). Nothing is executed: the index reads source only.
"""
from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

import pandas as pd

from . import paths
from .cli import Parser

WRITERS = {"save_table": "tables/{}.csv", "save_figure": "{}.png"}
# figures/ files written by lib code rather than a notebook: {file: (writer, section)}
OTHER_WRITERS = {"tables/bench.csv": ("`make bench` (lib.bench)", "speed targets")}
INDEX_NAME = "INDEX.md"
HEADING = re.compile(r"^(#{1,6})\s+(.*\S)\s*$")
MAGIC = re.compile(r"^\s*[%!]")   # IPython line magics and shell escapes: not Python
CONTENTS_ID = "contents"   # the id of the markdown cell that holds a notebook's table of contents
CONTENTS_TITLE = "**Contents**"   # bold, not a heading: the table lists no entry for itself
CONTENTS_LEVELS = (2, 3)


class OutputsError(ValueError):
    """A notebook whose writers cannot be read (not a literal name, not Python); names the notebook and cell."""


def _writer_names(source: str, where: str) -> list[tuple[str, str]]:
    """(writer, name) of each save_table / save_figure call in one code cell's source, in order."""
    code = "\n".join("" if MAGIC.match(line) else line for line in source.splitlines())
    try:
        tree = ast.parse(code)
    except SyntaxError as e:
        raise OutputsError(f"{where}: not Python ({e.msg}, line {e.lineno})") from None
    found = []
    for node in ast.walk(tree):
        func = getattr(node, "func", None)
        writer = getattr(func, "id", None) or getattr(func, "attr", None)
        if not isinstance(node, ast.Call) or writer not in WRITERS:
            continue
        name = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "name"), None)
        if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
            raise OutputsError(f"{where}: {writer} needs its name as a literal string for figures/{INDEX_NAME}")
        found.append((node.lineno, node.col_offset, writer, name.value))
    return [(w, n) for *_, w, n in sorted(found)]


def notebook_headings(cells: list[dict]) -> list[tuple[int, int, str]]:
    """(cell index, level, text) of every markdown heading of a notebook's cells, in order."""
    found = []
    for i, cell in enumerate(cells):
        if cell.get("cell_type") != "markdown":
            continue
        fenced = False   # inside a ``` or ~~~ code block, where a '# ' line is code, not a heading
        for line in "".join(cell.get("source", [])).splitlines():
            if line.lstrip().startswith(("```", "~~~")):
                fenced = not fenced
            m = None if fenced else HEADING.match(line)
            if m:
                found.append((i, len(m.group(1)), m.group(2)))
    return found


def read_cells(path: Path) -> list[dict]:
    """A notebook's cells; an OutputsError naming the file if it is not a notebook."""
    try:
        return json.loads(Path(path).read_text())["cells"]
    except (OSError, ValueError, KeyError) as e:
        raise OutputsError(f"{path}: not a notebook ({type(e).__name__}: {e})") from None


# Jupyter (JupyterLab, and nbconvert's HTML) gives a heading the id of its rendered text, each space made a '-':
#   id = text with inline code's backticks dropped, ' ' -> '-'
# Other markup (emphasis, links, escapes, entities, < >) renders otherwise, and [ ] < > would break the link itself.
OTHER_MARKUP = re.compile(r"[*_\[\]<>\\&]")


def heading_anchor(text: str) -> str:
    """The id Jupyter gives a markdown heading of this text: the link target `#id` (notebooks 04, 05)."""
    rendered = re.sub(r"`([^`]*)`", r"\1", text)
    if OTHER_MARKUP.search(re.sub(r"`[^`]*`", "", text)):
        raise OutputsError(f"heading {text!r}: markup other than `code` (one of * _ [ ] < > \\ &) cannot be linked to "
                           "from a table of contents; reword it")
    return rendered.replace(" ", "-")


def contents(cells: list[dict]) -> str:
    """The table of contents of a notebook's cells: one linked line per ## heading, its ### headings indented."""
    lines = [CONTENTS_TITLE, ""]
    for _, level, text in notebook_headings(cells):
        if level in CONTENTS_LEVELS:
            # <...> lets a link target hold the parentheses many headings have
            lines.append("  " * (level - CONTENTS_LEVELS[0]) + f"- [{text}](<#{heading_anchor(text)}>)")
    return "\n".join(lines)


def stale_contents(path: Path) -> str | None:
    """The table of contents the notebook at path should have, if its `contents` cell differs from it; else None."""
    cells = read_cells(path)
    cell = next((c for c in cells if c.get("id") == CONTENTS_ID), None)
    if cell is None:
        return None
    if cell.get("cell_type") != "markdown":
        raise OutputsError(f"{path}: cell {CONTENTS_ID!r} must be a markdown cell")
    text = contents(cells)
    return None if "".join(cell.get("source", [])) == text else text


def write_contents(path: Path, text: str) -> None:
    """Replace the `contents` cell's source with text, in the notebooks' JSON layout (indent 1, UTF-8)."""
    nb = json.loads(Path(path).read_text())
    cell = next((c for c in nb["cells"] if c.get("id") == CONTENTS_ID), None)
    if cell is None:
        raise OutputsError(f"{path}: no cell {CONTENTS_ID!r} to write a table of contents into")
    cell["source"] = text.splitlines(keepends=True)
    paths.write_atomic(Path(path), lambda tmp: tmp.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n"))


def notebook_outputs(path: Path) -> pd.DataFrame:
    """One row per table or figure a notebook writes: file (under figures/), notebook, section, cell (its id)."""
    path = Path(path)
    cells = read_cells(path)
    by_cell: dict[int, list[tuple[int, str]]] = {}
    for i, level, text in notebook_headings(cells):
        by_cell.setdefault(i, []).append((level, text))
    headings: dict[int, str] = {}   # level -> text of the last heading at that level
    rows = []
    for i, cell in enumerate(cells):
        source = "".join(cell.get("source", []))
        for level, text in by_cell.get(i, []):
            headings = {k: v for k, v in headings.items() if k < level} | {level: text}
        if cell.get("cell_type") == "code":
            cell_id = str(cell.get("id", i))
            # the title (level 1) names the notebook; a section is the two deepest headings under it
            section = " > ".join([v for k, v in sorted(headings.items()) if k > 1][-2:])
            for writer, name in _writer_names(source, f"{path.name}, cell {cell_id}"):
                rows.append({"file": WRITERS[writer].format(name), "notebook": path.stem, "section": section,
                             "cell": cell_id})
    return pd.DataFrame(rows, columns=["file", "notebook", "section", "cell"])


def index_table(notebooks: list[Path] | None = None) -> pd.DataFrame:
    """notebook_outputs of every notebook (notebooks/*.ipynb in order), then OTHER_WRITERS; an error if two writers
    write one file."""
    notebooks = sorted(paths.ROOT.glob("notebooks/[0-9]*.ipynb")) if notebooks is None else notebooks
    other = pd.DataFrame([{"file": f, "notebook": w, "section": s, "cell": ""} for f, (w, s) in OTHER_WRITERS.items()])
    table = pd.concat([*map(notebook_outputs, notebooks), other], ignore_index=True)
    twice = table.loc[table["file"].duplicated(), "file"].tolist()
    if twice:
        raise OutputsError(f"written by more than one cell: {', '.join(sorted(set(twice)))}")
    return table


def unmatched(table: pd.DataFrame, figures: Path | None = None) -> tuple[list[str], list[str]]:
    """(files in figures/ (tables/*.csv, *.png) that no writer writes, writers whose file is not there)."""
    figures = figures or paths.FIGURES
    present = {p.relative_to(figures).as_posix() for p in [*figures.glob("*.png"), *figures.glob("tables/*.csv")]}
    indexed = set(table["file"])
    return sorted(present - indexed), sorted(indexed - present)


def render(table: pd.DataFrame) -> str:
    """figures/INDEX.md: one markdown table per notebook (file, section, cell)."""
    out = ["# What is in figures/", "",
           "Written by `python -m lib.outputs` from the notebooks' source (`make figures`); do not edit. Each table "
           "(`tables/*.csv`) and figure (`*.png`) with the notebook and section that write it, and the cell's id. "
           "`PROVENANCE.json` records the run; `predictors/` holds its trained models.", ""]
    for notebook, rows in table.groupby("notebook", sort=False):
        out += [f"## {notebook}", "", "| file | section | cell |", "|---|---|---|"]
        out += [f"| `{r.file}` | {r.section.replace('|', '/')} | {f'`{r.cell}`' if r.cell else ''} |"
                for r in rows.itertuples()]
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="python -m lib.outputs", description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true",
                      help="exit 1 if figures/INDEX.md is stale or incomplete, or a table of contents is stale")
    mode.add_argument("--contents", action="store_true",
                      help=f"rewrite the notebooks' tables of contents (their {CONTENTS_ID!r} cells), nothing else")
    args = parser.parse_args(argv)
    notebooks = sorted(paths.ROOT.glob("notebooks/[0-9]*.ipynb"))
    try:
        stale = {nb: text for nb in notebooks if (text := stale_contents(nb)) is not None}
        if args.contents:
            for nb, text in stale.items():
                write_contents(nb, text)
            print(f"tables of contents rewritten: {', '.join(nb.name for nb in stale) or 'none (all current)'}")
            return 0
        table = index_table(notebooks)
    except OutputsError as e:
        print(f"lib.outputs: {e}", file=sys.stderr)
        return 2
    text, target = render(table), paths.FIGURES / INDEX_NAME
    unwritten, missing = unmatched(table)
    problems = [f"{target}: no notebook writes {f}" for f in unwritten]
    problems += [f"{target}: {f} is written by a notebook but is not in figures/ (run make figures)" for f in missing]
    problems += [f"{nb}: its table of contents is stale: run python -m lib.outputs --contents" for nb in stale]
    if args.check:
        if not target.is_file() or target.read_text() != text:
            problems.insert(0, f"{target} is stale: run python -m lib.outputs")
        print("\n".join(problems) or f"{target}: current, {len(table)} files", file=sys.stderr if problems else sys.stdout)
        return 1 if problems else 0
    paths.write_atomic(target, lambda tmp: tmp.write_text(text))
    print(f"{target}: {len(table)} files" + "".join(f"\n  {p}" for p in problems))
    return 0


if __name__ == "__main__":
    sys.exit(main())
