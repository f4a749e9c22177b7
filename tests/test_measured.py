"""Our own measurements (lib.measured): files the collector writes, read back and scored."""
import json

import numpy as np
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
    # three kernels forecast at 1, 1 and 4 times their measurement: the median ratio is 1 (the mean 2)
    three = pd.DataFrame({"run": "r", "device": "NVIDIA H200", "op_class": "BMM", "latency_ms": [1.0, 1.0, 1.0]})
    score = measured.score_measured(three, lambda rows, device: np.array([1.0, 1.0, 4.0])).iloc[0]
    assert score["median_ratio"] == 1.0 and score["mape_pct"] == pytest.approx(100.0)


def test_a_gpu_without_a_spec_json_is_named(tmp_path):
    _write_run(tmp_path, device="NVIDIA Fake GPU")
    with pytest.raises(measured.MeasuredError, match=r"measured run NVIDIA_H200_torch2.13.0_cuda12.8: no spec JSON for 'NVIDIA Fake GPU'"):
        measured.score_measured(measured.measured_kernels(tmp_path), lambda rows, device: rows["latency_ms"])


def _write_label(root, gpu_name, stem, e2e_ms, software="torch2.13.0_cuda12.8"):
    path = root / software / profile.gpu_folder(gpu_name) / f"{stem}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"e2e_latency": e2e_ms, "fw_latency": e2e_ms, "bwall_latency": 0.0, "num_layer": 24}))
    return path


def test_model_labels_read_back_and_sit_beside_the_dataset_label(tmp_path):
    from lib.labels import load_labels
    _write_label(tmp_path, "NVIDIA H100 80GB HBM3", "bert_large-inf-512-8", 70.0)          # the dataset has this setting,
    _write_label(tmp_path, "NVIDIA H100 80GB HBM3", "bert_large-inf-512-8-fusion", 60.0)   # fused too,
    _write_label(tmp_path, "NVIDIA H200", "bert_large-inf-512-8", 60.0)                   # and none on the H200
    _write_label(tmp_path, "NVIDIA H200", "bert_large-inf-512-8", 61.0, software="torch2.14.0_cuda13.0")
    df = measured.measured_labels(tmp_path)
    assert df.columns[0] == "software" and list(df.columns) == list(measured.measured_labels(tmp_path / "none").columns)
    assert sorted(zip(df["software"], df["device"], df["option"])) == [
        ("torch2.13.0_cuda12.8", "NVIDIA H100 80GB HBM3", ""), ("torch2.13.0_cuda12.8", "NVIDIA H100 80GB HBM3", "fusion"),
        ("torch2.13.0_cuda12.8", "NVIDIA H200", ""), ("torch2.14.0_cuda13.0", "NVIDIA H200", "")]   # one row per file
    assert measured.measured_labels(tmp_path / "none").empty
    dataset = load_labels()
    h100 = dataset.query("gpu == 'NVIDIA_H100_80GB_HBM3' and model == 'bert_large' and mode == 'inference' "
                         "and seq == 512 and batch == 8").set_index("option")["e2e_ms"]
    ev = df.assign(neusight_ms=df["e2e_ms"] * 1.1, neusight_ape=10.0)       # what evaluate_labels adds
    score = measured.score_measured_labels(ev, dataset)
    assert list(score.columns) == measured.LABEL_COLUMNS
    on_h100 = score[score["device"] == "NVIDIA H100 80GB HBM3"].set_index("option")
    assert on_h100["dataset_e2e_ms"].to_dict() == {"": h100[""], "fusion": h100["fusion"]}   # each beside its own kind
    assert on_h100.loc["", "ratio_to_dataset"] == pytest.approx(70.0 / h100[""])
    assert on_h100.loc["fusion", "ratio_to_dataset"] == pytest.approx(60.0 / h100["fusion"])
    on_h200 = score[score["device"] == "NVIDIA H200"]
    assert on_h200["dataset_e2e_ms"].isna().all() and on_h200["neusight_ms"].tolist() == pytest.approx([66.0, 67.1])
    assert measured.score_measured_labels(ev.iloc[:0], dataset).empty


def test_measured_labels_are_forecast_like_the_dataset_labels(tmp_path):
    from lib.forecast import evaluate_labels
    from lib.labels import load_labels
    _write_label(tmp_path, "NVIDIA H100 80GB HBM3", "bert_large-inf-512-8", 70.0)
    tiny = {c: {"layers": 1, "width": 8, "epochs": 1, "batch_size": 4096, "max_rows": 500}
            for c in ("BMM", "FC", "EW", "SOFTMAX", "LN")}
    ours = evaluate_labels(measured.measured_labels(tmp_path), methods=["neusight"], cfg_by_class=tiny)
    dataset = load_labels().query("gpu == 'NVIDIA_H100_80GB_HBM3' and model == 'bert_large' and mode == 'inference' "
                                  "and seq == 512 and batch == 8 and option == ''")
    ref = evaluate_labels(dataset, methods=["neusight"], cfg_by_class=tiny)
    assert ours["neusight_ms"].item() == ref["neusight_ms"].item()          # the same forecast, scored on our number
    assert ours["neusight_ape"].item() == pytest.approx(100 * abs(ours["neusight_ms"].item() - 70.0) / 70.0)


def test_a_label_folder_without_a_spec_json_is_named(tmp_path):
    _write_label(tmp_path, "NVIDIA Fake GPU", "bert_large-inf-512-8", 70.0)
    with pytest.raises(measured.MeasuredError, match=r"torch2.13.0_cuda12.8: label folder NVIDIA_Fake_GPU: no device JSON"):
        measured.measured_labels(tmp_path)


@pytest.mark.parametrize("stem, message", [
    ("BERT_large-inf-512-8", r"BERT_large-inf-512-8.json: not named <model>-<inf\|train>-<seq>-<batch>.json"),
    ("llama3_8b-inf-2048-1", r"llama3_8b-inf-2048-1.json: model 'llama3_8b' has no config in .*DLmodel_configs")])
def test_a_label_notebook_05_cannot_forecast_is_named(tmp_path, stem, message):
    _write_label(tmp_path, "NVIDIA H200", stem, 70.0)
    with pytest.raises(measured.MeasuredError, match=message):
        measured.measured_labels(tmp_path)
