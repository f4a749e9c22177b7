"""Tests of lib.forecast, lib.labels and lib.calibration (notebook 05); roofline keeps them fast."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lib import calibration, caveats, paths
from lib.devices import TRAIN_GPUS_NVIDIA, load_device
from lib.forecast import forecast, forecast_sweep, forecast_table, main as forecast_main, summarize
from lib.graph import capture, parameter_count
from lib.model_config import GraphError
from lib.labels import PAPER_SEQ, LabelError, load_labels, paper_e2e_table, paper_fusion_table

from cli_run import run_main, run_module

GPT2 = paths.MODEL_CONFIGS / "gpt2_large.json"
BERT = paths.MODEL_CONFIGS / "bert_large.json"
L4 = paths.DEVICE_CONFIGS / "NVIDIA_L4.json"
H100 = paths.DEVICE_CONFIGS / "NVIDIA_H100_80GB_HBM3.json"


def cli(*args):
    return run_main(forecast_main, "python -m lib.forecast", *args)


def test_every_dataset_config_forecasts_in_both_modes():
    # issue 5's acceptance: every config of DLmodel_configs (the six labelled models and six others: BERT-Base,
    # GPT-2 Medium and XL, GPT-3 6.7B and 13B, a one-layer OPT) forecasts on a GPU without labels, in both modes
    configs = sorted(paths.MODEL_CONFIGS.glob("*.json"))
    assert len(configs) >= 12, f"{paths.MODEL_CONFIGS}: expected the dataset's 12 model configs"
    l4 = load_device(L4)
    for config in configs:
        inf, train = (forecast(config, l4, 1, 128, mode) for mode in ("inference", "training"))
        for out in (inf, train):
            assert np.isfinite(out["latency_ms"]) and out["forward_ms"] > 0 and out["kernels"] > 0, config.name
            assert out["latency_ms"] == pytest.approx(out["forward_ms"] + out["backward_ms"]), config.name
        assert inf["backward_ms"] == 0 and train["backward_ms"] > 0, config.name
        # training runs the forward pass again (with dropout) plus the backward, so it takes longer and more kernels
        assert train["latency_ms"] > inf["latency_ms"] and train["kernels"] > inf["kernels"], config.name


def test_cli_notes_the_class_it_builds_for_a_bert_config():
    # bert_large.json names BertLMHeadModel; the forecast builds the labels' classification model (lib.caveats.head_note)
    r = cli("--model", BERT, "--device", L4, "--batch", 1, "--seq", 128, "--mode", "inference", "--method", "roofline")
    assert r.returncode == 0 and json.loads(r.stdout)["kernels"] > 0, r.stderr
    assert "note: bert_large.json names BertLMHeadModel in 'architectures'; the inference forecast builds " \
           "BertForSequenceClassification" in r.stderr


def test_cli_answers_four_keys_for_l4():
    # the real process (DESIGN.md's contract): `python -m lib.forecast` prints the JSON line and exits 0
    r = run_module("lib.forecast", "--model", GPT2, "--device", L4, "--batch", 4, "--seq", 1024, "--mode", "inference",
                   "--method", "roofline")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert set(out) == {"latency_ms", "forward_ms", "backward_ms", "kernels"}
    # the captured graph: 36 layers of 27 kernels (two are the 0-dim fills of GPT-2's 4.x attention: the
    # scale and finfo.min), 22 before them (embeddings, mask) and 2 after (final layernorm, LM head); a
    # change here means the capture changed
    assert out["latency_ms"] > 0 and out["backward_ms"] == 0 and out["kernels"] == 36 * 27 + 22 + 2


def test_cli_takes_a_model_and_a_gpu_by_name():
    # --model gpt2_large --device l4: the same files, so the same forecast, as their paths
    by_path, by_name = (cli("--model", m, "--device", d, "--batch", 2, "--seq", 128, "--mode", "training",
                            "--method", "roofline") for m, d in ((GPT2, L4), ("gpt2_large", "l4")))
    assert by_path.returncode == by_name.returncode == 0, by_name.stderr
    assert json.loads(by_name.stdout) == json.loads(by_path.stdout)
    r = cli("--model", "gpt2", "--device", L4, "--batch", 1, "--seq", 8, "--mode", "inference")
    assert r.returncode == 2 and r.stderr.startswith("error: argument --model: 'gpt2' names 3 known model configs "
                                                     "(gpt2_large, gpt2_med, gpt2_xl)"), r.stderr


def test_cli_warns_when_weights_and_gradients_or_activations_exceed_memory(tmp_path):
    # GPT2-Large: 0.774 B parameters -> fp32 weights 3.1 GB, + gradients 6.2 GB; an L4 spec with 4 GB of memory
    small = tmp_path / "small_l4.json"
    small.write_text(json.dumps({**json.loads(L4.read_text()), "Device": "Small L4", "Dev_Mem": 4}))
    common = ("--model", GPT2, "--device", small, "--batch", 1, "--method", "roofline")
    train, inf = cli(*common, "--seq", 16, "--mode", "training"), cli(*common, "--seq", 1024, "--mode", "inference")
    assert train.returncode == 0 and inf.returncode == 0, train.stderr + inf.stderr
    # 16 tokens save little: the gradients decide
    assert "weights and gradients alone (0.77 B parameters) need 6.2 GB, more than Small L4's 4 GB" in train.stderr
    assert "alone" not in inf.stderr and json.loads(train.stdout)["latency_ms"] > 0
    # 1,024 tokens: the saved activations (lib.sharding.activation_bytes) outgrow the gradients
    saved_gb, weights_gb = caveats.activation_gb(GPT2, 1, 1024), 4 * parameter_count(GPT2) / 1e9
    assert saved_gb > 2 * weights_gb
    train = cli(*common, "--seq", 1024, "--mode", "training")
    assert train.returncode == 0, train.stderr
    assert (f"weights (3.1 GB, 0.77 B parameters) and the activations autograd saves for the backward ({saved_gb:.1f} "
            f"GB) need {weights_gb + saved_gb:.1f} GB, more than Small L4's 4 GB") in train.stderr, train.stderr


def test_cli_kernels_out_adds_up_to_the_printed_forecast(tmp_path):
    out = tmp_path / "kernels.csv"
    r = cli("--model", GPT2, "--device", H100, "--batch", 1, "--seq", 1024, "--mode", "training",
            "--method", "roofline", "--fusion", "--kernels-out", out)
    assert r.returncode == 0, r.stderr
    res, k = json.loads(r.stdout), pd.read_csv(out)
    assert k["total_ms"].sum() == pytest.approx(res["latency_ms"])
    assert k.loc[k.phase == "bw", "total_ms"].sum() == pytest.approx(res["backward_ms"])
    assert k["count"].sum() == res["kernels"] and (k["fused"] >= 1).all()
    assert k["total_ms"].to_numpy() == pytest.approx((k["pred_ms"] * k["count"]).to_numpy())
    assert not k.drop(columns=["count", "total_ms"]).duplicated().any()   # one row per distinct kernel of a block
    assert set(k["op_class"]) <= set(calibration.CLASSES) and {"FC", "BMM", "EW"} <= set(k["op_class"])
    # an unwritable path: one-line error naming it, no JSON, nothing left behind
    bad = tmp_path / "missing" / "k.csv"
    r = cli("--model", GPT2, "--device", H100, "--batch", 1, "--seq", 1024, "--mode", "inference",
            "--method", "roofline", "--kernels-out", bad)
    assert r.returncode == 2 and r.stdout == "" and str(bad) in r.stderr and len(r.stderr.splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kernels.csv"]


def test_write_atomic_leaves_old_file_when_writing_fails(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("old")

    def fail(tmp):
        tmp.write_text("half")
        raise OSError("disk full")
    with pytest.raises(OSError):
        paths.write_atomic(path, fail)
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["t.csv"]
    paths.write_atomic(path, lambda tmp: tmp.write_text("new"))
    assert path.read_text() == "new" and [p.name for p in tmp_path.iterdir()] == ["t.csv"]


@pytest.mark.parametrize("bad, msg", [
    ("arch", "unknown architecture"), ("seq", "longer than"), ("device", "device file not found"),
    ("model_pipe", "argument --model: "), ("device_pipe", "argument --device: ")])
def test_cli_errors_exit_nonzero_with_one_line(tmp_path, bad, msg):
    model, dev, seq = GPT2, L4, 1024
    if bad == "arch":
        model = tmp_path / "cfg.json"
        model.write_text(json.dumps({"model_type": "mamba", "architectures": ["MambaForCausalLM"]}))
    elif bad == "seq":
        seq = 4096  # gpt2 has 1024 positions
    elif bad == "device":
        dev = tmp_path / "nope.json"
    else:   # a pipe (`<(cat x.json)`) would read empty the second time; the CLI never opens this one
        fifo = tmp_path / "fifo.json"
        os.mkfifo(fifo)
        model, dev = (fifo, dev) if bad == "model_pipe" else (model, fifo)
        msg += f"{fifo} is not a regular file"
    r = cli("--model", model, "--device", dev, "--batch", 1, "--seq", seq, "--mode", "inference",
            "--method", "roofline")
    assert r.returncode != 0 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and msg in lines[0], r.stderr


def test_forecast_sums_its_kernel_table_and_backward_gemms_do_twice_the_work():
    dev = load_device(H100)
    tr = forecast(GPT2, dev, 1, 1024, "training", method="roofline")
    table = forecast_table(GPT2, dev, 1, 1024, "training", method="roofline")
    by_phase = table.groupby("phase")["total_ms"].sum()
    assert (tr["forward_ms"], tr["backward_ms"]) == (pytest.approx(by_phase["fw"]), pytest.approx(by_phase["bw"]))
    assert tr["kernels"] == table["count"].sum() and tr["backward_ms"] > tr["forward_ms"] > 0
    # autograd runs two GEMMs per forward GEMM (gradient of the input and of the weight), each of its FLOPs
    g = table[table["op"].isin(["bmm", "linear"])]
    gflop = (2 * g["B"] * g["M"] * g["N"] * g["K"] * g["count"]).groupby(g["phase"]).sum()
    assert gflop["bw"] == pytest.approx(2 * gflop["fw"], rel=1e-12)
    inf = forecast(GPT2, dev, 4, 1024, "inference", method="roofline")
    assert inf["backward_ms"] == 0 and inf["latency_ms"] == pytest.approx(inf["forward_ms"])


def test_summarize_hand_case():
    t = pd.DataFrame({"phase": ["fw", "bw", "fw"], "total_ms": [1.0, 2.0, 3.0], "count": [1, 2, 3]})
    assert summarize(t) == {"latency_ms": 6.0, "forward_ms": 4.0, "backward_ms": 2.0, "kernels": 6}


def test_sweep_matches_single_forecasts():
    devs = [load_device(L4), load_device(H100)]
    sw = forecast_sweep(GPT2, devs, [4, 8], 1024, "inference", method="roofline")
    assert len(sw) == 4 and sw.latency_ms.nunique() == 4
    for dev in devs:        # every (device, batch) row, not only the last one the sweep wrote
        for batch in (4, 8):
            one = forecast(GPT2, dev, batch, 1024, "inference", method="roofline")
            row = sw[(sw.device == dev.name) & (sw.batch == batch)].iloc[0]
            assert row["latency_ms"] == pytest.approx(one["latency_ms"])


def test_api_arguments_are_checked_not_guessed(tmp_path):
    dev = load_device(H100)
    one = forecast(GPT2, dev, 4, 1024, "inference", method="roofline")
    # a label row's batch is a numpy integer: accepted as the same forecast
    assert forecast(GPT2, dev, np.int64(4), 1024, "inference", method="roofline") == one
    # options by keyword only: forecast's sixth parameter used to be fusion, forecast_sweep's method
    with pytest.raises(TypeError, match="positional"):
        forecast(GPT2, dev, 4, 1024, "inference", "roofline")
    with pytest.raises(TypeError, match="positional"):
        forecast_sweep(GPT2, [dev], [4], 1024, "inference", "roofline")
    for bad in ([2.5], ["4"], [True]):   # used to be cut to 2, read as 4, read as 1
        with pytest.raises(GraphError, match="batch must be a positive integer"):
            forecast_sweep(GPT2, [dev], bad, 1024, "inference", method="roofline")
    with pytest.raises(ValueError, match="at least one batch"):
        forecast_sweep(GPT2, [dev], [], 1024, "inference", method="roofline")
    sw = forecast_sweep(GPT2, dev, [4, 4], 1024, "inference", method="roofline")   # one Device; a batch once
    assert len(sw) == 1 and sw["latency_ms"].iloc[0] == pytest.approx(one["latency_ms"])
    k = capture(GPT2, 4, 1024, "inference")
    with pytest.raises(ValueError, match=r"kernels: missing column\(s\) \['count'\]"):
        forecast(None, dev, 4, 1024, "inference", method="roofline", kernels=k.drop(columns="count"))
    with pytest.raises(LabelError, match="no such label folder"):
        load_labels(paths.ROOT / "no-such-folder")
    # a label JSON without one of the four fields it needs is named
    folder = tmp_path / "NVIDIA_H100_80GB_HBM3"
    folder.mkdir()
    (folder / "gpt2_large-inf-1024-4.json").write_text(json.dumps({"e2e_latency": 1, "fw_latency": 1,
                                                                   "bwall_latency": 0}))
    with pytest.raises(LabelError, match="missing field 'num_layer'"):
        load_labels(tmp_path)


def test_fused_forecast_folds_and_sweep_agrees():
    dev = load_device(H100)
    plain = forecast(GPT2, dev, 4, 1024, "inference", method="roofline")
    fused = forecast(GPT2, dev, 4, 1024, "inference", fusion=True, method="roofline")
    assert fused["kernels"] < plain["kernels"] and fused["latency_ms"] < plain["latency_ms"]
    sw = forecast_sweep(GPT2, [dev], [4], 1024, "inference", method="roofline", fusion=True)
    assert sw["latency_ms"].iloc[0] == pytest.approx(fused["latency_ms"])



def test_evaluate_labels_forecasts_a_fused_label_fused(monkeypatch):
    import lib.forecast as forecast_mod
    from lib.label_eval import evaluate_labels
    from lib.labels import device_file_of_folder
    lab = load_labels()
    fused = lab[lab.option == "fusion"].iloc[[0]]
    plain = lab[(lab.option == "") & (lab[["gpu", "model", "mode", "seq", "batch"]] ==
                                      fused[["gpu", "model", "mode", "seq", "batch"]].iloc[0]).all(axis=1)]
    out = evaluate_labels(pd.concat([fused, plain]), methods=("roofline",))
    r = fused.iloc[0]
    args = (paths.MODEL_CONFIGS / f"{r.model}.json", load_device(device_file_of_folder(r.gpu)), r.batch, r.seq, r["mode"])
    assert out["roofline_ms"].tolist() == pytest.approx([forecast(*args, fusion=True, method="roofline")["latency_ms"],
                                                        forecast(*args, method="roofline")["latency_ms"]])
    assert out["roofline_ms"].iloc[0] < out["roofline_ms"].iloc[1]
    # the calibrated NeuSight forecast is fused too (fixed factors here: the fit itself is tested elsewhere)
    monkeypatch.setattr(forecast_mod, "get_calibration", lambda *a, **k: {"factors": {"EW": 0.5}})
    cal = evaluate_labels(fused, methods=(), calibrated=True)
    assert cal["neusight_cal_ms"].iloc[0] == pytest.approx(forecast(*args, fusion=True, calibrate=True)["latency_ms"])


def test_evaluate_labels_equals_one_forecast_per_label():
    """Labels are forecast in groups (one sweep per model, sequence, mode and option): each still gets its own GPU's
    and batch's forecast, also where a group's GPUs measured other batches, in the labels' order."""
    from lib.label_eval import evaluate_labels
    from lib.labels import device_file_of_folder
    lab = load_labels()
    bert = lab[(lab.model == "bert_large") & (lab["mode"] == "inference") & (lab.option == "")]
    picks = pd.concat([bert[(bert.gpu == "Tesla_T4") & (bert.batch == 8)],
                       bert[(bert.gpu == "NVIDIA_H100_80GB_HBM3") & (bert.batch == 16)],   # not T4's batch
                       lab[(lab.option == "fusion")].iloc[[0]],
                       bert[(bert.gpu == "Tesla_V100-PCIE-32GB") & (bert.batch == 8)]])
    assert len(picks) == 4
    out = evaluate_labels(picks, methods=("roofline", "li"))
    for r, got_roofline, got_li in zip(picks.itertuples(), out["roofline_ms"], out["li_ms"]):
        args = (paths.MODEL_CONFIGS / f"{r.model}.json", load_device(device_file_of_folder(r.gpu)), r.batch, r.seq,
                r.mode)
        fusion = r.option == "fusion"
        assert got_roofline == pytest.approx(forecast(*args, fusion=fusion, method="roofline")["latency_ms"], rel=1e-9)
        want_li = forecast(*args, fusion=fusion, method="li")["latency_ms"]
        assert np.isnan(got_li) if np.isnan(want_li) else got_li == pytest.approx(want_li, rel=1e-9)


