"""The README's headline results, written from figures/tables/ (notebooks 04 and 05, `make figures`).

    python -m lib.report            rewrite the block between the README's result markers
    python -m lib.report --check    exit 1 if that block differs from what figures/tables/ give
    (either with --readme PATH: another README than the repository's)

Every number in the block is read from a table a notebook (or `make bench`, bench.csv) wrote; the paper's columns come from
the dataset's summary/ through those same tables. Nothing here is typed in.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from . import paths
from .cli import Parser
from .labels import E2E_KINDS
from .metrics import NEVER_TRAINED_POOLS, bootstrap_mean_ci
from .ops import OP_CLASSES as OP_ORDER

BEGIN_MARK = "<!-- results:begin"     # a README's marker may carry any note after this prefix
BEGIN = BEGIN_MARK + " (python -m lib.report writes this block from figures/tables/; do not edit) -->"
END = "<!-- results:end -->"
SPEC = "NeuSight (spec-only tiles)"
ORACLE = "NeuSight (oracle tiles, target's kernel names)"
PAPER = "paper: NeuSight (oracle tiles, target's kernel names)"
E2E_TARGET_PCT = 5.0     # issue 5: mean end-to-end APE <= 5% for inference and for training


def e2e_headline(table: pd.DataFrame) -> pd.DataFrame:
    """Mean APE (%) per device and over all labels ('ALL') of every *_ape and paper_* column (notebook 05)."""
    cols = [c for c in table.columns if c.endswith("_ape") or c.startswith("paper_")]
    out = table.groupby("device")[cols].mean()
    out.loc["ALL"] = table[cols].mean()
    return out


def interval(lo: float, hi: float, digits: int = 1) -> str:
    """A 95% interval as text, '12.3 to 13.3'."""
    return "n/a" if np.isnan(lo) or np.isnan(hi) else f"{lo:.{digits}f} to {hi:.{digits}f}"


def perop_summary(perop: pd.DataFrame, ci: pd.DataFrame | None = None,
                  seeds: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per-op MAPE (%): ours (spec-only and oracle tiles) and the paper's NeuSight, OOD and in-distribution;
    with `ci` (notebook 04's perop_ci table) the spec-only OOD bootstrap interval and where it lies, with `seeds`
    (its 04-seed-spread table) the spec-only OOD range over the training seeds."""
    wide = perop.pivot_table(index="op_class", columns=["method", "split"], values="mape_pct")
    out = pd.DataFrame({
        "OOD, ours (spec-only tiles)": wide[(SPEC, "OOD")],
        "OOD, ours (oracle tiles)": wide[(ORACLE, "OOD")],
        "OOD, paper (oracle tiles)": wide[(PAPER, "OOD")],
        "in-dist., ours (spec-only tiles)": wide[(SPEC, "in-distribution")],
        "in-dist., paper": wide[(PAPER, "in-distribution")],
    }).reindex([c for c in OP_ORDER if c in wide.index]).rename_axis("op class")
    below = out["OOD, ours (spec-only tiles)"] < out["OOD, paper (oracle tiles)"]
    out["OOD below the paper"] = np.where(below, "yes", "**no**")
    if ci is not None:
        c = ci[(ci["method"] == SPEC) & (ci["split"] == "OOD")].set_index("op_class").reindex(out.index)
        out["OOD 95% CI, ours"] = [interval(lo, hi) for lo, hi in zip(c["ci_low_pct"], c["ci_high_pct"])]
        out["CI vs the paper"] = c["vs_paper"].fillna("n/a").to_numpy()
    if seeds is not None:
        r = seeds[seeds["split"] == "OOD"].set_index("op_class").reindex(out.index)
        out[f"OOD over {seeds['seeds'].max()} seeds, ours"] = [interval(lo, hi)
                                                               for lo, hi in zip(r["min_pct"], r["max_pct"])]
    return out


SAME = "ours, the paper's labels"   # our mean over the labels with a cell in the paper's tables


def _on_paper_labels(t: pd.DataFrame, paper: str) -> float:
    """Mean NeuSight APE (%) over the rows of t where the paper's column has a number."""
    return float(t.loc[t[paper].notna(), "neusight_ape"].mean())


