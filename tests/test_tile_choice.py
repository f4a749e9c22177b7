"""lib.tile_choice: the spec-only autotuner picks each kernel's own fastest tile."""
import numpy as np
import pandas as pd

from lib.devices import device_by_name
from lib.tile_choice import autotune_tiles


def test_autotune_picks_each_rows_own_best_tile():
    spec = device_by_name("Tesla T4").spec_columns()
    df = pd.DataFrame([{"op": "bmm", "B": 1.0, "M": 64.0, "N": 32.0, "K": 128.0, "H": np.nan, **spec},
                       {"op": "bmm", "B": 1.0, "M": 128.0, "N": 32.0, "K": 32.0, "H": np.nan, **spec}])
    # a fake predictor, fastest (1 ms) for the tile that matches the kernel's own output M x K
    fake_ms = lambda f: (1 + (f["tile_m"] - f["M"]).abs() + (f["tile_n"] - f["K"]).abs()).to_numpy(float)
    tile_m, tile_n, pred_ms = autotune_tiles(df, fake_ms)
    assert tile_m.tolist() == [64, 128] and tile_n.tolist() == [128, 32] and pred_ms.tolist() == [1, 1]
