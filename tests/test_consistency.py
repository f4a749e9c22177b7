"""Tests of lib.consistency (GEMM shapes read from label fx nodes, ratios against a kernel table), and of the label
checks beside it: lib.dataset_priced and lib.short_kernels."""
import numpy as np
import pandas as pd
import pytest

from lib.consistency import (consistency_table, gemm_shape, kernel_floor_ape, matched_forecast,
                             matched_forecast_by_device, matched_nodes, node_sum_table, per_sample_ratio, repeat_spread)
from lib.dataset_priced import (dataset_priced, dataset_priced_labels, dataset_priced_summary, duration_offset,
                                with_dataset_kernels)
from lib.short_kernels import isolated_floor_ms, label_small_ew_ms, short_kernel_share

MATMUL = "<built-in method matmul of type object at 0x7fcd8c121d60>"
ADDMM = "<built-in method addmm of type object at 0x15552dc96d80>"
BMM = "<built-in method bmm of type object at 0x15552dc96d80>"
# (op, target, input_shapes, output_shape, fw_latency, Name), in the label CSVs' format.
NODES = [
    ("placeholder", "input_ids", "[]", "(2, 8)", 0.0, "input_ids"),
    ("call_module", "bert.embeddings.dense", "[[2, 8, 16]]", "(2, 8, 16)", 0.5, "bert_embeddings_dense"),
    ("call_module", "bert.encoder.layer.0.attention.self.query", "[[2, 8, 16]]", "(2, 8, 32)", 0.3,
     "bert_encoder_layer_0_attention_self_query"),
    ("call_module", "bert.encoder.layer.0.attention.self.key", "[[2, 8, 16]]", "(2, 8, 32)", 0.6,
     "bert_encoder_layer_0_attention_self_key"),
    ("call_function", MATMUL, "[[2, 4, 8, 16], [2, 4, 16, 8]]", "(2, 4, 8, 8)", 0.05, "matmul"),
    ("call_function", ADDMM, "[[32], [16, 16], [16, 32]]", "(16, 32)", 0.2, "addmm"),
    ("call_function", BMM, "[[4, 8, 16], [4, 16, 8]]", "(4, 8, 8)", 0.07, "bmm"),
    ("call_module", "bert.encoder.layer.0.output.dense", "[[2, 8, 64]]", "(2, 8, 16)", 0.0,
     "bert_encoder_layer_0_output_dense"),
    ("call_module", "bert.pooler.dense", "not a shape", "(2, 16)", 0.1, "bert_pooler_dense"),
]


def _label_csv(path):
    df = pd.DataFrame(NODES, columns=["op", "target", "input_shapes", "output_shape", "fw_latency", "Name"])
    df["bw_latency"] = 0.0
    df["dtype"] = "torch.float32"
    df.to_csv(path, index=False)
    return str(path)


def _labels(csv):
    return pd.DataFrame([dict(device="GPU X", gpu="GPU_X", model="bert_large", mode="inference", batch=2,
                              seq=8, csv=csv, num_layer=24)])


# Kernel dataset in tidy form: FC (1,16,16,32) measured three times (median 0.2), the matmul shape
# (8,8,16,8) once, the embeddings FC (1,16,16,16) once; decoys on another GPU and under another op.
KERNELS = pd.DataFrame([
    ("linear", 1, 16, 16, 32, "GPU X", 0.1), ("linear", 1, 16, 16, 32, "GPU X", 0.2),
    ("linear", 1, 16, 16, 32, "GPU X", 0.4), ("bmm", 8, 8, 16, 8, "GPU X", 0.05),
    ("linear", 1, 16, 16, 16, "GPU X", 0.25), ("linear", 1, 16, 16, 32, "GPU Y", 9.0),
    ("bmm", 1, 16, 16, 32, "GPU X", 9.0),
], columns=["op", "B", "M", "N", "K", "device", "latency_ms"]).astype({c: float for c in "BMNK"})