def test_sweep_calibrates_as_forecast_does(monkeypatch):
    import lib.forecast as forecast_mod
    monkeypatch.setattr(forecast_mod, "get_calibration", lambda *a, **k: {"factors": {"FC": 0.5, "bw": 2.0}})
    dev = load_device(H100)
    one = forecast(GPT2, dev, 4, 1024, "training", method="roofline", calibrate=True)
    assert one["latency_ms"] != pytest.approx(forecast(GPT2, dev, 4, 1024, "training", method="roofline")["latency_ms"])
    sw = forecast_sweep(GPT2, [dev], [4], 1024, "training", method="roofline", calibrate=True)
    assert sw["latency_ms"].iloc[0] == pytest.approx(one["latency_ms"])


def test_kernel_table_sums_the_raw_time_of_a_kernel_called_twice(tmp_path):
    from lib.forecast import write_kernel_table
    # one linear called at two places of a block, calibrated from 2 ms to 1 ms each: one row, 2 ms in total, 4 ms raw
    row = dict(phase="fw", layer="layer", aten="aten.addmm.default", op="linear", B=1, M=8, N=8, K=8, H=np.nan,
               bytes=np.nan, shapes="[]", count=1, pred_ms=1.0, total_ms=1.0, raw_ms=2.0)
    out = pd.read_csv(write_kernel_table(pd.DataFrame([row, row]), tmp_path / "k.csv"))
    assert len(out) == 1 and out[["count", "total_ms", "raw_ms"]].iloc[0].tolist() == [2, 2.0, 4.0]


