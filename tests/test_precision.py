"""lib.precision: fp16 tensor-core GEMMs as fp32 GEMMs on an equivalent device, checked against hand-computed fp16 inputs."""
import json

import numpy as np
import pandas as pd
import pytest

from lib import precision
from lib.devices import device_by_name
from lib.features import add_features
from lib.kernels import _with_spec

H100 = "NVIDIA H100 80GB HBM3"


def test_the_equivalent_device_gives_the_fp16_kernels_inputs_by_hand():
    # bmm [2, 256, 128] @ [2, 128, 64] in fp16 on the H100 (132 SMs, 3,430 GB/s, 50 MB L2, 80 GB, fp16 peak 989,500)
    h100 = device_by_name(H100)
    dev = precision.fp16_device(h100, 989_500)
    assert dev.name == f"{H100} (fp16 tensor cores)" and dev.peak_vec_gflops == h100.peak_vec_gflops
    assert (dev.mem_bw_gbps, dev.l2_mb, dev.mem_gb, dev.peak_gflops) == (6860, 100, 160, 989_500)
    row = pd.DataFrame({"op": ["bmm"], "B": [2], "M": [256], "N": [128], "K": [64]})
    f = add_features(_with_spec(row, dev).assign(tile_m=128, tile_n=64), tiles="given").iloc[0]
    flops = 2 * 2 * 256 * 128 * 64                       # 8,388,608
    bytes16 = 2 * 2 * (256 * 128 + 128 * 64 + 256 * 64)  # fp16: 2 bytes per element, 229,376
    tiles = 2 * 2 * 1                                    # B x ceil(256 / 128) x ceil(64 / 64)
    assert f["num_tiles"] == tiles
    sm = 132
    assert f["f_bytes"] == pytest.approx(np.log((bytes16 / tiles) / (3430e9 / sm)))
    assert f["f_l2"] == pytest.approx(np.log(1 * (bytes16 / tiles) / (50e6 / sm)))            # one wave
    assert f["f_mem"] == pytest.approx(np.log(1 * (bytes16 / tiles) / (80e9 / sm)))
    assert f["f_flops"] == pytest.approx(np.log((flops / tiles) / (989_500e9 / sm)))
    assert f["f_intensity"] == pytest.approx(np.log((flops / bytes16) / (989_500e9 / 3430e9)))
    # bound = min(K16 x bw, P16), K16 = flops / bytes16
    assert f["bound_gflops"] == pytest.approx(min(flops / bytes16 * 3430, 989_500))


def test_tensor_peak_from_the_json_then_the_table(tmp_path):
    h100 = device_by_name(H100)
    assert precision.tensor_gflops(h100) == 989_500
    spec = json.loads(open(h100.path).read())
    path = tmp_path / "h100.json"
    path.write_text(json.dumps({**spec, "Fp16TensorFLOPs": 1_000_000}))
    assert precision.tensor_gflops(h100, path) == 1_000_000            # the file's own figure wins
    for bad in (0, "fast", True):
        path.write_text(json.dumps({**spec, "Fp16TensorFLOPs": bad}))
        with pytest.raises(precision.PrecisionError, match="h100.json: field 'Fp16TensorFLOPs' must be a positive"):
            precision.tensor_gflops(h100, path)
    t4 = device_by_name("Tesla T4")
    with pytest.raises(precision.PrecisionError, match="no fp16 tensor-core peak for Tesla T4; add the field "
                                                       "'Fp16TensorFLOPs'"):
        precision.tensor_gflops(t4)


def test_the_datasets_fp16_bmms_read_as_kernel_rows(tmp_path):
    rows = precision.fp16_bmm_measurements()
    assert len(rows) == 9 and set(rows["device"]) == {H100} and set(rows["op"]) == {"bmm"}
    assert rows.iloc[0][["B", "M", "N", "K"]].tolist() == [128, 256, 256, 256]
    bad = tmp_path / "f.csv"
    bad.write_text("B,M,N,Latency\n1,2,3,0.1\n")
    with pytest.raises(precision.PrecisionError, match="f.csv: missing column"):
        precision.fp16_bmm_measurements(bad)
    with pytest.raises(precision.PrecisionError, match="none.csv: not found"):
        precision.fp16_bmm_measurements(tmp_path / "none.csv")


def test_an_fp16_forecast_is_never_slower_than_the_fp32_one():
    # a stand-in model: 1 ms on the fp16 device for the first row, 5 ms for the second; 3 ms on the fp32 device
    h100 = device_by_name(H100)
    rows = pd.DataFrame({"op": ["bmm", "bmm"], "B": [1, 2], "M": [64] * 2, "N": [64] * 2, "K": [64] * 2})
    seen = []

    def predict(df, device):
        seen.append(device.name)
        return np.array([1.0, 5.0]) if device.name.endswith("(fp16 tensor cores)") else np.full(len(df), 3.0)
    assert precision.predict_fp16(rows, h100, 989_500, predict).tolist() == [1.0, 3.0]
    assert seen == [f"{H100} (fp16 tensor cores)", H100]


def test_fp16_forecasts_and_their_scores_by_hand():
    # the stand-in model above on two measured BMMs of 2 ms: NeuSight capped [1, 3] and uncapped [1, 5], fp32 [3, 3];
    # the roofline on the fp16 device is a bound, below both measurements
    h100 = device_by_name(H100)
    rows = pd.DataFrame({"op": ["bmm", "bmm"], "B": [1, 2], "M": [64] * 2, "N": [64] * 2, "K": [64] * 2,
                         "latency_ms": [2.0, 2.0]})

    def predict(df, device):
        return np.array([1.0, 5.0]) if device.name.endswith("(fp16 tensor cores)") else np.full(len(df), 3.0)
    out = precision.fp16_forecasts(rows, h100, predict)
    assert out["gflop"].tolist() == pytest.approx([2 * 64**3 / 1e9, 4 * 64**3 / 1e9])
    assert out["pred_neusight"].tolist() == [1.0, 3.0] and out["pred_neusight_uncapped"].tolist() == [1.0, 5.0]
    assert out["pred_fp32"].tolist() == [3.0, 3.0] and (out["pred_roofline"] < 2).all()
    score = precision.fp16_scores(out).set_index("method")
    assert list(score.index) == list(precision.FP16_METHODS.values()) and (score["kernels"] == 2).all()
    ns = score.loc["NeuSight, fp16 device"]
    assert ns["mape_pct"] == pytest.approx(50) and ns["median_ratio"] == pytest.approx(1.0)   # ratios 0.5 and 1.5
    assert (ns["min_ratio"], ns["max_ratio"]) == (0.5, 1.5)
    by_b = precision.fp16_scores(out, ["B"])
    assert list(by_b.columns[:2]) == ["B", "method"] and len(by_b) == 2 * 3 and (by_b["kernels"] == 1).all()
    assert by_b.set_index(["B", "method"]).loc[(2, "NeuSight, fp32 (no tensor cores)"), "mape_pct"] == pytest.approx(50)


def test_tensor_alignment_reads_k_and_n_only():
    rows = pd.DataFrame({"M": [3, 8, 8, 8], "N": [8, 30522, 16, 8], "K": [64, 64, 12, 4096]})
    assert precision.tensor_aligned(rows).tolist() == [True, False, False, True]
