"""Numbers quoted in prose (README, notebook markdown) against the tables the last full run wrote."""
import json
import re
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
TABLES = ROOT / "figures" / "tables"


def table(name: str) -> pd.DataFrame:
    """figures/tables/NAME.csv, as the last `make figures` wrote it."""
    return pd.read_csv(TABLES / f"{name}.csv")


def flat(text: str) -> str:
    """Whitespace runs (line wraps included) as one space, so a phrase may wrap anywhere."""
    return re.sub(r"\s+", " ", text)


def markdown_of(notebook: str) -> str:
    """Every markdown cell of notebooks/NOTEBOOK, joined."""
    nb = json.loads((ROOT / "notebooks" / notebook).read_text())
    return "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")


def assert_says(text: str, phrase: str, source: str) -> None:
    """`phrase`, built from a table's values, appears in `text` (whitespace-insensitive)."""
    assert flat(phrase) in flat(text), (
        f"{source} should say {phrase!r}, as figures/tables/ give it: edit the prose, or rerun `make figures`")


SPEC = "NeuSight (spec-only tiles)"   # our default, as figures/tables/ label it
WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven"}
QUARTERS = {1: "a quarter", 2: "half", 3: "three quarters"}


def and_list(items) -> str:
    """'a', 'a and b', 'a, b and c'."""
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def training_gpus() -> list:
    """The five training GPUs, as figures/tables/coverage.csv lists the train split."""
    cov = table("coverage")
    return sorted(cov.loc[cov["split"] == "train", "device"])


def mem_per_sm() -> pd.Series:
    """GB of device memory per SM, per device of figures/tables/device-specs.csv."""
    specs = table("device-specs").set_index("device")
    return specs["mem_gb"] / specs["num_sm"]


def amendment2_rows(t: pd.DataFrame) -> pd.DataFrame:
    """Rows of a selection table (op_class, config) among amendment 2's candidates: without amendment 4's."""
    from lib.selection import AMENDMENT4
    return t[[cfg not in AMENDMENT4.get(c, ()) for c, cfg in zip(t["op_class"], t["config"])]]


def paper_size_mape(model: str, method: str, split: str = "OOD") -> pd.Series:
    """MAPE per op class of one row of figures/tables/04-paper-size.csv (model: the paper's size, default, paper)."""
    t = table("04-paper-size")
    t = t[(t["model"] == model) & (t["method"] == method) & (t["split"] == split)]
    return t.set_index("op_class")["mape_pct"].reindex(["BMM", "FC", "EW", "SOFTMAX", "LN"])
