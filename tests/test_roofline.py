"""Roofline, waves and features on hand-computed cases."""
import math

import numpy as np
import pandas as pd
import pytest

from lib.features import FEATURES, add_features
from lib.roofline import add_roofline
from lib.waves import num_waves

# A100-like spec: 108 SMs, 1555 GB/s, 19500 GFLOP/s, 40 MB L2, 40 GB memory.
A100 = dict(num_sm=108, mem_bw_gbps=1555.0, peak_gflops=19500.0, peak_vec_gflops=19500.0,
            l2_mb=40.0, mem_gb=40.0)


def gemm_row(**kw):
    row = dict(op="bmm", B=1.0, M=1024.0, N=1024.0, K=1024.0, H=np.nan,
               kernel_name="x", tile_m=128, tile_n=64, **A100)
    row.update(kw)
    return pd.DataFrame([row])


def test_waves():
    assert num_waves(np.array([128, 108, 109, 1]), 108).tolist() == [2, 1, 2, 1]
    with pytest.raises(ValueError, match="num_sm must be positive"):
        num_waves(1, 0)


def test_waves_per_row_and_any_bad_sm_count():
    # every row divides by its own GPU's SMs: 216 tiles are 2 waves on 108 SMs, 6 on 40
    from lib.waves import add_waves
    out = add_waves(pd.DataFrame({"num_tiles": [216, 216], "num_sm": [108, 40]}))
    assert out["num_waves"].tolist() == [2, 6]
    # one GPU without SMs in a table is an error, not an infinite wave count for its rows
    with pytest.raises(ValueError, match="num_sm must be positive"):
        num_waves([1, 2], np.array([108, 0]))


def test_gemm_roofline_by_hand():
    out = add_roofline(gemm_row()).iloc[0]
    assert out["flops"] == 2 * 1024 ** 3
    assert out["bytes"] == 4 * 3 * 1024 ** 2
    assert out["intensity"] == pytest.approx(2 * 1024 / 12)        # 170.67 FLOP/B
    assert out["bound_gflops"] == 19500.0                            # 170.67*1555 > 19500
    assert out["roofline_ms"] == pytest.approx(2 * 1024 ** 3 / 19.5e12 * 1e3)


def test_linear_and_memory_bound():
    out = add_roofline(gemm_row(op="linear", B=1.0, M=1.0, N=4096.0, K=4096.0)).iloc[0]
    assert out["flops"] == 2 * 4096 * 4096 + 4096
    assert out["bytes"] == 4 * (4096 + 4096 * 4096 + 4096 + 4096)
    assert out["bound_gflops"] == pytest.approx(out["intensity"] * 1555.0)
    assert out["roofline_ms"] == pytest.approx(out["bytes"] / 1555e9 * 1e3)
    # a batched linear: the bias is added to every output (B M K), the weight and bias are read once
    out = add_roofline(gemm_row(op="linear", B=2.0, M=3.0, N=4.0, K=5.0)).iloc[0]
    assert out["flops"] == 2 * 2 * 3 * 4 * 5 + 2 * 3 * 5
    assert out["bytes"] == 4 * (2 * 3 * 4 + 4 * 5 + 5 + 2 * 3 * 5)


def test_vector_bytes():
    df = pd.DataFrame([dict(op=op, B=10.0, H=100.0, **A100) for op in ("add", "addu", "gelu", "softmax", "ln", "pow")])
    out = add_roofline(df)
    assert out["bytes"].tolist() == [12000, 8000, 8000, 8000, 8000 + 800, 12000]    # pow reads two tensors


def test_unknown_op_is_named():
    with pytest.raises(ValueError, match="conv"):
        add_roofline(pd.DataFrame([dict(op="conv", B=1.0, H=1.0, **A100)]))


