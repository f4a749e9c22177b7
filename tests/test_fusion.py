"""Tests of lib.fusion and lib.traffic: element-wise chains, reduction prologues and backward kernels, by hand."""
import pandas as pd
import pytest

from lib import fusion
from lib.graph_ops import GRAD_TIMES_OUTPUT
from lib.traffic import traffic_scale, without_backward_traffic_ms


def test_fuse_elementwise_merges_adjacent_chain():
    rows = [dict(aten="a", phase="fw", op="linear", B=1, H=None, count=2, layer="layer", fusable=False),
            dict(aten="m", phase="fw", op="mulu", B=4, H=8, count=2, layer="layer", fusable=True),
            dict(aten="t", phase="fw", op="tanh", B=4, H=8, count=2, layer="layer", fusable=True),
            dict(aten="p", phase="fw", op="add", B=4, H=8, count=2, layer="layer", fusable=True),
            dict(aten="q", phase="fw", op="add", B=4, H=8, count=1, layer="epilogue", fusable=True)]
    fused = fusion.fuse_elementwise(pd.DataFrame(rows))
    assert list(fused.op) == ["linear", "tanh", "add"]
    assert list(fused.fused) == [1, 3, 1]
    assert fused["count"].tolist() == [2, 2, 1]



def test_fused_chain_op_and_what_ends_a_chain():
    base = dict(phase="fw", B=4, H=8, count=2, layer="layer", fusable=True)
    # no transcendental: binary 'add' if any member reads two tensors (here the second), unary 'addu' if none does
    mixed = fusion.fuse_elementwise(pd.DataFrame([dict(base, aten="m", op="mulu"), dict(base, aten="a", op="add")]))
    assert mixed.op.tolist() == ["add"] and mixed.fused.tolist() == [2]
    unary = fusion.fuse_elementwise(pd.DataFrame([dict(base, aten="m", op="mulu"), dict(base, aten="d", op="divu")]))
    assert unary.op.tolist() == ["addu"]
    # kernels run another number of times (a layer's vs the epilogue's count) are not one kernel
    counts = fusion.fuse_elementwise(pd.DataFrame([dict(base, aten="a", op="add"), dict(base, aten="b", op="add",
                                                                                        count=1)]))
    assert counts.aten.tolist() == ["a", "b"]
    # only a fusable kernel folds into a following softmax: a GEMM of the same B x H does not
    gemm = fusion.fuse_elementwise(pd.DataFrame([dict(base, aten="l", op="linear", fusable=False),
                                                 dict(base, aten="s", op="softmax", fusable=False)]))
    assert gemm.aten.tolist() == ["l", "s"]


def test_fuse_elementwise_folds_chain_into_following_reduction():
    rows = [dict(aten="d", phase="fw", op="divu", B=4, H=8, count=2, layer="layer", fusable=True),
            dict(aten="s", phase="fw", op="softmax", B=4, H=8, count=2, layer="layer", fusable=False),
            dict(aten="r", phase="fw", op="add", B=4, H=8, count=2, layer="layer", fusable=True),
            dict(aten="n", phase="fw", op="ln", B=4, H=8, count=2, layer="layer", fusable=False),
            dict(aten="g", phase="fw", op="gelu", B=4, H=16, count=2, layer="layer", fusable=True),
            dict(aten="m", phase="fw", op="ln", B=4, H=8, count=2, layer="layer", fusable=False)]
    fused = fusion.fuse_elementwise(pd.DataFrame(rows))
    assert list(fused.aten) == ["fused(d,s)", "fused(r,n)", "g", "m"]     # gelu's B x H differs: kept
    assert list(fused.fused) == [2, 2, 1, 1]
    # the binary add's second tensor is read on top: 4 B/elem x 4 x 8
    assert list(fused.extra_bytes) == [0.0, 128.0, 0.0, 0.0]
    # ln bytes = 4*2*B*H + 8*H = 256 + 64 = 320 -> (320 + 128) / 320 = 1.4
    assert traffic_scale(fused) == pytest.approx([1.0, 1.4, 1.0, 1.0])
    assert traffic_scale(pd.DataFrame(rows)) == pytest.approx([1.0] * 6)
    chains = fusion.fuse_elementwise(pd.DataFrame(rows), into_reductions=False)
    assert list(chains.aten) == ["d", "s", "r", "n", "g", "m"] and chains.extra_bytes.sum() == 0


