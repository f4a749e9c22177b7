"""Our own measurements (lib.measured): files the collector writes, read back and scored."""
import json

import numpy as np
import pandas as pd
import pytest

from lib import measured, paths, profile


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
    flushed = run / profile.FLUSH_L2_FOLDER                   # timed the L2 flushed: not the dataset's method
    flushed.mkdir()
    (flushed / "ln.csv").write_text((run / "ln.csv").read_text())
    df = measured.measured_kernels(tmp_path)
    assert list(df.columns) == list(measured.COLUMNS) and len(df) == 3
    assert set(df["run"]) == {run.name} and list(df["op_class"]) == ["BMM", "BMM", "LN"]
    assert df.loc[df["op"] == "ln", "H"].item() == 1024 and pd.isna(df.loc[df["op"] == "ln", "M"].item())
    assert measured.measured_kernels(tmp_path / "none").empty
    only_flushed = measured.measured_kernels(tmp_path, profile.FLUSH_L2_FOLDER)   # that folder alone, same run
    assert list(only_flushed["op"]) == ["ln"] and set(only_flushed["run"]) == {run.name}
    assert measured.measured_kernels(tmp_path, "fp16").empty


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
    assert score.loc["BMM", "level_free_mape_pct"] == 0.0          # one level: divided out, nothing is left
    # three kernels forecast at 1, 1 and 4 times their measurement: the median ratio is 1 (the mean 2)
    three = pd.DataFrame({"run": "r", "device": "NVIDIA H200", "op_class": "BMM", "latency_ms": [1.0, 1.0, 1.0]})
    score = measured.score_measured(three, lambda rows, device: np.array([1.0, 1.0, 4.0])).iloc[0]
    assert score["median_ratio"] == 1.0 and score["mape_pct"] == pytest.approx(100.0)
    assert score["level_free_mape_pct"] == pytest.approx(100.0)    # the median level is 1: nothing to divide out


def test_a_gpu_without_a_spec_json_is_named(tmp_path):
    _write_run(tmp_path, device="NVIDIA Fake GPU")
    with pytest.raises(measured.MeasuredError, match=r"measured run NVIDIA_H200_torch2.13.0_cuda12.8: no spec JSON for 'NVIDIA Fake GPU'"):
        measured.score_measured(measured.measured_kernels(tmp_path), lambda rows, device: rows["latency_ms"])


def test_collector_specs_sit_beside_the_spec_json(tmp_path):
    run = _write_run(tmp_path)
    spec = json.loads((paths.DEVICES_ADDED / "NVIDIA_H200.json").read_text())
    (run / "device.json").write_text(json.dumps({**spec, "L2Cache": 60.0, "Dev_Mem": 139.8}))
    t = measured.collector_specs(tmp_path).set_index("field")
    assert list(t.index) == list(measured.SPEC_FIELDS) and set(t["run"]) == {run.name}
    assert (t.loc["l2_mb", "spec_json"], t.loc["l2_mb", "collector"]) == (50.0, 60.0)
    assert t.loc["l2_mb", "ratio"] == pytest.approx(1.2) and t.loc["num_sm", "ratio"] == 1.0
    assert t.loc["mem_gb", "ratio"] == pytest.approx(139.8 / 141)
    assert measured.collector_specs(tmp_path / "none").empty


def test_error_table_by_hand():
    rows = pd.DataFrame({"run": "r", "op_class": "EW", "size": ["small", "small", "small", "large"],
                         "latency_ms": [1.0, 1.0, 1.0, 2.0], "pred_ms": [1.0, 1.5, 3.0, 1.0]})
    t = measured.error_table(rows, "size").set_index("size")
    assert t.loc["small", "kernels"] == 3 and t.loc["small", "mape_pct"] == pytest.approx(100 * (0 + 0.5 + 2) / 3)
    assert t.loc["small", "median_ratio"] == 1.5 and t.loc["large", "mape_pct"] == pytest.approx(50.0)


def test_softmax_family_names_the_kernel_and_whether_pytorch_2_1_chose_it():
    names = ["void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, false, false>(...)",
             "void (anonymous namespace)::softmax_warp_forward<float, float, float, 11, false, false>(...)",
             "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, at::native::Epilogue>",
             "void at::native::(anonymous namespace)::cunn_SoftMaxForwardReg<float, float, float, at::native::Epi>",
             "void at::native::(anonymous namespace)::cunn_SoftMaxForwardSmem<4, float, float, float, at::Epi>",
             "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, at::native::Epilogue>",
             None]
    rows = pd.DataFrame({"kernel_name": names, "H": [1024, 2048, 4096, 4096, 8192, 512, 64]})
    assert measured.softmax_family(rows).tolist() == [
        "warp (as lib.tiles assumes)", "warp", "block (as lib.tiles assumes)", "block, registers",
        "block, shared memory", "block", "other"]