def test_features_by_hand():
    out = add_features(gemm_row(), tiles="given").iloc[0]
    assert out["num_tiles"] == 128 and out["num_waves"] == 2
    fpt, bpt = 2 * 1024 ** 3 / 128, 12 * 1024 ** 2 / 128
    assert out["flops_per_tile"] == pytest.approx(fpt)
    assert out["f_flops"] == pytest.approx(math.log(fpt / (19500e9 / 108)))
    assert out["f_bytes"] == pytest.approx(math.log(bpt / (1555e9 / 108)))
    assert out["f_l2"] == pytest.approx(math.log(2 * bpt / (40e6 / 108)))
    assert out["f_mem"] == pytest.approx(math.log(2 * bpt / (40e9 / 108)))
    assert out["f_intensity"] == pytest.approx(math.log((fpt / bpt) / (19500 / 1555)))
    assert out["f_wave_l2"] == pytest.approx(math.log(bpt / (40e6 / 108)))           # one tile's bytes, not a wave's


def test_features_on_dataset_are_finite():
    from lib.data import load_kernels
    df = load_kernels(devices="Tesla T4")
    out = add_features(df)
    assert np.isfinite(out[list(FEATURES)].to_numpy()).all()


def test_vector_ops_use_the_vector_peak():
    from lib.roofline import peak_for_op
    spec = dict(num_sm=1, mem_bw_gbps=1e6, peak_gflops=2e4, peak_vec_gflops=1e4, l2_mb=1.0, mem_gb=1.0)
    df = pd.DataFrame([dict(op=op, B=1000.0, M=1000.0, N=1000.0, K=1000.0, H=1000.0, **spec) for op in ("bmm", "gelu")])
    assert peak_for_op(df).tolist() == [2e4, 1e4]
    # gelu over 1000 x 1000 elements: 1e7 FLOP; at 1e6 GB/s it is compute-bound, at the VECTOR peak of 1e4 GFLOP/s
    assert add_roofline(df)["roofline_ms"].iloc[1] == pytest.approx(1e7 / 1e13 * 1e3)
    # and so do their features: gelu's f_flops is its work per tile over the vector peak per SM (1 SM here)
    feat = add_features(df.assign(kernel_name="volta_sgemm_128x64_tn")).iloc[1]
    assert feat["f_flops"] == pytest.approx(math.log(feat["flops_per_tile"] / 1e13))


def test_softmax_block_flag_switches_above_1024():
    from lib.tiles import SOFTMAX_WARP_MAX_H
    rows = pd.DataFrame([dict(op="softmax", B=64.0, M=np.nan, N=np.nan, K=np.nan, H=h, **A100) for h in (1024.0, 1025.0)])
    out = add_features(rows)
    assert SOFTMAX_WARP_MAX_H == 1024     # PyTorch: softmax_warp_forward up to 1024 elements per row
    assert out["f_softmax_block"].tolist() == [0.0, 1.0]


def test_f_fill_by_hand():
    # bmm B=2, M=100, K=70 with 64 x 32 tiles: 2 x ceil(100/64) x ceil(70/32) = 12 tiles of 2048 outputs for 14,000
    # useful ones: 14000 / 24576 (tiles turned the other way would be 2 x 4 x 2 = 16); a shape that fills its
    # tiles: 1; a vector op: 1
    rows = pd.concat([gemm_row(B=2.0, M=100.0, N=50.0, K=70.0, tile_m=64, tile_n=32), gemm_row(op="linear"),
                      pd.DataFrame([dict(op="add", B=64.0, M=np.nan, N=np.nan, K=np.nan, H=1000.0, tile_m=np.nan,
                                         tile_n=np.nan, **A100)])], ignore_index=True)
    out = add_features(rows, tiles="given")
    assert out["num_tiles"].iloc[0] == 12
    assert out["f_fill"].tolist() == [14000 / 24576, 1.0, 1.0]
    vec = add_features(rows.iloc[2:].reset_index(drop=True), tiles="given")   # no GEMM row at all
    assert vec["f_fill"].tolist() == [1.0]


def test_f_fill_on_dataset_is_a_share():
    from lib.data import load_kernels
    out = add_features(load_kernels(devices="Tesla T4", ops=["BMM", "FC"]))
    assert ((out["f_fill"] > 0) & (out["f_fill"] <= 1)).all()
