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
WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine", 10: "ten"}
QUARTERS = {1: "a quarter", 2: "half", 3: "three quarters"}


def and_list(items) -> str:
    """'a', 'a and b', 'a, b and c'."""
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def pct_range(values) -> str:
    """'a% to b%' of the least and largest of values, one decimal each; 'a%' where both print alike."""
    lo, hi = f"{min(values):.1f}", f"{max(values):.1f}"
    return f"{lo}%" if lo == hi else f"{lo}% to {hi}%"


def training_gpus() -> list:
    """The five training GPUs, as figures/tables/coverage.csv lists the train split."""
    cov = table("coverage")
    return sorted(cov.loc[cov["split"] == "train", "device"])


def tiles_outside_candidates() -> pd.Series:
    """Per GPU, the share of its GEMM rows whose tile is none of the spec-only rule's candidates (gemm-tiles-per-gpu)."""
    shares = table("gemm-tiles-per-gpu").set_index("device")
    return 1 - shares[candidate_columns()].sum(axis=1)


def tile_choice_errors() -> tuple[pd.DataFrame, pd.DataFrame]:
    """04-tile-choice-errors indexed by (device, op_class, tile), and 04-tile-choice-class (OOD MAPE per GEMM class, on
    every kernel and on those whose tile the spec-only rule can choose) indexed by op_class."""
    return (table("04-tile-choice-errors").set_index(["device", "op_class", "tile"]),
            table("04-tile-choice-class").set_index("op_class"))


def candidate_columns() -> list:
    """The spec-only rule's candidate tiles (lib.tiles.GEMM_TILE_CANDIDATES) as gemm-tiles-per-gpu's columns name them."""
    from lib.tiles import GEMM_TILE_CANDIDATES
    return [f"{m}x{n}" for m, n in sorted(GEMM_TILE_CANDIDATES)]


def direct_ood_id_ratio() -> pd.DataFrame:
    """Notebook 03: each direct predictor's OOD MAPE on each unseen GPU / its ID MAPE (predictor_scaling, _by_gpu);
    rows: device, columns: predictor ('MLP 8', ...), plus the OOD MAPE table itself (NeuSight rows too)."""
    scaling = table("predictor_scaling")
    direct = scaling[scaling["predictor"].isin(["MLP", "Transformer"])]
    in_dist = direct.set_index(direct["predictor"] + " " + direct["layers"].astype(str))["in_dist_mape"]
    by_gpu = table("predictor_scaling_by_gpu")
    ood = by_gpu[by_gpu["split"] == "test_ood"].pivot(index="device", columns="predictor", values="mape")
    return ood[in_dist.index] / in_dist, ood


def mem_per_sm() -> pd.Series:
    """GB of device memory per SM, per device of figures/tables/device-specs.csv."""
    specs = table("device-specs").set_index("device")
    return specs["mem_gb"] / specs["num_sm"]


def amendment2_rows(t: pd.DataFrame) -> pd.DataFrame:
    """Rows of a selection table (op_class, config) among amendment 2's candidates: without amendment 4's and 7's."""
    from lib.selection import AMENDMENT4, AMENDMENT7
    return t[[cfg not in AMENDMENT4.get(c, ()) + AMENDMENT7.get(c, ()) for c, cfg in zip(t["op_class"], t["config"])]]


def paper_size_mape(model: str, method: str, split: str = "OOD") -> pd.Series:
    """MAPE per op class of one row of figures/tables/04-paper-size.csv (model: the paper's size, default, paper)."""
    t = table("04-paper-size")
    t = t[(t["model"] == model) & (t["method"] == method) & (t["split"] == split)]
    return t.set_index("op_class")["mape_pct"].reindex(["BMM", "FC", "EW", "SOFTMAX", "LN"])


