"""The label settings' softmax and layernorm kernels, their dims files and their measurements (lib.label_reductions)."""
import pandas as pd
import pytest

from lib import label_reductions as R
from lib.devices import device_by_name
from lib.profile_ops import VEC_DIMS, read_dims

BERT_TRAINING = pd.DataFrame([{"model": "bert_large", "batch": 2, "seq": 512, "mode": "training"}])


@pytest.fixture(scope="module")
def kernels():
    return R.reduction_kernels(BERT_TRAINING)


def test_backward_calls_carry_their_second_kernel(kernels):
    # BERT-Large, batch 2, 512 tokens, 16 heads: attention softmax over 2 x 16 x 512 rows of 512; layernorm over
    # 1,024 rows of 1,024. A backward call is its row kernel and a second one with the same B and H.
    calls = kernels.groupby("call")
    firsts = kernels[~kernels["second"]]
    assert set(map(tuple, firsts[["op", "B", "H"]].drop_duplicates().astype({"B": int, "H": int}).values)) == {
        ("softmax", 16384, 512), ("ln", 1024, 1024)}
    sizes = calls.size()
    backward = firsts.set_index("call")["phase"] == "bw"
    assert (sizes[backward.index[backward]] == 2).all() and (sizes[backward.index[~backward]] == 1).all()
    second = kernels[kernels["second"]]
    assert set(second["op"]) == {"mul", "mem"} and (second["phase"] == "bw").all()
    assert (second["B"].to_numpy() == firsts.set_index("call").loc[second["call"], "B"].to_numpy()).all()


def test_forecast_of_a_backward_call_adds_its_second_kernel(kernels):
    from lib.forecast import predict_table
    h200 = device_by_name("NVIDIA H200")
    table = predict_table(kernels.assign(count=1), h200)
    f = R.forecast_reductions(BERT_TRAINING, h200).set_index(R.KERNEL_KEYS)["pred_ms"]
    assert len(f) == 4   # softmax and ln, forward and backward
    call = table[(table["op"] == "softmax") & (table["phase"] == "bw")]["call"].iloc[0]
    assert f[("softmax", "bw", 16384, 512)] == pytest.approx(table.loc[table["call"] == call, "pred_ms"].sum())
    assert f[("softmax", "bw", 16384, 512)] > 1.5 * f[("softmax", "fw", 16384, 512)]   # traffic rule + the product


def test_write_dims_round_trips_through_the_collector(tmp_path):
    shapes = pd.DataFrame({"op": ["softmax", "softmax", "ln", "softmax"], "B": [8, 2, 4, 8], "H": [16, 32, 16, 16]})
    path = R.write_dims(shapes, "softmax", tmp_path / "d" / "softmax.csv")
    assert path.read_text().splitlines()[0] == "B;H"
    assert read_dims(path, VEC_DIMS) == [(8, 16), (2, 32)]
    with pytest.raises(ValueError, match="expected one of"):
        R.write_dims(shapes, "bmm", tmp_path / "x.csv")


def _measured(root, folder, ops):
    d = root / "GPU_torch1_cuda1" / folder
    d.mkdir(parents=True)
    pd.DataFrame({"OPName": ops, "Latency": [0.5] * len(ops), "Device": "GPU", "Kernel Name": "k",
                  "Kernels": [";k" * (i + 1) for i in range(len(ops))],
                  "B": [8] * len(ops), "H": [16] * len(ops)}).to_csv(d / "softmax.csv", index=False)


def test_measured_reductions_read_phases_from_the_collector_ops(tmp_path):
    assert R.measured_reductions(tmp_path).empty
    _measured(tmp_path, "label-shapes-gpu-busy", ["softmax", "softmax_bw"])
    assert R.measured_reductions(tmp_path).empty              # the dataset's way: none measured
    busy = R.measured_reductions(tmp_path, gpu_busy=True)
    assert list(zip(busy["op"], busy["phase"])) == [("softmax", "fw"), ("softmax", "bw")]
    assert busy["kernels"].tolist() == [1, 2]
    assert (busy["run"] == "GPU_torch1_cuda1").all()


def test_measured_reductions_name_the_file_of_an_unknown_op(tmp_path):
    _measured(tmp_path, "label-shapes", ["softmax", "add"])   # add: no collector op of the label shapes
    with pytest.raises(ValueError, match=r"softmax\.csv: ops \['add'\]"):
        R.measured_reductions(tmp_path)


def _training_label(tmp_path, nodes):
    """One training label (load_labels' columns) whose CSV has `nodes`: (Name, op, target, output_shape, fw, bw) ms."""
    csv = tmp_path / "label.csv"
    pd.DataFrame([{"Name": n, "op": o, "target": t, "input_shapes": "[]", "output_shape": s, "fw_latency": f,
                   "bw_latency": b} for n, o, t, s, f, b in nodes]).to_csv(csv, index=False)
    return pd.DataFrame([{"device": "GPU", "vendor": "nvidia", "model": "m", "batch": 1, "seq": 4, "mode": "training",
                          "option": "", "csv": str(csv)}])


def test_dropout_against_division_pairs_nodes_of_one_size(tmp_path):
    # a training label CSV's layer (fx names function nodes by function): the scores' division and the probabilities'
    # dropout (1 x 2 x 4 x 4 = 32 elements), and a dropout of another size, which has no division to pair with
    nodes = [("transformer_h_0_ln_1", "call_module", "transformer.h.0.ln_1", "(1, 4, 8)", 0.02, 0.02),
             ("truediv", "call_function", "<built-in function truediv>", "(1, 2, 4, 4)", 0.10, 0.10),
             ("transformer_h_0_attn_attn_dropout", "call_module", "transformer.h.0.attn.attn_dropout", "(1, 2, 4, 4)",
              0.12, 0.33),
             ("transformer_h_0_attn_resid_dropout", "call_module", "transformer.h.0.attn.resid_dropout", "(1, 4, 8)",
              0.05, 0.07)]
    labels = _training_label(tmp_path, nodes)
    out = R.dropout_against_division(labels)
    assert len(out) == 1 and out["elements"].iloc[0] == 32
    assert out["bw_ratio"].iloc[0] == pytest.approx(3.3)
    assert out["plain_ratio"].iloc[0] == 9 / 8 and out["grad_mode_ratio"].iloc[0] == 25 / 8


def test_add_node_times_reads_a_layers_adds_of_tensors(tmp_path):
    # a layer's residual add (1 x 4 x 8 = 32 elements) and an add of two python numbers (no tensor: not EW), and
    # a prologue add outside the layer
    nodes = [("add", "call_function", "<built-in function add>", "(1, 4, 8)", 0.03, 0.01),
             ("transformer_h_0_ln_1", "call_module", "transformer.h.0.ln_1", "(1, 4, 8)", 0.02, 0.02),
             ("add_1", "call_function", "<built-in function add>", "()", 0.0, 0.0),
             ("add_2", "call_function", "<built-in function add>", "(1, 4, 8)", 0.04, 0.007),
             ("transformer_h_0_mlp_c_fc", "call_module", "transformer.h.0.mlp.c_fc", "(1, 4, 32)", 0.05, 0.1)]
    labels = _training_label(tmp_path, nodes)
    out = R.add_node_times(labels)
    assert list(out["node"]) == ["add_2"] and out["elements"].iloc[0] == 32
    assert out[["fw_ms", "bw_ms"]].iloc[0].tolist() == pytest.approx([0.04, 0.007])
    assert R.add_node_times(labels.assign(mode="inference")).empty