def test_twin_table_by_hand():
    gemm = {"op": "bmm", "op_class": "BMM", "H": np.nan}
    own = pd.DataFrame([{**gemm, "run": "r", "device": "NVIDIA H200", "B": 8, "M": 64, "N": 64, "K": 64,
                         "latency_ms": 2.0, "kernel_name": "k128"},
                        {**gemm, "run": "r", "device": "NVIDIA H200", "B": 8, "M": 64, "N": 64, "K": 128,
                         "latency_ms": 4.0, "kernel_name": "k64"},
                        {**gemm, "run": "r", "device": "NVIDIA H200", "B": 1, "M": 1, "N": 1, "K": 1,   # not in the dataset
                         "latency_ms": 9.0, "kernel_name": "k64"}])
    h100 = "NVIDIA H100 80GB HBM3"
    reference = pd.DataFrame([{**gemm, "device": h100, "B": 8, "M": 64, "N": 64, "K": 64, "latency_ms": ms,
                               "kernel_name": "k128"} for ms in (1.0, 3.0)]        # median 2.0, the same kernel
                             + [{**gemm, "device": h100, "B": 8, "M": 64, "N": 64, "K": 128, "latency_ms": 6.0,
                                 "kernel_name": "k128"},                          # another kernel than ours
                                {**gemm, "device": "Tesla T4", "B": 1, "M": 1, "N": 1, "K": 1, "latency_ms": 9.0,
                                 "kernel_name": "k64"}])                          # not the twin

    def predict(rows, device):           # our GPU 0.9 times its measurement, the twin 0.8 times its own (by row)
        return rows["latency_ms"].to_numpy() * (0.9 if device.name == "NVIDIA H200" else 0.8 * np.array([1.0, 1.5]))
    t = measured.twin_table(own, reference, predict).iloc[0]
    assert list(t.index) == measured.TWIN_COLUMNS and (t["device"], t["twin"], t["shapes"]) == ("NVIDIA H200", h100, 2)
    assert t["same_kernel_share"] == 0.5 and t["twin_over_ours"] == pytest.approx((2 / 2 + 6 / 4) / 2)
    assert t["pred_over_meas"] == pytest.approx(0.9)
    # the twin's forecast reads our rows with its kernel names: 0.8 x [2, 4] x [1, 1.5] against its 2 and 6 ms
    assert t["twin_pred_over_meas"] == pytest.approx((0.8 + 0.8) / 2)
    assert t["pred_over_twin_pred"] == pytest.approx((1.8 / 1.6 + 3.6 / 4.8) / 2)
    assert measured.twin_table(own.assign(device="NVIDIA L4"), reference, predict).empty   # no twin: no row


def test_twin_labels_by_hand():
    setting = {"model": "gpt3_xl", "mode": "inference", "seq": 2048, "batch": 2}
    own_e2e = pd.DataFrame([{"software": "s", "device": "NVIDIA H200", **setting, "option": "", "e2e_ms": 100.0,
                             "neusight_ms": 90.0},
                            {"software": "s", "device": "NVIDIA H200", **setting, "batch": 8, "option": "",
                             "e2e_ms": 400.0, "neusight_ms": 300.0}])             # the twin has no label of it
    ev = pd.DataFrame([{"device": "NVIDIA H100 80GB HBM3", **setting, "option": np.nan, "e2e_ms": 110.0,
                        "neusight_ms": 100.0},
                       {"device": "NVIDIA H100 80GB HBM3", **setting, "option": "fusion", "e2e_ms": 80.0,
                        "neusight_ms": 70.0},
                       {"device": "Tesla T4", **setting, "option": "", "e2e_ms": 900.0, "neusight_ms": 800.0}])
    t = measured.twin_labels(own_e2e, ev)
    assert list(t.columns) == measured.TWIN_LABEL_COLUMNS and len(t) == 1
    assert t.iloc[0][["twin_e2e_ms", "twin_neusight_ms"]].tolist() == [110.0, 100.0]   # the plain label, not the fused
    assert t.iloc[0]["twin_over_ours"] == pytest.approx(1.1) and t.iloc[0]["pred_over_twin_pred"] == pytest.approx(0.9)
    assert t.iloc[0][["ape_pct", "twin_ape_pct"]].tolist() == pytest.approx([10.0, 100 / 11])


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
    from lib.label_eval import evaluate_labels
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


def test_timing_change_by_hand():
    # one run, two ln shapes (the second sampled twice), timed a base way and another: the time ratios 2/1, 1/4, 3/4
    # (median 0.75), and each way's forecast (the same 2 ms) scored against its own timing
    base = pd.DataFrame({"run": "r", "op": "ln", "op_class": "LN", "B": [1, 2, 2], "M": np.nan, "N": np.nan,
                         "K": np.nan, "H": 8.0, "latency_ms": [1.0, 4.0, 4.0], "pred_ms": 2.0, "size": "s"})
    other = base.assign(latency_ms=[2.0, 1.0, 3.0])
    assert list(measured.paired_timings(base, other)["time_ratio"]) == [2.0, 0.25, 0.75]
    t = measured.timing_change(base, other, "size").iloc[0]
    assert t["kernels"] == 3 and t["median_time_ratio"] == pytest.approx(0.75)
    assert t["mape_pct"] == pytest.approx((100 + 50 + 50) / 3) and t["median_ratio"] == pytest.approx(0.5)
    assert t["mape_pct_other"] == pytest.approx((0 + 100 + 100 / 3) / 3) and t["median_ratio_other"] == pytest.approx(1)
    assert measured.timing_change(base, other.iloc[:0], "size").empty      # nothing timed the other way