def test_labels_counts():
    lab = load_labels()
    nv = lab[lab.vendor == "nvidia"]
    assert len(lab) == 134 and len(nv) == 91
    assert (nv.option == "").sum() == 72 and (nv.option == "fusion").sum() == 8
    assert set(nv.option) == {"", "fusion", "dp4", "tp4", "pp4_1"}
    assert set(lab["mode"]) == {"inference", "training"}
    h = lab[(lab.gpu == "NVIDIA_H100_80GB_HBM3") & (lab.model == "gpt3_27") & (lab["mode"] == "training")]
    assert h.device.iloc[0] == "NVIDIA H100 80GB HBM3" and h.seq.iloc[0] == 2048 and h.batch.iloc[0] == 1
    assert h.e2e_ms.iloc[0] == pytest.approx(h.fw_ms.iloc[0] + h.bw_ms.iloc[0], rel=1e-6)
    raw = json.loads(Path(h.json.iloc[0]).read_text())       # forward and backward each from its own field
    assert (h.fw_ms.iloc[0], h.bw_ms.iloc[0]) == (raw["fw_latency"], raw["bwall_latency"])


def test_paper_tables():
    inf, tr = paper_e2e_table("inference"), paper_e2e_table("training")
    assert len(inf) == 7 * 4 * 12 and len(tr) == 4 * 4 * 12      # GPU blocks x methods x (model, batch)
    assert set(inf.method) == {"roofline", "habitat", "li", "neusight"}
    assert set(inf.model) == {"bert_large", "gpt2_large", "gpt3_xl", "opt_13", "gpt3_27", "switchxl4"}
    cell = inf[(inf.gpu == "NVIDIA_H100_80GB_HBM3") & (inf.model == "gpt3_27") & (inf.batch == 8)
               & (inf.method == "neusight")]
    assert cell.paper_ape_pct.iloc[0] == pytest.approx(0.4)
    # a blank cell (no number in the paper's table) is missing, not an error of 0%: 120 inference and 88 training cells
    assert inf.paper_ape_pct.isna().sum() == 120 and tr.paper_ape_pct.isna().sum() == 88
    fu = paper_fusion_table()
    assert len(fu) == 16 and fu.fused.sum() == 8
    row = fu[(fu.gpu == "NVIDIA_A100-PCIE-40GB") & (fu.model == "bert_large") & (fu.batch == 8) & fu.fused]
    assert row.paper_meas_ms.iloc[0] == pytest.approx(174.8) and row.paper_ape_pct.iloc[0] == pytest.approx(17.2)
    assert row.paper_pred_ms.iloc[0] == pytest.approx(204.8)         # the cell "204.8 (17.2%)"