def e2e_summary(inference: pd.DataFrame, training: pd.DataFrame, fused: pd.DataFrame,
                seeds: pd.DataFrame | None = None) -> pd.DataFrame:
    """Mean end-to-end APE (%) per mode, ours (every label) and the paper's NeuSight (the labels its tables have);
    with `seeds` (notebook 05's e2e_seed_spread table) our range over the training seeds."""
    rows = {"inference": (inference, "paper_neusight"), "training": (training, "paper_neusight"),
            "fused inference": (fused, "paper_ape_pct")}
    out = pd.DataFrame({mode: {"labels": len(t), "ours": t["neusight_ape"].mean(), SAME: _on_paper_labels(t, paper),
                               "paper": t[paper].mean()}
                        for mode, (t, paper) in rows.items()}).T
    out[f"<= {E2E_TARGET_PCT:g}%"] = np.where(out["ours"] <= E2E_TARGET_PCT, "yes", "**no**")
    out.loc["fused inference", f"<= {E2E_TARGET_PCT:g}%"] = "(no target)"
    out["labels"] = out["labels"].astype(int)
    # bootstrap over labels: of our mean, and of the paired difference ours - paper on the same labels
    out["ours, 95% CI"] = [interval(*bootstrap_mean_ci(t["neusight_ape"])) for t, _ in rows.values()]
    out["ours - paper, 95% CI"] = [interval(*bootstrap_mean_ci(t["neusight_ape"] - t[paper]))
                                   for t, paper in rows.values()]
    if seeds is not None:
        out[_seeds_column(seeds)] = _seed_ranges(seeds, [(kind, "ALL") for kind in out.index])
    return out


def _seeds_column(seeds: pd.DataFrame) -> str:
    return f"ours over {sum(c.startswith('seed') for c in seeds.columns)} seeds"


def _seed_ranges(seeds: pd.DataFrame, keys, prefix: str = "") -> list:
    """'lo to hi' of an e2e_seed_spread table's rows at (kind, device) keys ('n/a' where it has none); prefix
    'paper_labels_': the range on the labels the paper's tables have."""
    r = seeds.set_index(["kind", "device"]).reindex(keys)
    return [interval(lo, hi) for lo, hi in zip(r[f"{prefix}min_pct"], r[f"{prefix}max_pct"])]


def e2e_per_gpu(inference: pd.DataFrame, training: pd.DataFrame, seeds: pd.DataFrame | None = None) -> pd.DataFrame:
    """Mean APE (%) per GPU and mode: ours on every label and on the labels the paper's tables have, the paper's
    NeuSight, and whether ours is below it on the same labels; with `seeds` (notebook 05's e2e_seed_spread table)
    our range over the training seeds on those same labels."""
    parts = []
    for mode, t in (("inference", inference), ("training", training)):
        h = e2e_headline(t).drop(index="ALL")[["neusight_ape", "paper_neusight"]]
        same = {d: _on_paper_labels(g, "paper_neusight") for d, g in t.groupby("device")}
        parts.append(h.rename(columns={"neusight_ape": "ours", "paper_neusight": "paper"})
                     .assign(mode=mode, **{SAME: pd.Series(same)}))
    out = pd.concat(parts).reset_index().set_index(["device", "mode"]).sort_index()[["ours", SAME, "paper"]]
    out["below the paper"] = np.where(out[SAME] < out["paper"], "yes", "**no**")
    diff = {(d, mode): t.loc[t["device"] == d, "neusight_ape"] - t.loc[t["device"] == d, "paper_neusight"]
            for mode, t in (("inference", inference), ("training", training)) for d in t["device"].unique()}
    out["ours - paper, 95% CI"] = [interval(*bootstrap_mean_ci(diff[i])) for i in out.index]
    if seeds is not None:
        out[_seeds_column(seeds) + ", the paper's labels"] = _seed_ranges(
            seeds, [(mode, device) for device, mode in out.index], "paper_labels_")
    return out


def held_out_summary(per_op: pd.DataFrame, e2e: pd.DataFrame) -> pd.DataFrame:
    """MAPE % on GPUs never trained on: per op class (figures/tables/04-held-out-gpus.csv) and per kind of label
    (e2e_held_out_gpus.csv), with each training GPU held out in turn, the same kernels or labels forecast by the
    model trained on their GPU, the OOD GPUs, and every GPU never trained on pooled."""
    held, ood, every = NEVER_TRAINED_POOLS
    columns = {held: "training GPUs, each held out", "trained": "the same, trained on", ood: "OOD GPUs",
               every: "every GPU never trained on"}
    parts = []
    for t, key, order in ((per_op, "op_class", OP_ORDER), (e2e, "kind", E2E_KINDS)):
        w = t.pivot(index=key, columns="group", values="mape_pct")
        w["trained"] = t[t["group"] == held].set_index(key)["trained_mape_pct"]
        parts.append(w.reindex([k for k in order if k in w.index])[list(columns)].rename(columns=columns))
    out = pd.concat(parts)
    out.index = [f"{k} (per kernel)" if k in OP_ORDER else f"{k} (end to end)" for k in out.index]
    return out