def test_fold_charges_only_side_inputs():
    # scores [2, 4, 8] (B = 8 rows, H = 8) + a mask broadcast over the first dim [1, 4, 8], then softmax
    rows = [dict(aten="m", phase="fw", op="add", B=8, H=8, count=1, layer="layer", fusable=True,
                 shapes="[(2, 4, 8), (1, 4, 8)]->[(2, 4, 8)]"),
            dict(aten="s", phase="fw", op="softmax", B=8, H=8, count=1, layer="layer", fusable=False,
                 shapes="[(2, 4, 8)]->[(2, 4, 8)]")]
    assert fusion.side_bytes(rows[0]) == 4 * 32 and fusion.side_bytes(rows[1]) == 0
    assert fusion.side_bytes(dict(rows[0], shapes="[(2, 4, 8), ()]->[(2, 4, 8)]")) == 0     # a scalar operand
    fused = fusion.fuse_elementwise(pd.DataFrame(rows))
    assert list(fused.aten) == ["fused(m,s)"] and fused.extra_bytes.iloc[0] == 128
    # softmax bytes = 4 * 2 * 64 = 512 -> (512 + 128) / 512
    assert traffic_scale(fused) == pytest.approx([1.25])


def test_a_scalar_constant_inside_a_chain_does_not_break_it():
    # GPT-2's attention: scores / scale, a 0-dim fill (4 bytes), where(mask, scores, fill), softmax
    rows = [dict(aten="d", phase="fw", op="divu", B=4, H=8, count=2, layer="layer", fusable=True, bytes=float("nan")),
            dict(aten="f", phase="fw", op="mem", B=None, H=None, count=2, layer="layer", fusable=False, bytes=4.0),
            dict(aten="w", phase="fw", op="add", B=4, H=8, count=2, layer="layer", fusable=True, bytes=float("nan")),
            dict(aten="s", phase="fw", op="softmax", B=4, H=8, count=2, layer="layer", fusable=False,
                 bytes=float("nan"))]
    fused = fusion.fuse_elementwise(pd.DataFrame(rows))
    assert list(fused.aten) == ["f", "fused(fused(d,w),s)"]      # the fill is kept, before the chain
    # the chain's side inputs are every member's: none for the division, one more 4 x 8 tensor for the binary where
    assert fused.extra_bytes.tolist() == [0.0, 4 * 32]
    # a constant of 8 bytes (two fp32 numbers, or one float64) is still one folded into the kernel
    assert fusion.fuse_elementwise(pd.DataFrame([*rows[:1], dict(rows[1], bytes=8.0), *rows[2:]])).aten.tolist() == \
        ["f", "fused(fused(d,w),s)"]
    # a copy of more than one number still ends the chain
    big = fusion.fuse_elementwise(pd.DataFrame([*rows[:1], dict(rows[1], bytes=256.0), *rows[2:]]))
    assert list(big.aten) == ["d", "f", "fused(w,s)"]


def test_backward_softmax_and_layernorm_read_one_tensor_more():
    rows = pd.DataFrame([dict(phase=ph, op=op, B=4, H=8) for ph in ("fw", "bw") for op in ("softmax", "ln", "add")])
    # softmax: 4 * 2 * 32 = 256 B forward, + 4 * 32 in backward -> 1.5; ln: 256 + 8 * 8 = 320 -> 448 / 320 = 1.4
    assert traffic_scale(rows) == pytest.approx([1.0, 1.0, 1.0, 1.5, 1.4, 1.0])
    # a fused prologue's side inputs add to the backward tensor: (256 + 128 + 64) / 256
    assert traffic_scale(rows.iloc[[3]].assign(extra_bytes=64.0)) == pytest.approx([1.75])
    assert traffic_scale(rows, backward=False) == pytest.approx([1.0] * 6)
    # priced as forward kernels: 2 ms of backward softmax at 1.5x was 2 / 1.5 ms; the rest is unchanged
    table = rows.iloc[[0, 3]].assign(total_ms=[1.0, 2.0])
    assert without_backward_traffic_ms(table) == pytest.approx(1.0 + 2.0 / 1.5)


