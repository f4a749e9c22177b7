"""The fixed time per kernel (lib.overhead): the formula, the intercept fit, the config key."""
import math

import numpy as np
import pandas as pd
import pytest
import torch

from lib import paths, predictors as P
from lib.overhead import OverheadMLP, overhead_predict_ms, series_intercepts_ms
from lib.selection import with_overhead

TINY = {"layers": 1, "width": 8, "epochs": 1, "batch_size": 4096, "max_rows": 1500}


def test_overhead_adds_t0_to_the_wave_formula():
    model = OverheadMLP(5, 1, 4)
    with torch.no_grad():
        model.log_t0.fill_(math.log(0.03))          # t0 = 30 us
    batch = {"x": torch.randn(2, 5), "waves": torch.tensor([1.0, 8.0]), "gflop_per_tile": torch.tensor([1.0, 2.0]),
             "bound_gflops_per_sm": torch.tensor([100.0, 10.0]), "device_idx": torch.tensor([-1, -1])}
    formula = P._predict_ms(model, batch).detach()
    assert torch.allclose(overhead_predict_ms(model, batch).detach(), formula + 0.03)
    assert model.t0_ms() == pytest.approx(0.03)


def test_series_intercepts_by_hand():
    # one series (T4, add, H=1024): latency = 0.025 + 0.001 * B ms -> t0 = 25 us; a series with only
    # three batch sizes and a kernel over max_ms are left out
    B = np.array([1, 2, 4, 8, 16])
    rows = [{"device": "Tesla T4", "op_class": "EW", "op": "add", "B": b, "H": 1024.0, "latency_ms": 0.025 + 0.001 * b}
            for b in B]
    rows += [{"device": "Tesla T4", "op_class": "EW", "op": "add", "B": 5000, "H": 1024.0, "latency_ms": 9.0}]
    rows += [{"device": "Tesla T4", "op_class": "EW", "op": "mul", "B": b, "H": 64.0, "latency_ms": 0.02} for b in (1, 2, 3)]
    out = series_intercepts_ms(pd.DataFrame(rows))
    assert len(out) == 1 and out.loc[0, "op"] == "add" and out.loc[0, "points"] == 5
    assert out.loc[0, "t0_ms"] == pytest.approx(0.025)
    # as the dataset's table holds them: GEMM dimensions empty on vector rows (a series still), and a series of four
    # kernels at only two batch sizes (repeats) is too short
    rows += [{"device": "Tesla T4", "op_class": "EW", "op": "gelu", "B": b, "H": 64.0, "latency_ms": 0.02} for b in (1, 1, 2, 2)]
    table = pd.DataFrame(rows).assign(M=np.nan, N=np.nan, K=np.nan)
    out = series_intercepts_ms(table)
    assert out["op"].tolist() == ["add"] and out.loc[0, "t0_ms"] == pytest.approx(0.025)


def test_isolated_and_hidden_share_one_model_and_differ_by_t0(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    iso = P.train_predictor("LN", {**TINY, "overhead": "isolated"})
    hid = P.train_predictor("LN", {**TINY, "overhead": "hidden"})
    plain = P.train_predictor("LN", TINY)
    assert iso.info["cached"] is False and hid.info["cached"] is True   # the same weights
    assert len(list((tmp_path / "predictors").glob("*/neusight-LN-*-t0-*.pt"))) == 1
    assert not hasattr(plain.model, "log_t0")
    feat = P.training_table("LN", 50)
    assert np.allclose(iso.predict(feat) - hid.predict(feat), iso.model.t0_ms())
    assert np.all(hid.predict(feat) > 0)


def test_bad_overhead_names_the_key():
    with pytest.raises(P.PredictorError, match="overhead"):
        P.make_config({"overhead": "always"})
    assert P.make_config({"overhead": "hidden"})[5] == "hidden"
    cfgs = with_overhead({"LN": {"layers": 1}, "EW": {"layers": 2}}, "isolated")
    assert cfgs == {"LN": {"layers": 1, "overhead": "isolated"}, "EW": {"layers": 2, "overhead": "isolated"}}