def test_gemm_shape_parses_fx_nodes():
    assert gemm_shape("FC", "call_module", "x.dense", "[[2, 8, 16]]", "(2, 8, 32)") == (1, 16, 16, 32)
    assert gemm_shape("FC", "call_function", ADDMM, "[[32], [16, 16], [16, 32]]", "(16, 32)") == (1, 16, 16, 32)
    assert gemm_shape("BMM", "call_function", MATMUL, "[[2, 4, 8, 16], [2, 4, 16, 8]]", "(2, 4, 8, 8)") == (8, 8, 16, 8)
    assert gemm_shape("BMM", "call_function", BMM, "[[4, 8, 16], [4, 16, 8]]", "(4, 8, 8)") == (4, 8, 16, 8)
    # unreadable or inconsistent shapes are skipped
    assert gemm_shape("FC", "call_module", "x.dense", "not a shape", "(2, 16)") is None
    assert gemm_shape("BMM", "call_function", MATMUL, "[[2, 8, 16], [2, 8, 8]]", "(2, 8, 8)") is None
    # baddbmm(input, a, b): the GEMM's operands follow the added tensor, as addmm's do
    baddbmm = "<built-in method baddbmm of type object at 0x1>"
    assert gemm_shape("BMM", "call_function", baddbmm, "[[4, 8, 8], [4, 8, 16], [4, 16, 8]]", "(4, 8, 8)") == (4, 8, 16, 8)
    # an FC node whose input rows are not its output rows (4 vs 2 x 8) is no linear layer of that shape
    assert gemm_shape("FC", "call_module", "x.dense", "[[4, 16]]", "(2, 8, 32)") is None


def test_matched_nodes_by_hand(tmp_path):
    m = matched_nodes(_labels(_label_csv(tmp_path / "bert_large-inf-8-2.csv")), kernels=KERNELS)
    got = m.set_index("name")
    # bmm (4,8,16,8): not in the kernel table; output_dense: fw 0; pooler: unreadable shape.
    assert sorted(got.index) == ["addmm", "bert_embeddings_dense", "bert_encoder_layer_0_attention_self_key",
                                 "bert_encoder_layer_0_attention_self_query", "matmul"]
    assert got.loc["bert_encoder_layer_0_attention_self_query", "kernel_ms"] == pytest.approx(0.2)  # median
    assert got.loc["bert_encoder_layer_0_attention_self_query", "ratio"] == pytest.approx(1.5)     # 0.3 / 0.2
    assert got.loc["bert_encoder_layer_0_attention_self_key", "ratio"] == pytest.approx(3.0)       # 0.6 / 0.2
    assert got.loc["addmm", "ratio"] == pytest.approx(1.0)                                          # 0.2 / 0.2
    assert got.loc["matmul", ["B", "M", "N", "K"]].tolist() == [8, 8, 16, 8]
    assert got.loc["matmul", "ratio"] == pytest.approx(1.0)
    assert got.loc["bert_embeddings_dense", "ratio"] == pytest.approx(2.0)                         # 0.5 / 0.25
    # layer nodes (first to last layer_0 node) run num_layer times; the prologue once.
    assert got.loc["matmul", "weight"] == 24 and got.loc["addmm", "weight"] == 24
    assert got.loc["bert_embeddings_dense", "part"] == "prologue" and got.loc["bert_embeddings_dense", "weight"] == 1
    # Only BMM asked: FC nodes gone.
    only = matched_nodes(_labels(_label_csv(tmp_path / "b.csv")), op_classes=("BMM",), kernels=KERNELS)
    assert only["name"].tolist() == ["matmul"]


def test_tables_by_hand(tmp_path):
    m = matched_nodes(_labels(_label_csv(tmp_path / "bert_large-inf-8-2.csv")), kernels=KERNELS)
    t = consistency_table(m).set_index("model")
    # ratios 2.0, 1.5, 3.0, 1.0, 1.0 -> median 1.5; outside [0.9, 1.1]: 3 of 5.
    assert t.loc["ALL", "nodes"] == 5 and t.loc["ALL", "labels"] == 1
    assert t.loc["ALL", "median_ratio"] == pytest.approx(1.5)
    assert t.loc["ALL", "outside_pct"] == pytest.approx(60.0)
    assert t.loc["bert_large", "nodes"] == 5
    f = kernel_floor_ape(m).iloc[0]
    # weighted sums: label 0.5 + 24*(0.3 + 0.6 + 0.05 + 0.2) = 28.1; kernel 0.25 + 24*(0.2 + 0.2 + 0.05 + 0.2) = 15.85
    assert f["floor_ape_pct"] == pytest.approx(abs(15.85 - 28.1) / 28.1 * 100)
    assert f["median_floor_ape_pct"] == pytest.approx(abs(1 / 1.5 - 1) * 100)
    assert f["median_label_ratio"] == pytest.approx(1.5)      # one label: its own median
    s = repeat_spread(m).iloc[0]
    assert s["groups"] == 1 and s["median_spread"] == pytest.approx(3.0)  # (1,16,16,32): 0.3, 0.6, 0.2
    # a shape measured exactly twice is a repeat too: 0.3 and 0.6 -> 2
    two = repeat_spread(m[m["name"] != "addmm"]).iloc[0]
    assert two["groups"] == 1 and two["median_spread"] == pytest.approx(2.0)