def ood_gpus_note(per_op: pd.DataFrame) -> str:
    """Which GPUs never trained on have kernels of each op class (figures/tables/04-held-out-gpus.csv): a class
    measured on one of them has an OOD interval over that one GPU's kernels, silent on GPU-to-GPU spread."""
    from .devices import TRAIN_GPUS_NVIDIA
    ood = per_op[~per_op["group"].isin([*TRAIN_GPUS_NVIDIA, *NEVER_TRAINED_POOLS])]
    gpus = ood.groupby("op_class")["group"].apply(lambda g: " and ".join(sorted(g)))
    by_set = {}
    for c in [c for c in OP_ORDER if c in gpus.index]:
        by_set.setdefault(gpus[c], []).append(c)
    return "OOD kernels: " + "; ".join(f"{', '.join(cs)} on {g}" for g, cs in by_set.items()) + (
        ". An OOD interval resamples kernels: for a class measured on one GPU it says nothing of how the error "
        "varies from GPU to GPU.")


def amd_summary(headline: pd.DataFrame) -> pd.DataFrame:
    """Notebook 06's end-to-end means (06-amd-e2e-summary) per mode and GPU: ours with its interval, the paper's on the
    same labels, whether ours is below it, and the NVIDIA-trained models and roofline on the same labels."""
    h = headline.set_index(["mode", "device"])
    return pd.DataFrame({
        "labels": h["labels"].astype(int).astype(str), "split": h["split"], "ours": h["ours"],
        "ours, 95% CI": [interval(lo, hi) for lo, hi in zip(h["ours_ci_lo"], h["ours_ci_hi"])],
        "ours, the paper's labels": h["ours_paper_labels"], "paper": h["paper"],
        "below the paper": np.where(h["ours_paper_labels"] < h["paper"], "yes", "**no**"),
        "NeuSight trained on NVIDIA GPUs": h["nvidia_trained"], "roofline": h["roofline"]}, index=h.index)


def distributed_summary(summary: pd.DataFrame) -> pd.DataFrame:
    """Notebook 07's means (07-distributed-summary) per layout, GPU and overall: ours with its interval, the paper's on
    the same labels, whether ours is below it, and the span of forecast / measured."""
    s = summary.set_index("which")
    return pd.DataFrame({
        "labels": s["labels"].astype(int).astype(str), "ours": s["ours_mape"],
        "ours, 95% CI": [interval(lo, hi) for lo, hi in zip(s["ours_ci_lo"], s["ours_ci_hi"])],
        "paper": s["paper_mape"], "below the paper": np.where(s["ours_mape"] < s["paper_mape"], "yes", "**no**"),
        "forecast / measured": [f"{lo:.2f} to {hi:.2f}" for lo, hi in zip(s["forecast_over_measured_min"],
                                                                          s["forecast_over_measured_max"])]},
        index=s.index).rename(index=DISTRIBUTED_GROUPS)


# notebook 07 names its layouts by the labels' options
DISTRIBUTED_GROUPS = {"dp": "data parallel", "tp": "tensor parallel", "pp": "pipeline parallel", "all": "all 4-GPU labels"}


def bench_summary(bench: pd.DataFrame) -> pd.DataFrame:
    """The `make bench` rows that have a target, with their value."""
    b = bench[bench["target"].notna() & (bench["target"].astype(str) != "")]
    value = [f"{v:,.0f} {u}" if v >= 1000 else f"{v:.3g} {u}" for v, u in zip(b["value"], b["unit"])]
    return pd.DataFrame({"value": value, "target": b["target"].to_numpy()}, index=b["metric"].to_numpy())


def bench_machine(bench: pd.DataFrame) -> str:
    """' on <CPU, ISA, threads; commit, date>' from bench.csv's machine row; '' for a table from before it."""
    row = bench[bench["metric"] == "machine"]
    return f" on {int(row['value'].iloc[0])} CPUs, {row['note'].iloc[0]}" if len(row) else ""