def test_paper_tables_split_blocks_at_rows_of_commas_and_name_a_bad_block(tmp_path):
    # a spreadsheet export separates the GPU blocks by rows of commas instead of blank lines: the same table
    text = (paths.SUMMARY / "nvidia_inf.csv").read_text()
    commas = tmp_path / "inf.csv"
    commas.write_text(text.replace("\n\n", "\n,,,,,,,,,,,,\n"))
    pd.testing.assert_frame_equal(paper_e2e_table("inference", commas), paper_e2e_table("inference"))
    # a block whose second row is not the batch sizes is an error naming the block
    bad = tmp_path / "bad.csv"
    bad.write_text(text.replace("Batch,", "Batches,", 1))
    with pytest.raises(LabelError, match="block 'NVIDIA_H100_80GB_HBM3' does not start with Model and Batch rows"):
        paper_e2e_table("inference", bad)


def test_paper_fusion_table_reads_more_gpus_than_the_shared_copy(tmp_path):
    # a full upstream copy has L4 columns; a header may span more than two columns; an unknown GPU keeps its name
    text = (",,,A100-40GB,,L4,,,Mystery,\n,,,Non-fused,Fused,Non-fused,Fused,Fused,Non-fused,Fused\n"
            "BERT,batch=8,Measured Latency (ms),205.5,174.8,300.0,250.0,251.0,9.0,8.0\n"
            ",,NeuSight Prediction (ms),216.7 (5.4%),204.8 (17.2%),310.0 (3.3%),240.0 (4.0%),241.0 (4.0%),"
            "9.9 (10.0%),8.8 (10.0%)\n")
    (tmp_path / "fusion.csv").write_text(text)
    fu = paper_fusion_table(tmp_path / "fusion.csv")
    assert fu.gpu.tolist() == ["NVIDIA_A100-PCIE-40GB"] * 2 + ["NVIDIA_L4"] * 3 + ["Mystery"] * 2
    assert fu.device.tolist()[2:] == ["NVIDIA L4"] * 3 + ["Mystery"] * 2
    assert fu.paper_meas_ms.tolist()[4] == 251.0 and fu.fused.tolist()[4]
    (tmp_path / "blank.csv").write_text(",,,,A100-40GB\n" + text.split("\n", 1)[1])
    with pytest.raises(LabelError, match="names no GPU"):
        paper_fusion_table(tmp_path / "blank.csv")


def test_paper_seq_is_every_labels_but_a100_switch_2048():
    # the paper's cells carry no sequence: each model's labels share one, except A100-PCIE-40GB's SwitchTransformer
    # inference, measured at 2,048 tokens too, whose paper cell the 512-token label takes (lib.labels.PAPER_SEQ)
    lab = load_labels()
    lab = lab[(lab.vendor == "nvidia") & (lab.option == "")]
    other = lab[lab.seq != lab.model.map(PAPER_SEQ)]
    assert set(zip(other.gpu, other.model, other["mode"], other.seq)) == {
        ("NVIDIA_A100-PCIE-40GB", "switchxl4", "inference", 2048)}
    assert (paper_e2e_table("inference").seq == paper_e2e_table("inference").model.map(PAPER_SEQ)).all()


def test_node_classes():
    nc = calibration.node_class
    assert nc("call_module", "transformer.h.0.ln_1", "(1, 1024, 1280)") == "LN"
    assert nc("call_module", "bert.encoder.layer.0.attention.self.query", "(8, 512, 1024)") == "FC"
    assert nc("call_function", "<built-in method matmul of type object at 0x1>", "(1, 20, 1024, 64)") == "BMM"
    assert nc("call_function", "<built-in function add>", "(1,)") == "NONE"
    assert nc("call_function", "<built-in function add>", "(1, 1024, 1280)") == "EW"
    assert nc("call_module", "transformer.h.0.attn.attn_dropout", "(1, 20, 1024, 1024)") == "MEM"
    assert nc("call_method", "size", "(1,)") == "NONE"
    # OPT's clamp torch.max(scores, tensor(finfo.min)) is an element-wise kernel over the scores
    assert nc("call_function", "<built-in method max of type object at 0x1>", "(1, 32, 2048, 2048)") == "EW"


