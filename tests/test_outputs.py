"""lib.outputs: the map of figures/ (figures/INDEX.md), read from the notebooks' source."""
import json

import pytest

from lib import outputs


def _notebook(tmp_path, cells, name="09-demo.ipynb"):
    """A notebook file of (cell_type, source, id) cells."""
    path = tmp_path / name
    path.write_text(json.dumps({"cells": [{"cell_type": t, "source": s, "id": i, "metadata": {}} for t, s, i in cells],
                                "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path


def test_sections_and_writers_by_hand(tmp_path):
    nb = _notebook(tmp_path, [
        ("markdown", "# 09 Demo\nintro", "t"),
        ("code", "%matplotlib inline\nsave_table(df, 'early')", "c0"),
        ("markdown", "## Alpha\ntext\n### Beta", "m1"),
        ("code", "fig = plot()\nplotting.save_figure(\n    fig,\n    'beta-fig')\nsave_table(x, name='beta')", "c1"),
        ("markdown", "#### Gamma", "m2"),
        ("code", "save_table(y, 'gamma')", "c2"),
        ("markdown", "## Delta", "m3"),
        ("code", "print('no writer'); save_tables(z, 'not-a-writer')", "c3"),
        ("code", "save_figure(fig, 'delta', show=False)", "c4"),
    ])
    got = outputs.notebook_outputs(nb)
    assert got.to_dict("records") == [
        {"file": "tables/early.csv", "notebook": "09-demo", "section": "", "cell": "c0"},
        {"file": "beta-fig.png", "notebook": "09-demo", "section": "Alpha > Beta", "cell": "c1"},
        {"file": "tables/beta.csv", "notebook": "09-demo", "section": "Alpha > Beta", "cell": "c1"},
        # the two deepest headings under the title
        {"file": "tables/gamma.csv", "notebook": "09-demo", "section": "Beta > Gamma", "cell": "c2"},
        # a new "##" closes "###" and "####"
        {"file": "delta.png", "notebook": "09-demo", "section": "Delta", "cell": "c4"},
    ]


def test_a_hash_line_in_a_fenced_code_block_is_no_heading(tmp_path):
    nb = _notebook(tmp_path, [
        ("markdown", "# 09 Demo\n## Results\n```bash\n# run this first\n```\n~~~\n## nor this\n~~~", "m"),
        ("code", "save_table(df, 'r')", "c"),
    ])
    assert outputs.notebook_outputs(nb)["section"].tolist() == ["Results"]


def test_a_name_that_is_not_a_literal_is_an_error_naming_the_cell(tmp_path):
    nb = _notebook(tmp_path, [("code", "name = 'x'\nsave_table(df, name)", "bad-cell")])
    with pytest.raises(outputs.OutputsError, match=r"09-demo.ipynb, cell bad-cell: save_table needs its name"):
        outputs.notebook_outputs(nb)


def test_bad_notebooks_are_errors_naming_the_file(tmp_path):
    broken = tmp_path / "10-broken.ipynb"
    broken.write_text("{not json")
    with pytest.raises(outputs.OutputsError, match="10-broken.ipynb: not a notebook"):
        outputs.notebook_outputs(broken)
    with pytest.raises(outputs.OutputsError, match="cell 3: not Python"):
        outputs.notebook_outputs(_notebook(tmp_path, [("code", "def f(:", "3")]))


def test_one_file_written_twice_is_an_error(tmp_path):
    a = _notebook(tmp_path, [("code", "save_table(df, 'same')", "a")], "09-a.ipynb")
    b = _notebook(tmp_path, [("code", "save_table(df, 'same')", "b")], "09-b.ipynb")
    with pytest.raises(outputs.OutputsError, match="more than one cell: tables/same.csv"):
        outputs.index_table([a, b])


def test_unmatched_both_ways(tmp_path):
    nb = _notebook(tmp_path, [("code", "save_table(df, 'kept')\nsave_figure(fig, 'gone')", "c")])
    table = outputs.index_table([nb])
    figures = tmp_path / "figures"
    (figures / "tables").mkdir(parents=True)
    for f in ["tables/kept.csv", "tables/bench.csv", "stray.png", "PROVENANCE.json"]:
        (figures / f).write_text("x")
    assert outputs.unmatched(table, figures) == (["stray.png"], ["gone.png"])


def test_render_by_hand(tmp_path):
    nb = _notebook(tmp_path, [("markdown", "# T\n## A | B", "m"), ("code", "save_table(df, 'x')", "c")])
    text = outputs.render(outputs.index_table([nb]))
    assert "## 09-demo\n\n| file | section | cell |\n|---|---|---|\n| `tables/x.csv` | A / B | `c` |\n" in text
    assert "## `make bench` (lib.bench)\n\n| file | section | cell |\n|---|---|---|\n| `tables/bench.csv` | speed targets |  |" in text


def test_committed_index_is_current_and_complete():
    assert outputs.main(["--check"]) == 0, "figures/INDEX.md is stale or incomplete: run `python -m lib.outputs`"


def test_heading_anchor_by_hand():
    # Jupyter's heading id: the rendered text (inline code loses its backticks), spaces made '-'
    assert outputs.heading_anchor("Protocol amendment 3 (batch 256; `lib.selection`)") == \
        "Protocol-amendment-3-(batch-256;-lib.selection)"
    assert outputs.heading_anchor("Twice the work, a faster kernel?") == "Twice-the-work,-a-faster-kernel?"
    assert outputs.heading_anchor("`f_fill` and `a*b`") == "f_fill-and-a*b"   # inside code, markup is text
    for heading in ("An *emphasis*", "snake_case", "a [link](x)", "a < b", "x \\ y", "R&D"):
        with pytest.raises(outputs.OutputsError, match="cannot be linked to"):
            outputs.heading_anchor(heading)


def test_contents_by_hand(tmp_path):
    nb = _notebook(tmp_path, [
        ("markdown", "# 09 Demo\nintro", "t"),
        ("markdown", "stale", "contents"),
        ("markdown", "## Alpha (a)\ntext\n### Beta `b`\n#### Too deep", "m1"),
        ("markdown", "```\n## not a heading\n```\n## Delta", "m2"),
    ])
    want = ("**Contents**\n\n- [Alpha (a)](<#Alpha-(a)>)\n  - [Beta `b`](<#Beta-b>)\n- [Delta](<#Delta>)")
    assert outputs.contents(outputs.read_cells(nb)) == want
    assert outputs.stale_contents(nb) == want
    before = json.loads(nb.read_text())
    outputs.write_contents(nb, want)
    assert outputs.stale_contents(nb) is None
    after = json.loads(nb.read_text())
    assert "".join(after["cells"][1]["source"]) == want
    # only the contents cell changed, and the file keeps the notebooks' layout
    assert [c for i, c in enumerate(after["cells"]) if i != 1] == [c for i, c in enumerate(before["cells"]) if i != 1]
    assert nb.read_text() == json.dumps(after, indent=1, ensure_ascii=False) + "\n"


def test_a_notebook_without_contents_has_none_and_a_code_cell_named_contents_is_an_error(tmp_path):
    without = _notebook(tmp_path, [("markdown", "## A", "m")], "09-a.ipynb")
    assert outputs.stale_contents(without) is None
    with pytest.raises(outputs.OutputsError, match=r"09-a.ipynb: no cell 'contents'"):
        outputs.write_contents(without, "**Contents**")
    with pytest.raises(outputs.OutputsError, match=r"09-b.ipynb: cell 'contents' must be a markdown cell"):
        outputs.stale_contents(_notebook(tmp_path, [("code", "x = 1", "contents")], "09-b.ipynb"))


@pytest.mark.parametrize("name", ["04-per-op-evaluation", "05-end-to-end"])
def test_the_long_notebooks_have_a_current_table_of_contents(name):
    path = outputs.paths.ROOT / "notebooks" / f"{name}.ipynb"
    cells = outputs.read_cells(path)
    assert [c.get("id") for c in cells].index(outputs.CONTENTS_ID) == 1, f"{name}: the contents cell follows the title"
    assert outputs.stale_contents(path) is None, f"{name}: run python -m lib.outputs --contents"


def test_shell_escapes_and_magics_are_not_python():
    assert outputs._writer_names("!pip list\n%time x = 1\nsave_table(d, 'a')", "cell") == [("save_table", "a")]


def test_check_fails_on_each_kind_of_problem(tmp_path, monkeypatch, capsys):
    # a repository of one notebook (table of contents, one table) and its figures/, current: --check passes; then each
    # problem alone makes it fail, naming the problem
    root, figures = tmp_path / "repo", tmp_path / "repo" / "figures"
    (root / "notebooks").mkdir(parents=True)
    (figures / "tables").mkdir(parents=True)
    monkeypatch.setattr(outputs.paths, "ROOT", root)
    monkeypatch.setattr(outputs.paths, "FIGURES", figures)
    nb = _notebook(root / "notebooks", [("markdown", "# 09 Demo", "t"), ("markdown", "**Contents**\n\n- [A](<#A>)",
                                        "contents"), ("markdown", "## A", "m"), ("code", "save_table(df, 'kept')", "c")])
    for f in ("tables/kept.csv", "tables/bench.csv"):
        (figures / f).write_text("x")
    assert outputs.main([]) == 0 and outputs.main(["--check"]) == 0
    index, kept = figures / outputs.INDEX_NAME, figures / "tables" / "kept.csv"
    current = index.read_text()
    capsys.readouterr()
    index.write_text(current + "\nedited by hand\n")
    assert outputs.main(["--check"]) == 1 and "INDEX.md is stale" in capsys.readouterr().err
    index.write_text(current)
    kept.unlink()
    assert outputs.main(["--check"]) == 1 and "tables/kept.csv is written by a notebook but" in capsys.readouterr().err
    kept.write_text("x")
    cells = json.loads(nb.read_text())
    cells["cells"][2]["source"] = "## B"
    nb.write_text(json.dumps(cells))
    assert outputs.main(["--check"]) == 1 and "its table of contents is stale" in capsys.readouterr().err