def test_side_inputs_count_without_the_backward_tensor_and_nan_is_none():
    # softmax B = H = 8: 512 B forward; a fused prologue's 128 B side input stays with backward=False: 640 / 512
    fused = pd.DataFrame([dict(phase="fw", op="softmax", B=8, H=8, extra_bytes=128.0, total_ms=1.25)])
    assert traffic_scale(fused, backward=False) == pytest.approx([1.25])
    assert without_backward_traffic_ms(fused) == pytest.approx(1.25)   # no backward kernel: nothing to take off
    # a row without extra_bytes (NaN, e.g. from a concatenated table) has no side input: a backward softmax is 1.5
    bw = pd.DataFrame([dict(phase="bw", op="softmax", B=8, H=8, extra_bytes=float("nan"))])
    assert traffic_scale(bw) == pytest.approx([1.5])


def test_second_kernel_ms_counts_only_the_backward_second_kernels_asked_for():
    from lib.traffic import second_kernel_ms
    table = pd.DataFrame({"aten": ["aten.native_layer_norm_backward.default",
                                   "aten.native_layer_norm_backward.default[dgamma,dbeta]", "aten.clone.default"],
                          "total_ms": [2.0, 0.5, 1.0]})
    assert second_kernel_ms(table) == 0.5
    assert second_kernel_ms(table.iloc[[0, 2]]) == 0.0
    softmax = pd.DataFrame({"aten": ["aten._softmax_backward_data.default",
                                     "aten._softmax_backward_data.default[grad*output]"], "total_ms": [2.0, 0.75]})
    assert second_kernel_ms(softmax, GRAD_TIMES_OUTPUT) == 0.75 and second_kernel_ms(softmax) == 0.0


def test_grad_mode_dropout_adds_the_three_kernels_over_a_plain_backwards_one():
    # a dropout backward over [64, 128] (fp32 grad, bool mask) on the H200, as the forecast prices its three kernels,
    # and as a plain backward's one masked_scale kernel (classify's row: 9 bytes per element): the two agree
    from lib.devices import device_by_name
    from lib.forecast import predict_table
    from lib.graph_ops import classify, kernel_rows
    from lib.traffic import grad_mode_dropout_ms
    rec = {"aten": "aten.native_dropout_backward.default", "is_view": False, "phase": "bw", "layer": "layer",
           "stack": 0, "block": 0, "ins": [((64, 128), 4 * 64 * 128, "float32"), ((64, 128), 64 * 128, "bool")],
           "outs": [((64, 128), 4 * 64 * 128, "float32")]}
    h200 = device_by_name("NVIDIA H200")
    three = predict_table(pd.DataFrame(kernel_rows(rec)), h200)
    plain = predict_table(pd.DataFrame([classify(rec)]), h200)
    assert len(three) == 3
    assert three["total_ms"].sum() - grad_mode_dropout_ms(three) == pytest.approx(plain["total_ms"].sum())
    assert grad_mode_dropout_ms(plain) == 0.0
    assert three["total_ms"].sum() > plain["total_ms"].sum()


def test_sector_read_ms_is_what_the_sectors_add_over_contiguous_bytes():
    # scores[1, 32, 64, 64] += bias read 32 floats apart (40 bytes per element against 12 contiguous), priced on the
    # H200 as a 'mem' kernel: at 12 / 40 of its bytes it would take 12 / 40 of its time, so the rule adds 28 / 40
    import math
    from lib.devices import device_by_name
    from lib.forecast import predict_table
    from lib.graph_ops import STRIDED_READ, classify
    from lib.traffic import sector_read_ms
    shape = (1, 32, 64, 64)
    n = math.prod(shape)
    rec = {"aten": "aten.add_.Tensor", "is_view": False, "phase": "fw", "layer": "layer", "stack": 0, "block": 0,
           "ins": [(shape, 4 * n, "float32")] * 2, "outs": [(shape, 4 * n, "float32")], "read_strides": [1, 32]}
    table = predict_table(pd.DataFrame([classify(rec)]), device_by_name("NVIDIA H200"))
    assert table["aten"].iloc[0] == "aten.add_.Tensor" + STRIDED_READ and table["bytes"].iloc[0] == 40 * n
    assert sector_read_ms(table) == pytest.approx(table["total_ms"].iloc[0] * 28 / 40)
    assert sector_read_ms(table.assign(aten="aten.add_.Tensor")) == 0.0      # no strided call: nothing added