def test_label_nodes_parts(tmp_path):
    # a block's closing dropout + residual add are function nodes after its last named node: still the layer;
    # the epilogue starts at the next module or at a node that launches no kernel
    rows = [("call_module", "transformer.wte", "wte", "(1, 8, 4)"),
            ("call_module", "transformer.h.0.ln_1", "transformer_h_0_ln_1", "(1, 8, 4)"),
            ("call_module", "transformer.h.0.mlp.dropout", "transformer_h_0_mlp_dropout", "(1, 8, 4)"),
            ("call_function", "<function dropout at 0x1>", "dropout_2", "(1, 8, 4)"),
            ("call_function", "<built-in function add>", "add_15", "(1, 8, 4)"),
            ("call_method", "view", "view_13", "(1, 8, 4)"),
            ("call_function", "<built-in function add>", "add_16", "(1, 8, 4)"),
            ("call_module", "transformer.ln_f", "transformer_ln_f", "(1, 8, 4)")]
    csv = tmp_path / "lab.csv"
    pd.DataFrame([dict(op=o, target=t, Name=n, input_shapes="[]", output_shape=s, fw_latency=0.1, bw_latency=0.2)
                  for o, t, n, s in rows]).to_csv(csv, index=False)
    parts = calibration.label_nodes(csv).set_index("Name")["part"]
    assert parts.to_dict() == {"wte": "prologue", "transformer_h_0_ln_1": "layer",
                               "transformer_h_0_mlp_dropout": "layer", "dropout_2": "layer", "add_15": "layer",
                               "view_13": "epilogue", "add_16": "epilogue", "transformer_ln_f": "epilogue"}
    # the measured layer: the layer's nodes only (0.1 ms forward, 0.2 ms backward each): LN one node, the two
    # dropouts MEM, the residual add EW; the embedding (prologue) and ln_f, add_16 (epilogue) are not in it
    meas = calibration.measured_layer(csv).set_index(["cls", "phase"])["meas_ms"]
    assert meas[("LN", "fw")] == pytest.approx(0.1) and meas[("LN", "bw")] == pytest.approx(0.2)
    assert meas[("MEM", "fw")] == pytest.approx(0.2) and meas[("MEM", "bw")] == pytest.approx(0.4)
    assert meas[("EW", "fw")] == pytest.approx(0.1) and meas[("FC", "fw")] == 0.0


def test_predicted_layer_is_one_layer_of_the_stack():
    # two layers: 4 ms of forward linear and 1 ms of forward add in the stack, 7 ms of linear in the epilogue (LM head)
    table = pd.DataFrame({"op": ["linear", "add", "linear"], "aten": ["aten.addmm.default", "aten.add.Tensor",
                                                                     "aten.mm.default"],
                          "phase": "fw", "layer": ["layer", "layer", "epilogue"], "total_ms": [4.0, 1.0, 7.0]})
    layer = calibration.predicted_layer(table, num_layer=2).set_index(["cls", "phase"])["pred_ms"]
    assert layer[("FC", "fw")] == 2.0 and layer[("EW", "fw")] == 0.5 and layer.sum() == 2.5


def test_class_shares_hand_case():
    # 3 ms of linear, 0.5 + 0.5 ms of element-wise (add, gelu); every other class 0, in CLASSES order
    t = pd.DataFrame({"op": ["linear", "add", "gelu"], "total_ms": [3.0, 0.5, 0.5]})
    shares = calibration.class_shares(t)
    assert list(shares.index) == list(calibration.CLASSES)
    assert shares.to_dict() == {"FC": 75.0, "BMM": 0.0, "EW": 25.0, "SOFTMAX": 0.0, "LN": 0.0, "MEM": 0.0}


def test_fit_factors_hand_case():
    # group 0 predicted twice the measurement, group 1 exact: factors 0.5 and 1 without ridge
    pred = np.array([[2.0, 0.0], [0.0, 3.0], [4.0, 0.0]])
    meas = np.array([1.0, 3.0, 2.0])
    f = calibration.fit_factors(pred, meas, ridge=0.0)
    assert f == pytest.approx([0.5, 1.0], abs=1e-6)
    # one label predicted at twice its measurement, ridge 0.25: minimize (2f - 1)^2 + 0.25 (f - 1)^2 -> 8.5 f = 4.5
    assert calibration.fit_factors(np.array([[2.0]]), np.array([1.0]), ridge=0.25) == pytest.approx([9 / 17], abs=1e-6)


def test_group_totals_sum_each_group():
    # forward linear 1 + 2 ms (FC), backward 4 ms (one group for every backward kernel), in GROUPS order
    table = pd.DataFrame({"phase": ["fw", "fw", "bw"], "op": ["linear", "linear", "linear"], "total_ms": [1.0, 2.0, 4.0]})
    assert calibration.GROUPS == ("FC", "BMM", "EW", "SOFTMAX", "LN", "MEM", "bw")
    assert calibration.group_totals(table).tolist() == [3.0, 0, 0, 0, 0, 0, 4.0]


def test_calibration_reads_only_training_gpus(monkeypatch):
    import lib.devices as devices_mod
    real_load, read = devices_mod.load_device, []

    def spy(path):
        dev = real_load(path)
        read.append(dev.name)
        return dev

    monkeypatch.setattr(devices_mod, "load_device", spy)
    assert set(calibration.training_labels().device) <= set(TRAIN_GPUS_NVIDIA)
    cal = calibration.fit_e2e_calibration(method="roofline")
    assert set(cal["devices"]) == set(TRAIN_GPUS_NVIDIA) and cal["labels"] == 40
    assert len(read) == 40 and set(read) <= set(TRAIN_GPUS_NVIDIA)


def test_summarize_nan_propagates():
    t = pd.DataFrame({"phase": ["fw", "fw"], "total_ms": [1.0, np.nan], "count": [1, 1]})
    assert np.isnan(summarize(t)["latency_ms"])


def test_apply_calibration_by_hand():
    from lib.forecast import apply_calibration
    table = pd.DataFrame({"phase": ["fw", "fw", "bw"], "op": ["linear", "add", "linear"], "total_ms": [4.0, 3.0, 1.0]})
    # forward FC x 0.5, backward x 2, forward EW has no factor (1)
    out = apply_calibration(table, {"FC": 0.5, "bw": 2.0})
    assert out["total_ms"].tolist() == [2.0, 3.0, 2.0] and out["raw_ms"].tolist() == [4.0, 3.0, 1.0]


