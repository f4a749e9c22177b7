"""Board power per unit of fp32 peak: a spec-sheet number the forecasts do not read (notebook 04).

A long GEMM keeps every FP32 unit busy; a board whose power limit is small for its nominal peak cannot hold the
boost clock the peak is quoted at, so it reaches a smaller share of that peak. Board powers are vendor figures
with their sources in data/devices/board-power.csv (the dataset's device JSONs carry none).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from . import paths

BOARD_POWER = paths.DEVICES_ADDED / "board-power.csv"


class PowerError(ValueError):
    """A board-power table that cannot be read; the message names the file and the row or column."""


def load_board_power(path: Path | str = BOARD_POWER) -> pd.Series:
    """Board power (W) per device name, from a CSV with device, board_power_w and source columns."""
    path = Path(path)
    try:
        table = pd.read_csv(path)
    except FileNotFoundError:
        raise PowerError(f"{path}: board-power table not found") from None
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as e:
        raise PowerError(f"{path}: not a readable CSV ({str(e).splitlines()[0]})") from None
    missing = [c for c in ("device", "board_power_w", "source") if c not in table.columns]
    if missing:
        raise PowerError(f"{path}: missing column(s) {', '.join(missing)}")
    watts = pd.to_numeric(table["board_power_w"], errors="coerce")
    bad = table.index[~(watts > 0) | table["source"].isna() | table["device"].isna()]
    if len(bad):
        raise PowerError(f"{path}: row {bad[0] + 2}: needs a device, a positive board_power_w and a source")
    if table["device"].duplicated().any():
        raise PowerError(f"{path}: device {table['device'][table['device'].duplicated()].iloc[0]!r} listed twice")
    return pd.Series(watts.to_numpy(), index=table["device"], name="board_power_w")


# watts per TFLOP/s of nominal fp32 peak = board_power_w / (peak_gflops / 1000)
def power_per_peak(peaks: pd.Series, peak_gflops: pd.Series, board_power_w: pd.Series) -> pd.DataFrame:
    """Per device with all three: board power, nominal peak, W per peak TFLOP/s and the share of peak reached."""
    t = pd.concat([board_power_w.rename("board_power_w"), peak_gflops.rename("peak_gflops"), peaks.rename("peak_reached")], axis=1,
                  join="inner")
    return t.assign(w_per_peak_tflops=t["board_power_w"] / (t["peak_gflops"] / 1000)).sort_values("w_per_peak_tflops")