def markdown(df: pd.DataFrame, digits: int = 1) -> str:
    """A DataFrame as a GitHub markdown table (index included; floats rounded to `digits`)."""
    def cell(v):
        if isinstance(v, (float, np.floating)):
            return "n/a" if np.isnan(v) else f"{v:.{digits}f}"
        return str(v)
    names = [n or "" for n in df.index.names]
    head = [" / ".join(names)] + [str(c) for c in df.columns]
    rows = [[" / ".join(map(str, i)) if isinstance(i, tuple) else str(i)] + [cell(v) for v in r]
            for i, r in zip(df.index, df.itertuples(index=False))]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def render(tables: Path = paths.TABLES) -> str:
    """The README's result block (markers included) from the CSVs under `tables`."""
    def read(name):
        f = Path(tables) / f"{name}.csv"
        if not f.exists():
            raise FileNotFoundError(f"lib.report: {f} is missing; run `make figures` first")
        return pd.read_csv(f)
    inf, train, fused, seeds = read("e2e_inference"), read("e2e_training"), read("e2e_fusion"), read("e2e_seed_spread")
    parts = [
        BEGIN,
        "Per-op MAPE % (notebook 04, `figures/tables/perop.csv`; target: OOD below the paper):",
        "", markdown(perop_summary(read("perop"), read("perop_ci"), read("04-seed-spread"))), "",
        "95% intervals: bootstrap over held-out kernels or labels (`lib.metrics.bootstrap_mean_ci`); "
        "'below' / 'above': the whole interval lies there. 'Over N seeds': the least to the largest when the "
        "models are trained from each of N seeds, the committed one among them (an ensemble's runs share no seed). "
        "Spec-only tiles: the rule (`lib.kernels.SPEC_TILES`) was chosen on the in-distribution rows that the "
        "in-distribution column scores, and amended for narrow GEMMs on the training GPUs' criterion (amendments 8 "
        "to 10; notebook 04). " + ood_gpus_note(read("04-held-out-gpus")), "",
        "End-to-end mean APE % over the NVIDIA labels (notebook 05, `figures/tables/e2e_*.csv`):",
        "", markdown(e2e_summary(inf, train, fused, seeds)), "",
        "'ours': every label. 'ours, the paper's labels', 'paper', 'ours - paper' and 'below the paper': the labels "
        "with a cell in the paper's tables (one per GPU, model and batch: A100-PCIE-40GB's two SwitchTransformer "
        "inference labels at 2,048 tokens have none).", "",
        "Per GPU (target: below the paper on every GPU):",
        "", markdown(e2e_per_gpu(inf, train, seeds)), "",
        "GPUs never trained on, each training GPU held out in turn (notebooks 04 and 05, "
        "`figures/tables/04-held-out-gpus.csv`, `e2e_held_out_gpus.csv`; MAPE %, no target):",
        "", markdown(held_out_summary(read("04-held-out-gpus"), read("e2e_held_out_gpus"))), "",
        "AMD GPUs, trained on the MI100 and MI210, the MI250 never trained on (notebook 06, "
        "`figures/tables/06-amd-e2e-summary.csv`; end-to-end mean APE %, no target):",
        "", markdown(amd_summary(read("06-amd-e2e-summary"))), "",
        "Training on 4 GPUs, data / tensor / pipeline parallel as Megatron-LM ran it (notebook 07, "
        "`figures/tables/07-distributed-summary.csv`; mean APE % of one step over the dataset's distributed labels, "
        "A100-SXM4-40GB and H100, both never trained on; no target):",
        "", markdown(distributed_summary(read("07-distributed-summary"))), "",
        f"Speed (`make bench`, `figures/tables/bench.csv`){bench_machine(read('bench'))}:",
        "", markdown(bench_summary(read("bench"))), "",
        END,
    ]
    return "\n".join(parts)


def replace_block(text: str, block: str, where: str = "README.md") -> str:
    """`text` with the part from BEGIN to END replaced by `block` (a ValueError names `where` if absent)."""
    i, j = text.find(BEGIN_MARK), text.find(END)
    if i < 0 or j < i:
        raise ValueError(f"lib.report: {where} has no result block ({BEGIN_MARK!r} ... {END!r})")
    return text[:i] + block + text[j + len(END):]


def main(argv=None) -> int:
    p = Parser(prog="python -m lib.report", description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="exit 1 if the README's block is stale")
    p.add_argument("--readme", type=Path, default=paths.ROOT / "README.md",
                   help="the README whose result block is written or checked (default: the repository's)")
    args = p.parse_args(argv)
    try:
        text = args.readme.read_text()
        new = replace_block(text, render(), str(args.readme))
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.check:
        if new != text:
            print(f"{args.readme}: the result block is stale; run `python -m lib.report`", file=sys.stderr)
            return 1
        return 0
    if new != text:
        paths.write_atomic(args.readme, lambda tmp: tmp.write_text(new))   # never a half-written README
    return 0


if __name__ == "__main__":
    sys.exit(main())