def test_kernel_floor_ape_over_three_labels():
    # three labels of one node each: two measured as the kernel dataset does (ratio 1, floor 0%), one 4 times slower
    # (ratio 4, floor |1 - 4| / 4 = 75%): the median label ratio is 1 (the mean 2), the floor APE their mean, 25%
    m = pd.DataFrame({"device": "G", "model": "m", "mode": "inference", "seq": 8, "batch": [1, 2, 3], "weight": 1,
                      "kernel_ms": 1.0, "label_fw_ms": [1.0, 1.0, 4.0], "ratio": [1.0, 1.0, 4.0]})
    f = kernel_floor_ape(m).iloc[0]
    assert f["labels"] == 3 and f["median_label_ratio"] == 1.0 and f["floor_ape_pct"] == pytest.approx(25.0)


def test_matched_forecast_by_hand(tmp_path):
    m = matched_nodes(_labels(_label_csv(tmp_path / "bert_large-inf-8-2.csv")), kernels=KERNELS)
    ev = pd.DataFrame([dict(device="GPU X", model="bert_large", mode="inference", batch=2, seq=8, e2e_ms=40.0,
                            neusight_ms=30.0),
                       dict(device="GPU X", model="gpt2_large", mode="inference", batch=2, seq=8, e2e_ms=9.0,
                            neusight_ms=9.0)])                     # no matched node: left out
    f = matched_forecast(m, m["kernel_ms"] / 2, ev)
    assert len(f) == 1 and f.loc[0, "nodes"] == 5
    assert f.loc[0, ["label_ms", "kernel_ms", "pred_ms"]].tolist() == pytest.approx([28.1, 15.85, 7.925])
    # weighted sums (test_tables_by_hand): label 28.1, kernel 15.85; forecast half the kernel, 7.925
    assert f.loc[0, "kernel_over_pred"] == pytest.approx(2.0)
    assert f.loc[0, "label_over_kernel"] == pytest.approx(28.1 / 15.85)
    assert f.loc[0, "matched_share"] == pytest.approx(28.1 / 40)
    assert f.loc[0, "exact_ms"] == pytest.approx(30 + 15.85 - 7.925)
    assert f.loc[0, "neusight_ape"] == pytest.approx(25.0)
    assert f.loc[0, "exact_ape_pct"] == pytest.approx(abs(37.925 - 40) / 40 * 100)
    # each node's forecast meets its own weight (weights 1, 24, 24, 24, 24): 1 + 24 (2 + 3 + 4 + 5) = 337
    assert matched_forecast(m, [1.0, 2.0, 3.0, 4.0, 5.0], ev).loc[0, "pred_ms"] == pytest.approx(337.0)
    # a forecast that reproduces the kernel dataset changes nothing
    same = matched_forecast(m, m["kernel_ms"], ev).iloc[0]
    assert same["exact_ms"] == pytest.approx(30.0) and same["kernel_over_pred"] == pytest.approx(1.0)
    # only the BMM node as measured: FC nodes keep our forecast, the label stays (its one BMM node: w 24 x 0.05 ms)
    bmm = matched_forecast(m, m["kernel_ms"] / 2, ev, only=["BMM"]).iloc[0]
    assert bmm["nodes"] == 1 and bmm["kernel_ms"] == pytest.approx(1.2) and bmm["pred_ms"] == pytest.approx(0.6)
    assert bmm["exact_ms"] == pytest.approx(30.6) and bmm["neusight_ape"] == pytest.approx(25.0)
    # a class with no node in a label keeps the label at its forecast's APE (it used to drop out of the mean)
    none = matched_forecast(m, m["kernel_ms"] / 2, ev, only=["LN"]).iloc[0]
    assert none["nodes"] == 0 and none["exact_ms"] == 30.0 and none["exact_ape_pct"] == pytest.approx(25.0)
    # per device: two labels of one GPU pool their sums (ratio of sums, not mean of ratios)
    two = pd.concat([f, f.assign(model="x", kernel_ms=4.0, pred_ms=4.0, label_ms=4.0, matched_share=0.5,
                                 neusight_ape=5.0, exact_ape_pct=5.0)])
    d = matched_forecast_by_device(two).loc[("GPU X", "inference")]
    assert d["labels"] == 2 and d["kernel_over_pred"] == pytest.approx((15.85 + 4) / (7.925 + 4))
    assert d["label_over_kernel"] == pytest.approx((28.1 + 4) / (15.85 + 4))
    assert d["neusight_ape"] == pytest.approx(15.0) and d["matched_share"] == pytest.approx((28.1 / 40 + 0.5) / 2)