def test_seed_label_ape_forecasts_each_seed_and_names_the_kind():
    from lib.label_eval import evaluate_labels, seed_label_ape
    labels = load_labels()
    one = labels[(labels.gpu == "NVIDIA_H100_80GB_HBM3") & (labels.model == "bert_large") & (labels["mode"] == "inference")
                 & labels.option.isin(["", "fusion"])].groupby("option").head(1).reset_index(drop=True)
    assert sorted(one.option) == ["", "fusion"]
    tiny = {c: {"layers": 1, "width": 8, "epochs": 1, "batch_size": 4096, "max_rows": 500}
            for c in ("BMM", "FC", "EW", "SOFTMAX", "LN")}
    out = seed_label_ape(one, [0, 3], tiny)
    assert len(out) == 4 and sorted(out.kind.unique()) == ["fused inference", "inference"]
    for seed in (0, 3):   # each seed's rows: evaluate_labels with that seed's configs
        ref = evaluate_labels(one, methods=["neusight"], cfg_by_class={c: {**x, "seed": seed} for c, x in tiny.items()})
        assert out.loc[out.seed == seed, "neusight_ms"].tolist() == pytest.approx(ref["neusight_ms"].tolist())
    assert not np.allclose(out.loc[out.seed == 0, "neusight_ms"], out.loc[out.seed == 3, "neusight_ms"])
    with pytest.raises(ValueError, match="seed-0"):
        evaluate_labels(one, methods=["neusight"], calibrated=True, seed=3)


def test_e2e_seed_table_by_hand():
    from lib.label_eval import e2e_seed_table
    # two training labels on G1 and one on G3, one inference label on G2, each measured at 100 ms; seeds 0 and 1
    per_seed = pd.DataFrame({"seed": [0] * 4 + [1] * 4, "kind": ["training", "training", "inference", "training"] * 2,
                             "device": ["G1", "G1", "G2", "G3"] * 2, "gpu": ["g1", "g1", "g2", "g3"] * 2, "model": "m",
                             "mode": ["training", "training", "inference", "training"] * 2, "batch": [1, 2, 1, 1] * 2,
                             "seq": 8, "option": "", "e2e_ms": 100.0,
                             "neusight_ms": [102.0, 104.0, 109.0, 110.0, 106.0, 92.0, 99.0, 100.0],
                             "neusight_ape": [2.0, 4.0, 9.0, 10.0, 6.0, 8.0, 1.0, 0.0],
                             "paper_label": [True, False, False, True] * 2})   # the paper's tables: G1 batch 1, G3
    paper = pd.Series({("training", "ALL"): 5.0})
    t = e2e_seed_table(per_seed, paper).set_index(["kind", "device"])
    # on the paper's labels: G1 gives 2 (seed 0) and 6 (seed 1); training ALL (2 + 10) / 2 = 6 and (6 + 0) / 2 = 3
    assert t.loc[("training", "G1"), ["paper_labels_min_pct", "paper_labels_max_pct"]].tolist() == [2.0, 6.0]
    assert t.loc[("training", "ALL"), ["paper_labels_min_pct", "paper_labels_max_pct"]].tolist() == [3.0, 6.0]
    assert np.isnan(t.loc[("inference", "G2"), "paper_labels_min_pct"])
    assert list(t.index) == [("inference", "ALL"), ("inference", "G2"), ("training", "ALL"), ("training", "G1"),
                             ("training", "G3")]
    assert t.loc[("training", "G1"), ["seed0_pct", "seed1_pct", "min_pct", "max_pct"]].tolist() == [3.0, 7.0, 3.0, 7.0]
    assert t.loc[("training", "ALL"), ["seed0_pct", "seed1_pct"]].tolist() == [16 / 3, 14 / 3]
    assert t.loc[("inference", "ALL"), ["min_pct", "max_pct"]].tolist() == [1.0, 9.0]
    assert t.loc[("training", "ALL"), "paper_pct"] == 5.0 and np.isnan(t.loc[("inference", "G2"), "paper_pct"])
    # the seeds' mean forecasts: 104 and 98 ms on G1 (APE 4 and 2), 104 ms on G2 (APE 4), 105 ms on G3 (APE 5)
    assert t["mean_forecast_pct"].to_dict() == pytest.approx({("inference", "ALL"): 4.0, ("inference", "G2"): 4.0,
                                                             ("training", "ALL"): 11 / 3, ("training", "G1"): 3.0,
                                                             ("training", "G3"): 5.0})


def test_held_out_label_ape_forecasts_training_gpus_without_their_rows():
    from lib.label_eval import evaluate_labels, held_out_label_ape
    from lib.selection import held_out_configs
    labels = load_labels()
    two = labels[(labels.model == "bert_large") & (labels["mode"] == "inference") & (labels.option == "")
                 & labels.gpu.isin(["Tesla_V100-PCIE-32GB", "NVIDIA_H100_80GB_HBM3"])].groupby("gpu").head(1)
    tiny = {c: {"layers": 1, "width": 8, "epochs": 1, "batch_size": 4096, "max_rows": 500}
            for c in ("BMM", "FC", "EW", "SOFTMAX", "LN")}
    out = held_out_label_ape(two, tiny)
    assert out.device.tolist() == ["Tesla V100-PCIE-32GB"] and out.kind.tolist() == ["inference"]   # H100: none
    v100 = two[two.device == "Tesla V100-PCIE-32GB"]
    ref = evaluate_labels(v100, methods=["neusight"], cfg_by_class=held_out_configs("Tesla V100-PCIE-32GB", tiny))
    assert out.neusight_ms.tolist() == pytest.approx(ref.neusight_ms.tolist())
    # and it is not the forecast of the models that learned from V100's rows
    trained = evaluate_labels(v100, methods=["neusight"], cfg_by_class=tiny)
    assert not np.allclose(out.neusight_ms, trained.neusight_ms)
    assert held_out_label_ape(two[two.device != "Tesla V100-PCIE-32GB"], tiny).empty


def test_e2e_held_out_table_by_hand():
    from lib.label_eval import e2e_held_out_table
    key = {"model": "m", "mode": "inference", "batch": 1, "seq": 8, "option": ""}
    held = pd.DataFrame([{**key, "gpu": "Tesla_T4", "device": "Tesla T4", "kind": "inference", "e2e_ms": 10.0,
                          "neusight_ms": 13.0}])
    committed = pd.DataFrame([{**key, "gpu": "Tesla_T4", "device": "Tesla T4", "kind": "inference", "e2e_ms": 10.0,
                               "neusight_ms": 11.0},
                              {**key, "gpu": "H100", "device": "NVIDIA H100 80GB HBM3", "kind": "inference",
                               "e2e_ms": 10.0, "neusight_ms": 9.0}])
    t = e2e_held_out_table(held, committed).set_index("group")
    assert t.loc["Tesla T4", ["labels", "mape_pct", "trained_mape_pct", "median_ratio"]].tolist() == pytest.approx(
        [1, 30.0, 10.0, 1.3])
    assert t.loc["NVIDIA H100 80GB HBM3", "mape_pct"] == pytest.approx(10.0)
    assert t.loc["every GPU never trained on", "mape_pct"] == pytest.approx(20.0)


