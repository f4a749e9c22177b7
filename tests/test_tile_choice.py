"""lib.tile_choice: the spec-only autotuner picks each kernel's own fastest tile."""
import numpy as np
import pandas as pd

from lib.devices import device_by_name
from lib.features import add_features
from lib.kernels import predict_kernels
from lib.predictors import predict_featured
from lib.tile_choice import CANDIDATES, autotune_tiles


def test_autotune_picks_each_rows_own_best_tile():
    spec = device_by_name("Tesla T4").spec_columns()
    df = pd.DataFrame([{"op": "bmm", "B": 1.0, "M": 64.0, "N": 32.0, "K": 128.0, "H": np.nan, **spec},
                       {"op": "bmm", "B": 1.0, "M": 128.0, "N": 32.0, "K": 32.0, "H": np.nan, **spec}])
    # a fake predictor, fastest (1 ms) for the tile that matches the kernel's own output M x K
    fake_ms = lambda f: (1 + (f["tile_m"] - f["M"]).abs() + (f["tile_n"] - f["K"]).abs()).to_numpy(float)
    tile_m, tile_n, pred_ms = autotune_tiles(df, fake_ms)
    assert tile_m.tolist() == [64, 128] and tile_n.tolist() == [128, 32] and pred_ms.tolist() == [1, 1]


def test_spec_tiles_forecast_each_gemm_at_its_fastest_candidate_tile():
    # tiles='spec' is the autotuner with the deployed models: each GEMM's forecast is the least of its forecasts with
    # each candidate tile given (T4, a training GPU: no spec envelope), and not what the tile classifier picks
    t4 = device_by_name("Tesla T4")
    df = pd.DataFrame({"op": ["bmm", "linear", "bmm", "bmm"], "B": [8, 1, 16, 64], "M": [512, 2048, 1024, 128],
                       "N": [64, 1024, 1024, 64], "K": [512, 4096, 64, 128]})
    spec = predict_kernels(df, t4, tiles="spec")
    feat = df.assign(H=np.nan, **t4.spec_columns())
    per_tile = np.stack([predict_featured(add_features(feat.assign(tile_m=m, tile_n=n), tiles="given"))
                         for m, n in CANDIDATES], axis=1)
    np.testing.assert_allclose(spec, per_tile.min(axis=1), rtol=1e-6)
    assert not np.allclose(spec, predict_kernels(df, t4, tiles="classifier"), rtol=1e-6)