def test_dataset_priced_by_hand():
    # a predicted table: the FC measured three times (median 0.2), a bmm the dataset has on GPU Y only, a forward
    # and a backward softmax of a measured shape, and a memory-bound row no dataset op measures
    table = pd.DataFrame([("linear", 1, 16, 16, 32, np.nan, "fw", 4, 0.1), ("bmm", 1, 16, 16, 32, np.nan, "fw", 2, 0.3),
                          ("softmax", 8, np.nan, np.nan, np.nan, 64, "fw", 1, 0.02),
                          ("softmax", 8, np.nan, np.nan, np.nan, 64, "bw", 1, 0.03),
                          ("mem", np.nan, np.nan, np.nan, np.nan, np.nan, "fw", 3, 0.01)],
                         columns=["op", "B", "M", "N", "K", "H", "phase", "count", "pred_ms"])
    table["total_ms"] = table["pred_ms"] * table["count"]
    kernels = pd.concat([KERNELS[KERNELS.device == "GPU X"].assign(H=np.nan),
                         pd.DataFrame([("softmax", 8.0, 64.0, "GPU X", 0.04)], columns=["op", "B", "H", "device", "latency_ms"])])
    t = with_dataset_kernels(table, kernels)
    # linear: the median 0.2; bmm (1,16,16,32) is measured on GPU X as bmm too (the decoy, 9.0); softmax forward 0.04,
    # backward 0.04 x 1.5 (it reads one 8 x 64 tensor more than the forward's two: lib.traffic); mem: none
    assert t["kernel_ms"].tolist()[:4] == pytest.approx([0.2, 9.0, 0.04, 0.06]) and np.isnan(t["kernel_ms"].iloc[4])
    got = dataset_priced(t)
    total = 0.4 + 0.6 + 0.02 + 0.03 + 0.03
    assert got["forecast_ms"] == pytest.approx(total)
    assert got["dataset_ms"] == pytest.approx(4 * 0.2 + 2 * 9.0 + 0.04 + 0.06 + 0.03)
    assert got["measured_share"] == pytest.approx((total - 0.03) / total)
    assert got["kernel_over_pred"] == pytest.approx((0.8 + 18.0 + 0.1) / (total - 0.03))
    # nothing measured: the forecast stands
    none = dataset_priced(with_dataset_kernels(table.iloc[[4]], kernels))
    assert none["dataset_ms"] == pytest.approx(0.03) and none["measured_share"] == 0 and np.isnan(none["kernel_over_pred"])
    with pytest.raises(ValueError, match="2 GPUs"):
        with_dataset_kernels(table, KERNELS)


def test_bad_labels_frame():
    with pytest.raises(ValueError, match="missing columns"):
        matched_nodes(pd.DataFrame({"device": ["x"]}), kernels=KERNELS)
    with pytest.raises(ValueError, match="op_classes"):
        matched_nodes(pd.DataFrame(), op_classes=("EW",), kernels=KERNELS)