def test_before_after_pairs_each_label_with_itself():
    """lib.label_eval.before_after: rows matched on the label (not on position), with its kind and GPU group."""
    from lib.label_eval import before_after
    base = pd.DataFrame({"gpu": ["g1", "g2"], "device": [TRAIN_GPUS_NVIDIA[0], "NVIDIA H100 80GB HBM3"],
                         "model": ["bert_large", "gpt2_large"], "mode": ["inference", "training"], "batch": [1, 2],
                         "seq": [512, 1024], "option": ["fusion", ""], "e2e_ms": [10.0, 20.0]})
    before = base.assign(neusight_ms=[9.0, 22.0], neusight_ape=[10.0, 10.0])
    after = base.assign(neusight_ms=[11.0, 21.0], neusight_ape=[10.0, 5.0]).iloc[::-1]
    t = before_after(before, after)
    assert list(t["ms_before"]) == [9.0, 22.0] and list(t["ms_after"]) == [11.0, 21.0]
    assert list(t["ape_after"]) == [10.0, 5.0]
    assert list(t["kind"]) == ["fused inference", "training"] and list(t["gpus"]) == ["training GPUs", "other GPUs"]
    with pytest.raises(pd.errors.MergeError):      # a label twice on one side is an error, not a silent product
        before_after(pd.concat([before, before]), after)


@pytest.mark.parametrize("args, message", [
    (("--batch", 0, "--seq", 8), "--batch must be a positive integer, got 0"),
    (("--batch", 1, "--seq", -5), "--seq must be a positive integer, got -5"),
    (("--batch", 1.5, "--seq", 8), "argument --batch: invalid int value: '1.5'"),
    (("--batch", 1, "--seq", 8, "--mode", "infer"), "argument --mode: invalid choice: 'infer'"),
], ids=["batch-0", "negative-seq", "fractional-batch", "unknown-mode"])
def test_cli_argument_errors_are_one_line_naming_the_argument(args, message):
    mode = () if "--mode" in args else ("--mode", "inference")
    r = cli("--model", GPT2, "--device", L4, *args, *mode, "--method", "roofline")
    assert r.returncode == 2 and r.stdout == "" and r.stderr.strip() == r.stderr.strip().splitlines()[0]
    assert message in r.stderr, r.stderr


def test_cli_says_fused_training_is_unvalidated():
    base = ("--model", GPT2, "--device", L4, "--batch", 1, "--seq", 8, "--method", "roofline", "--fusion")
    training, inference = cli(*base, "--mode", "training"), cli(*base, "--mode", "inference")
    assert training.returncode == 0 and "every fused label of the dataset is inference" in training.stderr
    assert inference.returncode == 0 and "every fused label" not in inference.stderr
    assert json.loads(training.stdout)["backward_ms"] > 0


def test_cli_a_bad_cache_migration_is_one_line(tmp_path):
    # NEUSIGHT_MIGRATE_FROM names a fingerprint with no kernel table to compare with: lib.data.DataError, one line
    # (without the committed weights, which would serve every model before a migration is tried)
    env = {**os.environ, "NEUSIGHT_BUILD": str(tmp_path / "build"), "NEUSIGHT_MIGRATE_FROM": "0123456789abcdef",
           "NEUSIGHT_NO_REFERENCE": "1"}
    args = ["--model", GPT2, "--device", L4, "--batch", 1, "--seq", 128, "--mode", "inference"]
    r = subprocess.run([sys.executable, "-m", "lib.forecast", *map(str, args)], capture_output=True, text=True,
                       cwd=paths.ROOT, env=env, timeout=900)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("error: NEUSIGHT_MIGRATE_FROM=0123456789abcdef: no kernel table")
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_calibration_key_names_how_the_predictors_were_trained(monkeypatch):
    from lib import forecast as forecast_mod, train
    key = forecast_mod._calibration_key("neusight", "spec", None)
    assert forecast_mod._calibration_key("neusight", "spec", None) == key
    monkeypatch.setattr(train, "cache_folder", lambda: "torch0-numpy0-pandas0-blas-other-threads1")
    assert forecast_mod._calibration_key("neusight", "spec", None) != key   # weights trained another way


@pytest.mark.parametrize("device, classes", [
    (H100, "BMM, EW, FC, LN, SOFTMAX"),                                 # measured, but in test_ood only
    (paths.DEVICE_CONFIGS / "AMD_Instinct_MI100.json", "BMM, FC"),      # training rows of vector ops only
], ids=["H100", "MI100"])
def test_cli_li_names_the_op_classes_without_training_split_measurements(device, classes):
    r = cli("--model", GPT2, "--device", device, "--batch", 1, "--seq", 8, "--mode", "inference", "--method", "li")
    assert r.returncode == 2 and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1
    assert (f"Li et al. fits on measurements of the target itself, and {load_device(device).name} has no "
            f"training-split (split == 'train') measurements of op class {classes}") in r.stderr, r.stderr


def test_cli_habitat_cap_is_not_a_forecast(tmp_path):
    # a GPU of 1 SM at 10 MHz, 1 GB/s and 1 GFLOP/s: habitat holds GPT-2's large GEMMs at its 1e12 ms cap
    lo = tmp_path / "lo.json"
    lo.write_text(json.dumps({"Device": "NVIDIA Lo", "Dev_Mem": 0.1, "Mem_Bw": 1, "Num_Sm": 1, "Core_Per_SM": 1,
                              "Freq": 10, "SingleFLOPs": 1, "L2Cache": 0.01}))
    r = cli("--model", GPT2, "--device", lo, "--batch", 1, "--seq", 8, "--mode", "inference", "--method", "habitat")
    assert r.returncode == 2 and r.stdout == "", r.stdout
    assert r.stderr.startswith("error: method 'habitat' cannot forecast NVIDIA Lo: a kernel's predicted latency "
                               "overflows (habitat's cap of 1e+12 ms)") and len(r.stderr.strip().splitlines()) == 1