def test_tensor_size_and_its_bin_by_hand():
    # 2 x 1,000,000 fp32 elements = 8 MB: the bin starting at 8 (left-closed); 1 x 1,000 = 0.004 MB: the first bin
    rows = pd.DataFrame({"B": [2, 1], "H": [1_000_000, 1_000]})
    assert measured.tensor_megabytes(rows).tolist() == pytest.approx([8.0, 0.004])
    assert [(i.left, i.right) for i in measured.tensor_mb(rows)] == [(8, 60), (0, 8)]


def _runs(software, rows):
    """measured_labels rows: (model, mode, e2e, fw, bw) on the H200."""
    return pd.DataFrame([dict(software=software, gpu="NVIDIA_H200", device="NVIDIA H200", model=m, mode=mode, seq=512,
                              batch=1, option="", e2e_ms=e2e, fw_ms=fw, bw_ms=bw) for m, mode, e2e, fw, bw in rows])


def test_pair_runs_and_grad_mode_labels_by_hand():
    first = _runs("t", [("a", "training", 30.0, 10.0, 20.0), ("b", "inference", 8.0, 8.0, 0.0),
                        ("c", "inference", 5.0, 5.0, 0.0)])
    grad = _runs("t" + measured.GRAD_MODE_SUFFIX, [("a", "training", 33.0, 10.0, 23.0)])
    own = pd.concat([first, grad], ignore_index=True)
    assert measured.grad_mode_labels(own)["software"].tolist() == ["t-grad-mode"]
    second = _runs("u", [("a", "training", 27.0, 9.0, 18.0), ("b", "inference", 8.8, 8.8, 0.0)])
    got = measured.pair_runs(first, second)             # setting by setting, whatever the software folder
    assert got["model"].tolist() == ["a", "b"]
    assert got["e2e_ratio"].tolist() == pytest.approx([0.9, 1.1]) and got["bw_ratio"].tolist()[0] == pytest.approx(0.9)
    assert pd.isna(got["bw_ratio"].iloc[1])              # no backward: no ratio
    got = measured.pair_runs(second, grad)
    assert got["bw_ms_first"].tolist() == [18.0] and got["bw_ratio"].tolist() == pytest.approx([23 / 18])


def test_memory_against_dataset_by_hand(tmp_path):
    # 10 GiB = 10.737 GB fits the V100's 32 GB; 40 GiB = 42.9 GB does not, and the V100 is the smallest GPU that the
    # dataset measured bert_large training 512 x 8 on
    peak = tmp_path / "peak.csv"
    peak.write_text("software,gpu,model,mode,seq,batch,backward,peak_gib,outcome\n"
                    "t,NVIDIA_H200,bert_large,training,512,2,grad mode,10,timed\n"
                    "t,NVIDIA_H200,bert_large,training,512,8,grad mode,40,out of memory\n"
                    "t,NVIDIA_H200,bert_large,training,512,8,plain,20,timed\n")
    labels = pd.DataFrame([dict(device=d, model="bert_large", mode="training", seq=512, batch=b, option="")
                           for d in ("Tesla V100-PCIE-32GB", "NVIDIA H100 80GB HBM3") for b in (2, 8)])
    got = measured.memory_against_dataset(measured.read_peak_memory(peak), labels)
    assert list(got.columns) == measured.MEMORY_COLUMNS
    assert got["grad_mode_peak_gb"].tolist() == pytest.approx([10 * 2**30 / 1e9, 40 * 2**30 / 1e9])
    assert got["grad_mode_fits_there"].tolist() == [True, False] and got["smallest_dataset_gpu_gb"].tolist() == [32, 32]
    assert pd.isna(got["plain_peak_gb"].iloc[0]) and got["plain_peak_gb"].iloc[1] == pytest.approx(20 * 2**30 / 1e9)
    assert got["dataset_gpus"].iloc[0] == "NVIDIA H100 80GB HBM3, Tesla V100-PCIE-32GB"
    peak.write_text("model,peak_gib\nbert_large,1\n")
    with pytest.raises(measured.MeasuredError, match="peak.csv: missing column"):
        measured.read_peak_memory(peak)


def test_gemm_time_bins_by_hand():
    rows = pd.DataFrame({"latency_ms": [0.01, 0.05, 0.4999, 0.5, 7.0]})
    bins = measured.gemm_time_us(rows)
    assert [(i.left, i.right) for i in bins] == [(0, 50), (50, 500), (50, 500), (500, 5000), (5000, np.inf)]