def test_real_p100_v100_bert_fc_agree():
    from lib.labels import load_labels
    labels = load_labels()
    labels = labels[labels.gpu.isin(["Tesla_P100-PCIE-16GB", "Tesla_V100-PCIE-32GB"])
                    & (labels.model == "bert_large") & (labels.csv != "")]
    m = matched_nodes(labels, op_classes=("FC",))
    assert len(m) >= 6
    assert np.all((m.ratio >= 0.8) & (m.ratio <= 1.25)), m[["device", "name", "ratio"]]


def test_dataset_priced_labels_checks_its_forecast_and_splits_the_phases():
    from lib import paths
    from lib.data import load_kernels
    from lib.devices import device_by_name
    from lib.forecast import forecast_table
    from lib.labels import load_labels
    v100 = "Tesla V100-PCIE-32GB"
    labels = load_labels()
    one = labels[(labels.device == v100) & (labels.model == "bert_large") & (labels["mode"] == "training")
                 & (labels.option == "")].head(1).reset_index(drop=True)
    r = one.iloc[0]
    table = forecast_table(paths.MODEL_CONFIGS / "bert_large.json", device_by_name(v100), r.batch, r.seq, "training")
    kernels = load_kernels(devices=[v100])
    by_hand = with_dataset_kernels(table, kernels)
    other = labels[labels.device == "Tesla T4"].head(1)     # a GPU whose kernels are not passed: left out
    got = dataset_priced_labels(pd.concat([one.assign(neusight_ms=table.total_ms.sum()), other.assign(neusight_ms=1.0)]),
                                kernels).iloc[0]
    assert len(dataset_priced_labels(other.assign(neusight_ms=1.0), kernels)) == 0
    assert got.forecast_fw_ms + got.forecast_bw_ms == pytest.approx(table.total_ms.sum())
    assert got.forecast_bw_ms == pytest.approx(table.loc[table.phase == "bw", "total_ms"].sum()) and got.forecast_bw_ms > 0
    assert got.dataset_ms == pytest.approx(dataset_priced(by_hand)["dataset_ms"])
    assert got.dataset_fw_ms + got.dataset_bw_ms == pytest.approx(got.dataset_ms)
    assert got.dataset_ape_pct == pytest.approx(abs(got.dataset_ms - r.e2e_ms) / r.e2e_ms * 100)
    assert (got.fw_ms, got.bw_ms) == (r.fw_ms, r.bw_ms)
    with pytest.raises(ValueError, match="the kernel table sums to"):     # a forecast made with other models
        dataset_priced_labels(one.assign(neusight_ms=table.total_ms.sum() * 1.01), kernels)