def test_cli_kernels_out_may_not_overwrite_an_input(tmp_path):
    model, device = tmp_path / "gpt2.json", tmp_path / "l4.json"     # copies: a failing check would overwrite them
    model.write_text(GPT2.read_text())
    device.write_text(L4.read_text())
    for inp in (model, device):
        r = cli("--model", model, "--device", device, "--batch", 1, "--seq", 64, "--mode", "inference", "--method",
                "roofline", "--kernels-out", inp)
        assert r.returncode == 2 and "also an input" in r.stderr and r.stdout == "", r.stderr
    assert model.read_text() == GPT2.read_text() and device.read_text() == L4.read_text()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_cli_that_cannot_print_its_answer_fails_and_leaves_no_kernel_table(tmp_path):
    out = tmp_path / "k.csv"
    with open("/dev/full", "w") as full:   # every write: no space left on the device
        r = subprocess.run([sys.executable, "-m", "lib.forecast", "--model", str(GPT2), "--device", str(L4), "--batch",
                            "1", "--seq", "8", "--mode", "inference", "--method", "roofline", "--kernels-out", str(out)],
                           stdout=full, stderr=subprocess.PIPE, text=True, cwd=paths.ROOT, timeout=900)
    assert r.returncode == 2 and list(tmp_path.iterdir()) == []
    assert r.stderr.strip().splitlines()[-1] == ("error: cannot write the result to standard output (No space left on "
                                                 "device)") and "Traceback" not in r.stderr


@pytest.mark.parametrize("module, step", [("lib.forecast", "forecast_table"), ("lib.sweep", "forecast_sweep")])
def test_cli_names_the_model_config_when_its_sizes_make_a_bad_kernel(module, step, monkeypatch, capsys):
    # lib.forecast and lib.sweep say it alike (lib.forecast.input_error)
    import importlib
    from lib.kernel_input import KernelInputError
    cli_module = importlib.import_module(module)

    def bad(*a, **k):
        raise KernelInputError("column 'K' must be a positive integer for bmm/linear (row 16)")
    monkeypatch.setattr(cli_module, step, bad)
    assert cli_module.main(["--model", str(GPT2), "--device", str(L4), "--batch", "1", "--seq", "8", "--mode",
                            "inference"]) == 2
    assert capsys.readouterr().err == (f"error: {GPT2}: the model's graph has a kernel the predictors cannot take "
                                       "(column 'K' must be a positive integer for bmm/linear (row 16)); check the "
                                       "config's sizes\n")


def test_cli_kernels_out_is_not_standard_output(tmp_path):
    # standard output carries the JSON line: '-' is refused, not written as a file named '-'
    env = {**os.environ, "PYTHONPATH": str(paths.ROOT)}
    r = subprocess.run([sys.executable, "-m", "lib.forecast", "--model", str(GPT2), "--device", str(L4), "--batch", "1",
                        "--seq", "8", "--mode", "inference", "--method", "roofline", "--kernels-out", "-"],
                       capture_output=True, text=True, cwd=tmp_path, env=env, timeout=900)
    assert r.returncode == 2 and r.stdout == "" and list(tmp_path.iterdir()) == []
    assert r.stderr.startswith("error: argument --kernels-out: '-' (standard output) is not supported")
    assert len(r.stderr.strip().splitlines()) == 1


def test_on_paper_labels_flags_the_labels_with_a_paper_cell():
    from lib.label_eval import on_paper_labels
    # the paper's inference table has a cell for (g1, m, 1, 8) only, training's for (g1, m, 2, 8): kinds kept apart
    inf = pd.DataFrame({"gpu": ["g1", "g1"], "model": pd.Categorical(["m", "m"]), "batch": [1, 2], "seq": [8, 8],
                        "paper_neusight": [3.0, np.nan]})
    train = inf.assign(paper_neusight=[np.nan, 4.0])
    per_seed = pd.DataFrame({"kind": ["inference", "inference", "training", "training", "fused inference"],
                             "gpu": "g1", "model": "m", "batch": [1, 2, 1, 2, 1], "seq": 8})
    flags = on_paper_labels(per_seed, {"inference": inf, "training": train})
    assert flags.tolist() == [True, False, False, True, False]


def test_e2e_seed_table_mean_forecast_averages_three_seeds():
    from lib.label_eval import e2e_seed_table
    # one label measured at 100 ms, forecast 100, 100 and 130 ms by three seeds: the mean forecast (110 ms) is 10% off
    # (the median forecast would be exact)
    per_seed = pd.DataFrame({"seed": [0, 1, 2], "kind": "inference", "device": "G", "gpu": "g", "model": "m",
                             "mode": "inference", "batch": 1, "seq": 8, "option": "", "e2e_ms": 100.0,
                             "neusight_ms": [100.0, 100.0, 130.0], "neusight_ape": [0.0, 0.0, 30.0]})
    t = e2e_seed_table(per_seed).set_index(["kind", "device"])
    assert t.loc[("inference", "G"), "mean_forecast_pct"] == pytest.approx(10.0)
    assert t.loc[("inference", "G"), ["min_pct", "max_pct"]].tolist() == [0.0, 30.0]


def test_sector_read_labels_price_only_strided_settings_again():
    # a Switch label (its self-attention adds a permuted position bias) and a BERT one (no strided call), as
    # evaluate_labels would give them: the Switch forecast loses what the sector rule added, BERT's keeps all
    from lib.devices import device_by_name
    from lib.forecast import forecast_table, summarize
    from lib.label_eval import sector_read_labels
    from lib.traffic import sector_read_ms
    rows = []
    for model in ("switchxl4", "bert_large"):
        table = forecast_table(paths.MODEL_CONFIGS / f"{model}.json", device_by_name("Tesla T4"), 1, 128, "inference")
        rows.append(dict(gpu="Tesla_T4", device="Tesla T4", model=model, mode="inference", batch=1, seq=128, option="",
                         e2e_ms=100.0, neusight_ms=summarize(table)["latency_ms"], neusight_ape=0.0,
                         expected=sector_read_ms(table)))
    ev = pd.DataFrame(rows)
    got = sector_read_labels(ev.drop(columns="expected"))
    assert got["strided"].tolist() == [True, False] and got["kind"].tolist() == ["inference"] * 2
    assert got["sector_ms"].iloc[0] == pytest.approx(ev["expected"].iloc[0]) and got["sector_ms"].iloc[0] > 0
    assert got["sector_ms"].iloc[1] == 0.0
    assert (got["without_ms"] == got["neusight_ms"] - got["sector_ms"]).all()
    assert got["without_ape"].tolist() == pytest.approx(list(abs(got["without_ms"] - 100.0)))
