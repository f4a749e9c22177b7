"""One helper for every figure: shared style, Agg backend, saved under figures/ (notebook 01)."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from . import paths  # noqa: E402

sns.set_theme(context="notebook", style="whitegrid", palette="colorblind")
plt.rcParams.update({"figure.dpi": 110, "savefig.dpi": 150, "savefig.bbox": "tight"})


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