def test_dataset_priced_summary_and_duration_offset_by_hand():
    # four labels of one GPU (two inference, two training) and one of another; run times rise with measured / dataset
    rows = [("G", "a", "inference", 100.0, 100.0, 0.0, 110.0, 125.0, 0.5, 1.0, 10.0, 25.0, 110.0, 125.0, 0.0, 0.0),
            ("G", "b", "inference", 200.0, 200.0, 0.0, 190.0, 200.0, 0.7, 1.2, 5.0, 0.0, 190.0, 200.0, 0.0, 0.0),
            ("G", "c", "inference", 400.0, 400.0, 0.0, 380.0, 360.0, 0.6, 1.1, 5.0, 10.0, 380.0, 360.0, 0.0, 0.0),
            ("G", "switchxl4", "inference", 800.0, 800.0, 0.0, 700.0, 640.0, 0.9, 0.8, 12.5, 20.0, 700.0, 640.0, 0.0, 0.0),
            ("H", "a", "training", 300.0, 100.0, 200.0, 330.0, 300.0, 0.4, 1.0, 10.0, 0.0, 90.0, 80.0, 240.0, 220.0)]
    p = pd.DataFrame(rows, columns=["device", "model", "mode", "e2e_ms", "fw_ms", "bw_ms", "neusight_ms", "dataset_ms",
                                    "measured_share", "kernel_over_pred", "neusight_ape", "dataset_ape_pct",
                                    "forecast_fw_ms", "dataset_fw_ms", "forecast_bw_ms", "dataset_bw_ms"])
    s = dataset_priced_summary(p, ["device", "mode"])
    g = s.loc[("G", "inference")]
    assert g.labels == 4 and g.measured_share == pytest.approx(0.675) and g.kernel_over_pred == pytest.approx(1.05)
    assert g.neusight_ape == pytest.approx(8.125) and g.dataset_ape_pct == pytest.approx(13.75)
    assert g.forecast_fw == pytest.approx(0.95)                  # median of 1.1, 0.95, 0.95, 0.875
    assert g.dataset_fw == pytest.approx((1.0 + 0.9) / 2) and np.isnan(g.forecast_bw) and np.isnan(g.dataset_bw)
    h = s.loc[("H", "training")]
    assert (h.forecast_fw, h.dataset_fw, h.forecast_bw, h.dataset_bw) == pytest.approx((0.9, 0.8, 1.2, 1.1))
    d = duration_offset(p)
    assert list(d.index) == [("G", "inference"), ("ALL", "pooled"), ("ALL but SwitchTransformer", "pooled")]
    # G: measured / dataset = 0.8, 1.0, 1.11, 1.25 rises with the run time: rho 1; measured / forecast = 0.909, 1.053,
    # 1.053, 1.143: rho of ranks (1, 2.5, 2.5, 4) with (1, 2, 3, 4)
    assert d.loc[("G", "inference"), "rho_vs_dataset"] == pytest.approx(1.0)
    assert d.loc[("G", "inference"), "rho_vs_forecast"] == pytest.approx(
        pd.Series([1, 2, 3, 4]).corr(pd.Series([1, 2.5, 2.5, 4]), method="spearman"))
    assert d.loc[("G", "inference"), "labels"] == 4 and d.loc[("ALL", "pooled"), "labels"] == 5
    # pooled over within-group ranks: H's one label has rank 1.0 (its group's longest) at measured / dataset 1.0
    within, vs = pd.Series([0.25, 0.5, 0.75, 1.0, 1.0]), pd.Series([0.8, 1.0, 400 / 360, 1.25, 1.0])
    assert d.loc[("ALL", "pooled"), "rho_vs_dataset"] == pytest.approx(within.corr(vs, method="spearman"))
    assert d.loc[("ALL but SwitchTransformer", "pooled"), "labels"] == 4


def test_split_throughput_by_hand():
    from lib.consistency import split_throughput
    # 2*1*1000*1000*100 = 2e8 FLOP = 0.2 GFLOP per kernel; min_gflop 0.1 keeps both, 1.0 keeps none
    k = pd.DataFrame({"device": ["G", "G", "G"], "split": ["train", "test_id", "test_ood"],
                      "B": [1, 1, 1], "M": [1000] * 3, "N": [1000] * 3, "K": [100] * 3,
                      "latency_ms": [0.2, 0.1, 0.1]})
    t = split_throughput(k, min_gflop=0.1).set_index("device")
    # train: 0.2 GFLOP / 0.2 ms = 1 TFLOP/s; test_id: 2 TFLOP/s; ratio 0.5 (test_ood ignored)
    assert t.loc["G", "train_tflops"] == pytest.approx(1.0) and t.loc["G", "test_id_tflops"] == pytest.approx(2.0)
    assert t.loc["G", "ratio"] == pytest.approx(0.5)


def test_node_sum_table_by_hand(tmp_path):
    csv = tmp_path / "bert_large-train-8-2.csv"
    df = pd.DataFrame(NODES, columns=["op", "target", "input_shapes", "output_shape", "fw_latency", "Name"])
    df["bw_latency"] = df["fw_latency"] * 0.1
    df["acc_latency"] = df["fw_latency"] * 0.01
    df["dtype"] = "torch.float32"
    df.to_csv(csv, index=False)
    labels = _labels(str(csv)).assign(mode="training", e2e_ms=40.0, fw_ms=25.0, bw_ms=15.0)
    t = node_sum_table(labels).iloc[0]
    # the parameters' gradient accumulation, timed apart (acc_latency, here a hundredth of the forward), is summed the
    # same way and kept out of node_sum_ape_pct
    assert t.node_acc_ms == pytest.approx(0.2988)
    assert t.bw_acc_ratio == pytest.approx((2.988 + 0.2988) / 15.0)
    # prologue: 0 + 0.5; layer (query .. output_dense, x 24): 0.3 + 0.6 + 0.05 + 0.2 + 0.07 + 0 = 1.22;
    # epilogue (pooler): 0.1  ->  forward 0.5 + 24 * 1.22 + 0.1 = 29.88, backward a tenth of it
    assert t.node_fw_ms == pytest.approx(29.88)
    assert t.node_bw_ms == pytest.approx(2.988)
    assert t.fw_ratio == pytest.approx(29.88 / 25.0)
    assert t.bw_ratio == pytest.approx(2.988 / 15.0)
    assert t.node_sum_ape_pct == pytest.approx(abs(29.88 + 2.988 - 40.0) / 40.0 * 100)
    # an inference label (bw_ms 0) has no backward ratio
    inf = node_sum_table(labels.assign(mode="inference", bw_ms=0.0, e2e_ms=25.0)).iloc[0]
    assert np.isnan(inf.bw_ratio)


