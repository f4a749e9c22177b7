"""Board power per peak FLOP/s (lib.power): hand-computed cases and the table's errors."""
import numpy as np
import pandas as pd
import pytest

from lib import power
from lib.devices import all_devices


def test_the_committed_table_covers_every_measured_gpu_with_a_source():
    watts = power.load_board_power()
    measured = {"Tesla P4", "Tesla P100-PCIE-16GB", "Tesla T4", "Tesla V100-PCIE-32GB", "NVIDIA A100-PCIE-40GB",
                "NVIDIA A100 80GB PCIe", "NVIDIA H100 80GB HBM3"}
    assert measured <= set(watts.index) and set(watts.index) <= set(all_devices())
    assert watts["Tesla T4"] == 70 and watts["NVIDIA H100 80GB HBM3"] == 700


def test_power_per_peak_by_hand():
    # T4: 70 W / 8.141 TFLOP/s = 8.598 W per TFLOP/s; V100: 250 / 14.03 = 17.82; a GPU without a power figure drops
    out = power.power_per_peak(pd.Series({"T4": 0.6, "V100": 0.98, "X": 0.5}),
                               pd.Series({"T4": 8141.0, "V100": 14030.0, "X": 1.0}),
                               pd.Series({"T4": 70.0, "V100": 250.0}))
    assert list(out.index) == ["T4", "V100"]
    assert out["w_per_peak_tflops"].tolist() == pytest.approx([70 / 8.141, 250 / 14.03])
    assert out.loc["V100", "peak_reached"] == 0.98


@pytest.mark.parametrize("text, match", [
    ("device,board_power_w\nT4,70\n", "missing column.*source"),
    ("device,board_power_w,source\nT4,-70,x\n", "row 2: needs a device, a positive board_power_w"),
    ("device,board_power_w,source\nT4,0,x\n", "row 2: needs a device, a positive board_power_w"),
    ("device,board_power_w,source\nT4,70,\n", "row 2: .*and a source"),
    ("device,board_power_w,source\nT4,70,x\n,71,y\n", "row 3: needs a device"),
    ("device,board_power_w,source\nT4,70,x\nT4,71,y\n", "device 'T4' listed twice"),
    ("", "not a readable CSV"),
])
def test_bad_tables_name_the_file_and_row(tmp_path, text, match):
    path = tmp_path / "p.csv"
    path.write_text(text)
    with pytest.raises(power.PowerError, match=f"^{path}: {match}"):
        power.load_board_power(path)
    with pytest.raises(power.PowerError, match="not found"):
        power.load_board_power(tmp_path / "none.csv")


def test_derating_fit_by_hand():
    # bias = 0.5 at 10 W/TFLOP and 2 at 40: log(bias) = log(0.5) + log(4) * log(w / 10) / log(4) -> b = 1, a = log(0.05)
    a, b = power.derating_fit(pd.Series({"g1": 0.5, "g2": 2.0}), pd.Series({"g1": 10.0, "g2": 40.0, "g3": 20.0}))
    assert b == pytest.approx(1.0) and a == pytest.approx(np.log(0.05))
    with pytest.raises(power.PowerError, match="two or more GPUs"):
        power.derating_fit(pd.Series({"g1": 0.5}), pd.Series({"g1": 10.0}))
    with pytest.raises(power.PowerError, match="two or more GPUs"):
        power.derating_fit(pd.Series({"g1": 0.5, "g2": 2.0}), pd.Series({"g1": 10.0, "g2": 10.0}))


def test_power_derated_never_reads_the_gpu_it_derates():
    # three training GPUs (t1..t3) and an OOD one (o); each GPU's forecasts are bias x its measurements
    w = pd.Series({"t1": 10.0, "t2": 20.0, "t3": 40.0, "o": 20.0})
    bias = {"t1": 0.5, "t2": 1.0, "t3": 2.0, "o": 0.8}
    rows = pd.DataFrame([{"device": d, "op_class": "BMM", "meas": m, "pred": bias[d] * m} for d in bias for m in (1.0, 3.0)])
    out = power.power_derated(rows, w, ["t1", "t2", "t3"])
    # t2 is derated by the line through t1 and t3: bias 0.5 * (w / 10); at 20 W that is 1.0, so its forecasts are exact
    assert out[rows["device"] == "t2"].tolist() == pytest.approx([1.0, 3.0])
    # the OOD GPU by the line through all three (the same line): 0.8 / 1.0
    assert out[rows["device"] == "o"].tolist() == pytest.approx([0.8, 2.4])
    # with two training GPUs, each has one other to fit on: left out (NaN); the OOD GPU is still derated
    two = power.power_derated(rows, w, ["t1", "t3"])
    assert two[rows["device"].isin(["t1", "t3"])].isna().all() and two[rows["device"] == "o"].notna().all()
    assert set(power.derating_table(rows.assign(pred_derated=two), ["t1", "t3"])["group"]) == {"o", "t2", "OOD GPUs"}
    # changing o's own forecasts changes no other GPU's derating
    rows2 = rows.assign(pred=np.where(rows["device"] == "o", rows["pred"] * 5, rows["pred"]))
    out2 = power.power_derated(rows2, w, ["t1", "t2", "t3"])
    assert out2[rows["device"] != "o"].tolist() == pytest.approx(out[rows["device"] != "o"].tolist())


def test_derating_table_by_hand():
    rows = pd.DataFrame({"device": ["t1", "t1", "o"], "op_class": "FC", "meas": [1.0, 2.0, 1.0],
                         "pred": [1.1, 2.0, 0.5], "pred_derated": [1.0, 2.2, 1.0]})
    t = power.derating_table(rows, ["t1"]).set_index("group")
    assert t.loc["t1", "mape_pct"] == pytest.approx(5.0) and t.loc["t1", "derated_mape_pct"] == pytest.approx(5.0)
    assert t.loc["o", "mape_pct"] == pytest.approx(50.0) and t.loc["o", "derated_mape_pct"] == 0.0
    assert t.loc["training GPUs, each held out", "kernels"] == 2 and t.loc["OOD GPUs", "median_ratio"] == 0.5
    assert t.loc["t1", "median_ratio"] == pytest.approx(1.05)
    # three unequal ratios (1.0, 1.0, 1.3): the median, not the mean
    three = pd.DataFrame({"device": "t1", "op_class": "FC", "meas": 1.0, "pred": [1.0, 1.0, 1.3], "pred_derated": 1.0},
                         index=range(3))
    assert power.derating_table(three, ["t1"]).set_index("group").loc["t1", "median_ratio"] == pytest.approx(1.0)


def test_power_derated_reads_each_gpus_median_bias():
    # t1's forecasts are 0.5, 0.5 and 2.0 times its measurements: its bias is their median, 0.5 (the mean would be
    # 1.0), so the line through t1..t3 is bias = 0.5 * (w / 10) and o, at 20 W, is divided by 1.0
    w = pd.Series({"t1": 10.0, "t2": 20.0, "t3": 40.0, "o": 20.0})
    ratios = {"t1": [0.5, 0.5, 2.0], "t2": [1.0] * 3, "t3": [2.0] * 3, "o": [0.8] * 3}
    rows = pd.DataFrame([{"device": d, "op_class": "BMM", "meas": 1.0, "pred": r} for d in ratios for r in ratios[d]])
    out = power.power_derated(rows, w, ["t1", "t2", "t3"])
    assert out[rows["device"] == "o"].tolist() == pytest.approx([0.8] * 3)
