"""Our own measurements (lib.measured): files the collector writes, read back and scored."""
import pandas as pd
import pytest

from lib import measured, profile


def _write_run(root, device="NVIDIA H200"):
    run = root / "NVIDIA_H200_torch2.13.0_cuda12.8"
    fixed = {"Device": device, "Kernel Name": "sm90_xmma_gemm_f32f32_128x64", "Torch Version": "p2.13.0"}
    profile.write_rows([{"OPName": "bmm", "Latency": 2.0, "B": 8, "M": 512, "N": 64, "K": 512, **fixed},
                        {"OPName": "bmm", "Latency": 4.0, "B": 16, "M": 512, "N": 64, "K": 512, **fixed}],
                       profile.GEMM_DIMS, run / "bmm.csv")
    profile.write_rows([{"OPName": "ln", "Latency": 0.5, "B": 64, "H": 1024, "Device": device}],
                       profile.VEC_DIMS, run / "ln.csv")
    return run


def test_collector_files_read_back_as_one_table(tmp_path):
    run = _write_run(tmp_path)
    (run / "device.json").write_text("{}")                    # beside the CSVs, not a kernel file
    df = measured.measured_kernels(tmp_path)
    assert list(df.columns) == list(measured.COLUMNS) and len(df) == 3
    assert set(df["run"]) == {run.name} and list(df["op_class"]) == ["BMM", "BMM", "LN"]
    assert df.loc[df["op"] == "ln", "H"].item() == 1024 and pd.isna(df.loc[df["op"] == "ln", "M"].item())
    assert measured.measured_kernels(tmp_path / "none").empty


def test_score_by_hand(tmp_path):
    _write_run(tmp_path)
    seen = []

    def predict(rows, device):           # twice the measured latency on BMM, exact on LN
        seen.append(device.name)
        return rows["latency_ms"].to_numpy() * rows["op_class"].map({"BMM": 2.0, "LN": 1.0}).to_numpy()
    score = measured.score_measured(measured.measured_kernels(tmp_path), predict).set_index("op_class")
    assert seen == ["NVIDIA H200"]                               # the spec JSON of data/devices/, by name
    assert score.loc["BMM", "kernels"] == 2 and score.loc["BMM", "mape_pct"] == pytest.approx(100.0)
    assert score.loc["BMM", "median_ratio"] == 2.0 and score.loc["LN", "mape_pct"] == 0.0


def test_a_gpu_without_a_spec_json_is_named(tmp_path):
    _write_run(tmp_path, device="NVIDIA Fake GPU")
    with pytest.raises(measured.MeasuredError, match=r"measured run NVIDIA_H200_torch2.13.0_cuda12.8: no spec JSON for 'NVIDIA Fake GPU'"):
        measured.score_measured(measured.measured_kernels(tmp_path), lambda rows, device: rows["latency_ms"])