def test_short_kernel_share_by_hand():
    table = pd.DataFrame({"pred_ms": [0.01, 0.04, 1.0], "count": [10, 5, 2]})
    table["total_ms"] = table["pred_ms"] * table["count"]       # 0.1 + 0.2 + 2.0 = 2.3
    out = short_kernel_share(table, threshold_ms=0.05)
    assert out["short_kernels"] == 15
    assert out["short_ms"] == pytest.approx(0.3)
    assert out["short_share"] == pytest.approx(0.3 / 2.3)


def test_isolated_floor_ms_takes_small_ew_kernels_only():
    k = pd.DataFrame({"device": ["X", "X", "X", "X", "Y"], "op_class": ["EW", "EW", "EW", "SOFTMAX", "EW"],
                      "B": [1, 2, 1024, 1, 1], "H": [16, 16, 1024, 16, 16],
                      "latency_ms": [0.02, 0.04, 5.0, 9.0, 0.03]})
    out = isolated_floor_ms(k, max_elems=2 ** 16)
    assert out["X"] == pytest.approx(0.03) and out["Y"] == pytest.approx(0.03)   # median of 0.02, 0.04
    at_limit = pd.concat([k, pd.DataFrame([{"device": "X", "op_class": "EW", "B": 1, "H": 2 ** 16, "latency_ms": 9.0}])])
    assert isolated_floor_ms(at_limit, max_elems=2 ** 16)["X"] == pytest.approx(0.03)   # fewer than max_elems only


def test_label_small_ew_ms_by_hand(tmp_path):
    add = "<built-in function add>"
    extra = [("call_function", add, "[[2, 8, 16], [2, 8, 16]]", "(2, 8, 16)", 0.02, "add"),          # 256 elements
             ("call_function", add, "[[2, 8, 2048], [2, 8, 2048]]", "(2, 8, 2048)", 0.03, "add_1"),  # 32768
             ("call_function", add, "[[64, 1024, 1024]]", "(64, 1024, 1024)", 9.0, "add_2"),       # too large
             ("call_function", add, "[[2, 4]]", "(2, 4)", 0.005, "add_3"),                          # too small
             ("call_function", add, "[[2, 8, 4096]]", "(2, 8, 4096)", 0.04, "add_4")]               # 65536: too large
    csv = tmp_path / "bert_large-inf-8-2.csv"
    df = pd.DataFrame(NODES + extra, columns=["op", "target", "input_shapes", "output_shape", "fw_latency", "Name"])
    df["bw_latency"] = 0.0
    df["dtype"] = "torch.float32"
    df.to_csv(csv, index=False)
    out = label_small_ew_ms(_labels(str(csv)))
    assert list(out.index) == ["GPU X"] and out["GPU X"] == pytest.approx(0.025)


def test_minus_overhead_ms_by_hand():
    from lib.short_kernels import minus_overhead_ms
    table = pd.DataFrame({"pred_ms": [0.01, 0.04, 1.0], "count": [10, 5, 2]})
    # (0 x 10) + (0.02 x 5) + (0.98 x 2) = 2.06: a kernel shorter than the overhead costs nothing
    assert minus_overhead_ms(table, 0.02) == pytest.approx(2.06)
    assert minus_overhead_ms(table, 0.0) == pytest.approx(2.3)


