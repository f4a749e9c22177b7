"""Waves: how many rounds of thread blocks a kernel needs on a GPU (notebook 02)."""
from __future__ import annotations

import numpy as np
import pandas as pd


# num_waves = ceil(num_tiles / num_sm)   (one tile per SM per wave, as in the paper)
def num_waves(num_tiles, num_sm):
    """Waves of tiles over the SMs (count); vectorized over arrays/Series."""
    num_tiles = np.asarray(num_tiles, dtype=float)
    num_sm = np.asarray(num_sm, dtype=float)
    if np.any(num_sm <= 0):
        raise ValueError("num_waves: num_sm must be positive")
    return np.ceil(num_tiles / num_sm)


def add_waves(df: pd.DataFrame) -> pd.DataFrame:
    """Add num_waves from the num_tiles and num_sm columns."""
    for col in ("num_tiles", "num_sm"):
        if col not in df:
            raise KeyError(f"add_waves: missing column '{col}'")
    return df.assign(num_waves=num_waves(df["num_tiles"], df["num_sm"]))