def row_length_ranges() -> dict:
    """The ranges the row-length reading quotes (figures/tables/04-row-length.csv), as 'lo-hi' strings or one number.

    longest: the longest row bin; mid: rows of 1,024-4,096; small_l2: GPUs with under 10 MB of L2 (device-specs).
    """
    def span(values, fmt=".2f"):
        a, b = format(min(values), fmt), format(max(values), fmt)
        return a if a == b else f"{a}-{b}"

    t = table("04-row-length")
    l2 = table("device-specs").set_index("device")["l2_mb"]
    t = t.assign(small_l2=t["device"].map(l2) < 10)
    longest, mid = t[t["row_from"] == t["row_from"].max()], t[t["row_from"] == 1024]
    soft, ln = (longest[longest["op_class"] == c] for c in ("SOFTMAX", "LN"))
    soft_mid, ln_mid = (mid[mid["op_class"] == c] for c in ("SOFTMAX", "LN"))
    lo, hi = soft.loc[soft["median_ratio"].idxmin()], soft.loc[soft["median_ratio"].idxmax()]
    return {"longest_from": longest["row_from"].iloc[0], "all_too_fast": bool((soft["median_ratio"] < 1).all()),
            "soft_lo": (f"{lo['median_ratio']:.2f}", lo["device"]), "soft_hi": (f"{hi['median_ratio']:.2f}", hi["device"]),
            "a100_mid": span(soft_mid[~soft_mid["small_l2"]]["median_ratio"]),
            "a100_mid_too_slow": bool((soft_mid[~soft_mid["small_l2"]]["median_ratio"] > 1).all()),
            "small_l2_gpus": int(soft["small_l2"].sum()),
            "share_small": span(soft[soft["small_l2"]]["bandwidth_share"]),
            "share_small_mid": span(soft_mid[soft_mid["small_l2"]]["bandwidth_share"]),
            "share_a100": span(soft[~soft["small_l2"]]["bandwidth_share"]),
            "share_a100_mid": span(soft_mid[~soft_mid["small_l2"]]["bandwidth_share"]),
            "l2_small": span(l2[soft[soft["small_l2"]]["device"]], ".0f"), "l2_a100": span(l2[soft[~soft["small_l2"]]["device"]], ".0f"),
            "ln": span(ln["median_ratio"]), "ln_small": span(ln[ln["small_l2"]]["bandwidth_share"]),
            "ln_small_mid": span(ln_mid[ln_mid["small_l2"]]["bandwidth_share"])}


def seed_ranges() -> dict:
    """The seed-spread reading's numbers (figures/tables/04-seed-spread.csv): per (split, class) the 'lo-hi' range
    over the seeds in %, its width, where the seeds lie beside the paper and whether the first seed is the worst."""
    t = table("04-seed-spread").set_index(["split", "op_class"])
    first = next(c for c in t.columns if c.startswith("seed") and c.endswith("_pct"))   # seed<N>_pct
    return {k: {"range": f"{r['min_pct']:.1f}-{r['max_pct']:.1f}", "width": f"{r['max_pct'] - r['min_pct']:.1f}",
                "paper": f"{r['paper_pct']:.1f}", "vs_paper": r["vs_paper"], "seeds": int(r["seeds"]),
                "first_is_worst": bool(r[first] == r["max_pct"])} for k, r in t.iterrows()}


def e2e_seed_ranges() -> dict:
    """Rows of figures/tables/e2e_seed_spread.csv by (kind, device), with the lo-hi range over seeds (%, 1 decimal)."""
    t = table("e2e_seed_spread")
    seeds = [c for c in t.columns if c.startswith("seed")]
    return {(r["kind"], r["device"]): {**r.to_dict(), "range": f"{r['min_pct']:.1f}-{r['max_pct']:.1f}",
                                       "seeds": len(seeds), "first": r[seeds[0]]} for _, r in t.iterrows()}


def held_out_gpus() -> dict:
    """Rows of figures/tables/04-held-out-gpus.csv by (group, op_class)."""
    return {(r["group"], r["op_class"]): r for _, r in table("04-held-out-gpus").iterrows()}


def e2e_held_out() -> dict:
    """Rows of figures/tables/e2e_held_out_gpus.csv by (kind, group)."""
    return {(r["kind"], r["group"]): r for _, r in table("e2e_held_out_gpus").iterrows()}