def test_per_sample_ratio_by_hand():
    # setting A: batch 2 -> 10 ms (5 per sample), batch 8 -> 48 ms (6 per sample: 1.2x), batch 4 -> 16 ms (0.8x);
    # setting B (another seq) has one label: ratio 1
    labels = pd.DataFrame({"device": "G", "model": "m", "mode": "inference", "option": "",
                           "seq": [512, 512, 512, 1024], "batch": [8, 2, 4, 2],
                           "e2e_ms": [48.0, 10.0, 16.0, 30.0]}, index=[10, 11, 12, 13])
    r = per_sample_ratio(labels)
    assert r.index.tolist() == [10, 11, 12, 13]
    assert r.tolist() == pytest.approx([1.2, 1.0, 0.8, 1.0])
    # a fused label is its own setting: its batch 1 does not become the plain labels' base
    fused = pd.DataFrame({"device": "G", "model": "m", "mode": "inference", "option": "fusion", "seq": 512, "batch": [1],
                          "e2e_ms": [3.0]}, index=[14])
    assert per_sample_ratio(pd.concat([labels, fused])).tolist() == pytest.approx([1.2, 1.0, 0.8, 1.0, 1.0])


def _inference_csv(tmp_path, nodes):
    """An inference label CSV of `nodes` (op, target, input_shapes, output_shape, fw ms, Name), no backward."""
    csv = tmp_path / "bert_large-inf-8-2.csv"
    pd.DataFrame(nodes, columns=["op", "target", "input_shapes", "output_shape", "fw_latency", "Name"]).assign(
        bw_latency=0.0, dtype="torch.float32").to_csv(csv, index=False)
    return csv


def test_node_sum_table_sets_python_only_nodes_apart(tmp_path):
    # one layer (x 24): a query linear (0.3 ms), a size and a view (python only: 0.01 ms each), a full (makes a tensor,
    # a fill kernel: 0.02 ms); node sum 24 * 0.34 = 8.16 ms, of which python only 24 * 0.02 = 0.48 ms
    from lib.calibration import label_nodes, python_only
    nodes = [("placeholder", "input_ids", "[]", "(2, 8)", 0.0, "input_ids"),
             ("call_module", "bert.encoder.layer.0.attention.self.query", "[[2, 8, 16]]", "(2, 8, 32)", 0.3,
              "bert_encoder_layer_0_attention_self_query"),
             ("call_method", "size", "[[2, 8, 32]]", "(1,)", 0.01, "size"),
             ("call_method", "view", "[[2, 8, 32]]", "(2, 8, 4, 8)", 0.01, "view"),
             ("call_function", "<built-in method full of type object at 0x7f00>", "[]", "(2, 8)", 0.02, "full"),
             ("call_module", "bert.encoder.layer.0.attention.self.key", "[[2, 8, 16]]", "(2, 8, 32)", 0.0,
              "bert_encoder_layer_0_attention_self_key")]
    csv = _inference_csv(tmp_path, nodes)
    assert list(python_only(label_nodes(csv))) == [True, False, True, True, False, False]
    t = node_sum_table(_labels(str(csv)).assign(e2e_ms=8.0, fw_ms=8.0, bw_ms=0.0)).iloc[0]
    assert t.node_fw_ms == pytest.approx(8.16) and t.node_python_ms == pytest.approx(0.48)
    assert t.node_sum_ape_pct == pytest.approx(2.0) and t.kernel_node_sum_ape_pct == pytest.approx(4.0)


def test_label_python_node_ms_is_the_median_of_timed_python_only_nodes(tmp_path):
    # python-only nodes: a size (0.01 ms), a view (0.03 ms) and a placeholder (0: not timed); the full makes a tensor
    from lib.short_kernels import label_python_node_ms
    nodes = [("placeholder", "input_ids", "[]", "(2, 8)", 0.0, "input_ids"),
             ("call_method", "size", "[[2, 8, 32]]", "(1,)", 0.01, "size"),
             ("call_method", "view", "[[2, 8, 32]]", "(2, 8, 4, 8)", 0.03, "view"),
             ("call_function", "<built-in method full of type object at 0x7f00>", "[]", "(2, 8)", 0.5, "full")]
    csv = _inference_csv(tmp_path, nodes)
    out = label_python_node_ms(_labels(str(csv)))
    assert out.to_dict() == {"GPU X": pytest.approx(0.02)}
