"""One helper for every figure: shared style, Agg backend, saved under figures/ (notebook 01)."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from . import paths  # noqa: E402
from .ops import OP_CLASSES  # noqa: E402

sns.set_theme(context="notebook", style="whitegrid", palette="colorblind")
plt.rcParams.update({"figure.dpi": 110, "savefig.dpi": 150, "savefig.bbox": "tight"})

# One colour per GPU and per kernel class in every figure, so that a colour means the same thing in each.
# GPUs: the dataset's seven NVIDIA GPUs (sorted by name), then the two forecast-only targets of notebook 05;
# the palette's grey is kept for any other GPU.
_PALETTE = sns.color_palette("colorblind", 10)
_GREY = _PALETTE[7]
NAMED_GPUS = ("NVIDIA A100 80GB PCIe", "NVIDIA A100-PCIE-40GB", "NVIDIA H100 80GB HBM3", "Tesla P100-PCIE-16GB",
              "Tesla P4", "Tesla T4", "Tesla V100-PCIE-32GB", "NVIDIA L4", "NVIDIA H200")
DEVICE_COLORS = dict(zip(NAMED_GPUS, [c for c in _PALETTE if c != _GREY]))
# Kernel classes: the predictors' five, then memory-bound kernels (notebook 05's "MEM").
CLASS_COLORS = dict(zip((*OP_CLASSES, "MEM"), _PALETTE))
# Methods (the `--method` names, and NeuSight with oracle tiles), with the label a legend gives each: notebook 04's
# per-op bars and notebook 05's end-to-end bars share them, and notebook 03 colours NeuSight's two variants so.
METHOD_COLORS = dict(zip(("neusight", "oracle", "roofline", "habitat", "li"), _PALETTE))
METHOD_LABELS = {"neusight": "NeuSight, spec-only tiles (default)", "oracle": "NeuSight, oracle tiles",
                 "roofline": "roofline", "habitat": "Habitat-style MLP", "li": "Li et al. (target's own data)"}


def device_colors(names) -> dict:
    """Colour of each GPU name: DEVICE_COLORS, grey for any other GPU (notebooks 01, 02 and 05)."""
    return {n: DEVICE_COLORS.get(n, _GREY) for n in names}


def short_gpu_name(name: str) -> str:
    """A GPU's name for a crowded axis: without the vendor's 'NVIDIA ', 'Tesla ' or 'AMD Instinct ' (notebooks 04 to
    06)."""
    return name.replace("NVIDIA ", "").replace("Tesla ", "").replace("AMD Instinct ", "")


def save_figure(fig, name: str, show: bool = True) -> str:
    """Save `fig` as figures/<name>.png (and show it inline in a notebook); returns the path."""
    paths.FIGURES.mkdir(parents=True, exist_ok=True)
    out = paths.FIGURES / f"{name}.png"
    fig.savefig(out)
    if show:
        try:
            from IPython.display import Image, display
            display(Image(filename=str(out)))
        except ImportError:
            pass
    plt.close(fig)
    return str(out)


def save_table(df: pd.DataFrame, name: str, index: bool = False) -> str:
    """Write a result table as figures/tables/<name>.csv; returns the path."""
    paths.TABLES.mkdir(parents=True, exist_ok=True)
    out = paths.TABLES / f"{name}.csv"
    df.to_csv(out, index=index, float_format="%.4g")
    return str(out)


def annotated_heatmap(ax, table: pd.DataFrame, fmt: str = ".0f", color: pd.DataFrame | None = None, **kwargs) -> None:
    """Heatmap of `table` with each cell's value written in it, coloured by `color` (default: the values);
    NaN cells stay blank (notebooks 04 and 05)."""
    sns.heatmap(table if color is None else color, annot=table.to_numpy(), fmt=fmt, ax=ax, linewidths=0.5,
                annot_kws={"fontsize": 8}, **kwargs)
    ax.set(xlabel="", ylabel="")
    ax.grid(False)
    ax.tick_params(axis="x", rotation=30)
    plt.setp(ax.get_xticklabels(), ha="right", rotation_mode="anchor")


def bars_with_reference(ax, values: pd.DataFrame, reference: pd.DataFrame | None = None,
                        reference_label: str = "paper", colors: dict | None = None) -> dict:
    """Grouped bars, one group per row of `values` and one bar per column (its name the legend label, its colour
    from `colors` where named there, else the next of the style's cycle), with a black diamond over each bar where
    `reference` (same rows and column names) has a number; returns each column's bar centres (notebooks 04 and 05)."""
    # bars of one group share 0.8 of the unit step between groups; bar i of n sits at x + (i - (n - 1) / 2) * width
    width = 0.8 / values.shape[1]
    x = np.arange(len(values))
    centres, ref_x, ref_y = {}, [], []
    for i, col in enumerate(values.columns):
        centres[col] = x + (i - (values.shape[1] - 1) / 2) * width
        ax.bar(centres[col], values[col], width, label=col, color=(colors or {}).get(col))
        if reference is not None and col in reference.columns:
            ref_x.extend(centres[col])
            ref_y.extend(reference[col].reindex(values.index))
    if ref_x:
        ax.scatter(ref_x, ref_y, marker="D", color="k", zorder=3, s=22, label=reference_label)
    return centres
