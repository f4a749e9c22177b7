"""Hand-computed cases of lib.graph_ops: one recorded aten call -> its kernel rows (notebook 05)."""
import math

import pytest

from lib.graph_ops import classify, kernel_rows


def _rec(aten, ins, outs, is_view=False, phase="fw"):
    """A recorded call as lib.graph_capture writes it: tensors as (shape, storage bytes, dtype)."""
    info = [(tuple(s), 4 * math.prod(s), "float32") for s in ins]
    return {"aten": aten, "is_view": is_view, "phase": phase, "layer": "layer", "stack": 0, "block": 0,
            "ins": info, "outs": [(tuple(s), 4 * math.prod(s), "float32") for s in outs]}


def _dims(row):
    return {k: row[k] for k in ("op", "B", "M", "N", "K", "H") if not (isinstance(row[k], float) and math.isnan(row[k]))}


def test_gemms_in_upstream_naming():
    # addmm(bias[3072], x[2048,1024], w[1024,3072]): [M,N] @ [N,K], N = 1024 reduced
    row = classify(_rec("aten.addmm.default", [(3072,), (2048, 1024), (1024, 3072)], [(2048, 3072)]))
    assert _dims(row) == {"op": "linear", "B": 1, "M": 2048, "N": 1024, "K": 3072}
    row = classify(_rec("aten.mm.default", [(2048, 1024), (1024, 512)], [(2048, 512)]))
    assert _dims(row) == {"op": "linear", "B": 1, "M": 2048, "N": 1024, "K": 512}
    # bmm(q[64,512,64], k^T[64,64,512]) -> scores [64,512,512]
    row = classify(_rec("aten.bmm.default", [(64, 512, 64), (64, 64, 512)], [(64, 512, 512)]))
    assert _dims(row) == {"op": "bmm", "B": 64, "M": 512, "N": 64, "K": 512}
    row = classify(_rec("aten.baddbmm.default", [(64, 512, 512), (64, 512, 64), (64, 64, 512)], [(64, 512, 512)]))
    assert _dims(row) == {"op": "bmm", "B": 64, "M": 512, "N": 64, "K": 512}


@pytest.mark.parametrize("aten, op", [("aten._softmax.default", "softmax"),
                                      ("aten._softmax_backward_data.default", "softmax"),
                                      ("aten.native_layer_norm.default", "ln")])
def test_row_kernels_take_rows_of_the_last_dim(aten, op):
    # [8, 16, 512, 512] -> 8*16*512 = 65,536 rows of H = 512
    row = classify(_rec(aten, [(8, 16, 512, 512)], [(8, 16, 512, 512)], phase="bw"))
    assert _dims(row) == {"op": op, "B": 65536, "H": 512} and row["phase"] == "bw"


def test_elementwise_kinds():
    # two full tensors: binary; a tensor and a scalar tensor: the unary 'u' variant
    assert classify(_rec("aten.add.Tensor", [(4, 1024), (4, 1024)], [(4, 1024)]))["op"] == "add"
    assert classify(_rec("aten.mul.Tensor", [(4, 1024), ()], [(4, 1024)]))["op"] == "mulu"
    assert classify(_rec("aten.sub.Tensor", [(4, 1024), (4, 1024)], [(4, 1024)]))["op"] == "add"
    assert classify(_rec("aten.gelu_backward.default", [(4, 1024), (4, 1024)], [(4, 1024)]))["op"] == "mul"
    assert classify(_rec("aten.rsqrt.default", [(4, 1024)], [(4, 1024)]))["op"] == "addu"
    row = classify(_rec("aten.relu_.default", [(4, 8, 1024)], [(4, 8, 1024)]))
    assert _dims(row) == {"op": "relu", "B": 32, "H": 1024} and row["fusable"]
    # other point-wise ops: binary when two inputs are full tensors, unary with one
    assert classify(_rec("aten.maximum.default", [(4, 1024), (4, 1024)], [(4, 1024)]))["op"] == "add"
    assert classify(_rec("aten.masked_fill.Scalar", [(4, 1024), ()], [(4, 1024)]))["op"] == "addu"
    # an add of two 0-dim tensors moves one number: a memory-bound row, not a point-wise kernel over B x H
    assert classify(_rec("aten.add.Tensor", [(), ()], [()]))["op"] == "mem"


def test_a_strided_input_makes_an_elementwise_kernel_memory_bound_by_sectors():
    # scores[1, 32, 2048, 2048] += bias, the bias 32 floats (128 bytes) apart along the innermost dimension: each of its
    # elements costs a 32-byte sector; the scores are read and written in order: 4 + 32 + 4 bytes per element
    n = 32 * 2048 * 2048
    rec = _rec("aten.add_.Tensor", [(1, 32, 2048, 2048)] * 2, [(1, 32, 2048, 2048)])
    row = classify(dict(rec, read_strides=[1, 32]))
    assert row["op"] == "mem" and row["bytes"] == n * (4 + 32 + 4) and not row["fusable"]
    assert row["aten"] == "aten.add_.Tensor[strided read]"         # tagged (lib.traffic.sector_read_ms)
    # 2 floats apart: 8 bytes per element, not a whole sector
    assert classify(dict(rec, read_strides=[1, 2]))["bytes"] == n * (4 + 8 + 4)
    # the bias broadcast over a batch of 2: read again for each batch row, a sector per output element
    rec2 = _rec("aten.add_.Tensor", [(2, 32, 2048, 2048), (1, 32, 2048, 2048)], [(2, 32, 2048, 2048)])
    assert classify(dict(rec2, read_strides=[1, 32]))["bytes"] == 2 * n * (4 + 32 + 4)
    # in order (1) or broadcast (0), or a record without strides (older captures): the element-wise 'add' kernel
    for strides in ([1, 1], [1, 0], None):
        row = classify(dict(rec, read_strides=strides) if strides else rec)
        assert row["op"] == "add" and math.isnan(row["bytes"])


def test_everything_else_is_memory_bound_by_bytes():
    # cat([2, 16, 64], [2, 16, 64]) -> [2, 32, 64]: bytes in + bytes out
    row = classify(_rec("aten.cat.default", [(2, 16, 64), (2, 16, 64)], [(2, 32, 64)]))
    assert row["op"] == "mem" and row["bytes"] == 4 * 2 * (2 * 16 * 64) + 4 * 2 * 32 * 64
    assert not row["fusable"]


@pytest.mark.parametrize("aten", ["aten.embedding.default", "aten.index.Tensor", "aten.index_select.default",
                                  "aten.gather.default"])
def test_gathers_read_the_rows_they_pick(aten):
    # source [1000, 64], indices [2, 16] -> [2, 16, 64]: indices + 2 x output, not the 256 KB source
    row = classify(_rec(aten, [(1000, 64), (2, 16)], [(2, 16, 64)]))
    assert row["op"] == "mem" and row["bytes"] == 4 * 2 * 16 + 2 * 4 * 2 * 16 * 64
    assert not row["fusable"]


def test_embedding_backward_writes_the_whole_table():
    # embedding_dense_backward(grad[2, 16, 64], ids[2, 16]) -> [1000, 64]: every row of the gradient is written
    row = classify(_rec("aten.embedding_dense_backward.default", [(2, 16, 64), (2, 16)], [(1000, 64)], phase="bw"))
    assert row["bytes"] == 4 * (2 * 16 * 64 + 2 * 16) + 4 * 1000 * 64


def test_views_and_allocations_launch_nothing():
    assert classify(_rec("aten.view.default", [(4, 1024)], [(4, 16, 64)], is_view=True)) is None
    assert classify(_rec("aten.empty.memory_format", [], [(4, 1024)])) is None
    assert classify(_rec("aten.t.default", [(4, 1024)], [(1024, 4)])) is None
    # any op the capture marks as a view launches nothing, whatever its name
    from lib.graph_ops import NO_KERNEL
    assert "movedim" not in NO_KERNEL and classify(_rec("aten.movedim.int", [(4, 1024)], [(1024, 4)]))["op"] == "mem"
    assert classify(_rec("aten.movedim.int", [(4, 1024)], [(1024, 4)], is_view=True)) is None


@pytest.mark.parametrize("aten, ins", [("aten.zeros_like.default", [(1024, 1024)]), ("aten.full_like.default", [(1024, 1024)]),
                                       ("aten.new_zeros.default", [(8, 8)]), ("aten.fill_.Scalar", [(1024, 1024)]),
                                       ("aten.uniform_.default", [(1024, 1024)]), ("aten.zeros.default", [])])
def test_fills_write_and_read_nothing(aten, ins):
    # a [1024, 1024] fp32 fill writes 4 MiB and reads no tensor (a `like` op reads its input's shape only)
    row = classify(_rec(aten, ins, [(1024, 1024)]))
    assert row["op"] == "mem" and row["bytes"] == 4 * 1024 * 1024


def test_in_place_scatters_touch_only_their_rows():
    # self [1000, 64], index [128], src [128, 64]: index + src read, 128 rows written (index_add_: also read first)
    ins, outs = [(1000, 64), (128,), (128, 64)], [(1000, 64)]
    index_src = 4 * 128 + 4 * 128 * 64
    assert classify(_rec("aten.index_put_.default", ins, outs))["bytes"] == index_src + 4 * 128 * 64
    assert classify(_rec("aten.index_add_.default", ins, outs))["bytes"] == index_src + 2 * 4 * 128 * 64
    # out of place, self is copied first: the whole of self read and written, besides index and src
    assert classify(_rec("aten.index_put.default", ins, outs))["bytes"] == 2 * 4 * 1000 * 64 + index_src


def test_layernorm_backward_is_two_kernels():
    # native_layer_norm_backward(dy, x [8, 512, 1024], mean, rstd [8, 512, 1], gamma, beta [1024]) -> dx, dgamma, dbeta:
    # the 'ln' kernel for dx (4,096 rows of 1,024), then the column sums, which read dy, x, mean, rstd again
    rec = _rec("aten.native_layer_norm_backward.default",
               [(8, 512, 1024), (8, 512, 1024), (8, 512, 1), (8, 512, 1), (1024,), (1024,)],
               [(8, 512, 1024), (1024,), (1024,)], phase="bw")
    dx, sums = kernel_rows(rec)
    assert _dims(dx) == {"op": "ln", "B": 4096, "H": 1024} and dx == classify(rec)
    assert sums["op"] == "mem" and sums["phase"] == "bw" and sums["aten"].endswith("[dgamma,dbeta]")
    assert sums["bytes"] == 4 * (2 * 8 * 512 * 1024 + 2 * 8 * 512) + 4 * 2 * 1024
    # without gradients for gamma and beta (no affine weights) only the dx kernel runs
    assert len(kernel_rows(dict(rec, outs=rec["outs"][:1]))) == 1
    assert kernel_rows(_rec("aten.view.default", [(4, 8)], [(32,)], is_view=True)) == []


def test_softmax_backward_is_two_kernels():
    # _softmax_backward_data(dy, y [2, 16, 128, 128], dim, dtype) -> dx: tmp = dy * y (the dataset's 'mul' at the same
    # 4,096 rows of 128), then the 'softmax' row kernel; log_softmax's backward has no such product
    rec = _rec("aten._softmax_backward_data.default", [(2, 16, 128, 128), (2, 16, 128, 128)], [(2, 16, 128, 128)],
               phase="bw")
    row, product = kernel_rows(rec)
    assert _dims(row) == {"op": "softmax", "B": 4096, "H": 128} and row == classify(rec)
    assert _dims(product) == {"op": "mul", "B": 4096, "H": 128}
    assert product["phase"] == "bw" and not product["fusable"] and product["aten"].endswith("[grad*output]")
    assert len(kernel_rows(dict(rec, aten="aten._log_softmax_backward_data.default"))) == 1


def test_softmax_backward_product_belongs_to_the_softmax_node():
    import pandas as pd

    from lib.calibration import kernel_node_class
    rec = _rec("aten._softmax_backward_data.default", [(4, 8), (4, 8)], [(4, 8)], phase="bw")
    mul = classify(_rec("aten.mul.Tensor", [(4, 8), (4, 8)], [(4, 8)], phase="bw"))
    assert list(kernel_node_class(pd.DataFrame([*kernel_rows(rec), mul]))) == ["SOFTMAX", "SOFTMAX", "EW"]


def test_dropout_backward_is_three_kernels_as_the_labels_ran_it():
    # native_dropout_backward(grad [2, 16, 128, 128] fp32, mask of the same shape, bool) -> dx, with grad mode on:
    # mask -> float (reads 1 byte, writes 4 per element), * scale ('mulu'), grad * that ('mul'), at 4,096 rows of 128
    n = 2 * 16 * 128 * 128
    rec = _rec("aten.native_dropout_backward.default", [(2, 16, 128, 128)], [(2, 16, 128, 128)], phase="bw")
    rec["ins"].append(((2, 16, 128, 128), n, "bool"))
    cast, scale, product = kernel_rows(rec)
    assert cast["op"] == "mem" and cast["bytes"] == n + 4 * n and cast["aten"].endswith("[mask->float]")
    assert _dims(scale) == {"op": "mulu", "B": 4096, "H": 128} and scale["aten"].endswith("[mask*scale]")
    assert _dims(product) == {"op": "mul", "B": 4096, "H": 128} and product["aten"].endswith("[grad*mask]")
    assert all(r["phase"] == "bw" and not r["fusable"] for r in (cast, scale, product))
    # the plain backward's one kernel (classify's row) read grad and mask and wrote dx: 9 bytes per element
    assert classify(rec)["bytes"] == 9 * n


def test_dropout_backward_kernels_belong_to_the_dropout_node():
    import pandas as pd

    from lib.calibration import kernel_node_class
    rec = _rec("aten.native_dropout_backward.default", [(4, 8)], [(4, 8)], phase="bw")
    rec["ins"].append(((4, 8), 32, "bool"))
    mul = classify(_rec("aten.mul.Tensor", [(4, 8), (4, 8)], [(4, 8)], phase="bw"))
    assert list(kernel_node_class(pd.DataFrame([*kernel_rows(rec), mul]))) == ["MEM", "MEM", "MEM", "EW"]


def test_layernorm_column_sums_belong_to_the_layernorm_node():
    # a label CSV times a layernorm node's backward as one node (both kernels): the one-layer comparison
    # (lib.calibration.predicted_layer) counts the column-sum kernel as LN, while it is priced as 'mem'
    import pandas as pd

    from lib.calibration import kernel_class, predicted_layer
    rec = _rec("aten.native_layer_norm_backward.default", [(4, 8), (4, 8), (4, 1), (4, 1), (8,), (8,)],
               [(4, 8), (8,), (8,)], phase="bw")
    copy = classify(_rec("aten.clone.default", [(4, 8)], [(4, 8)], phase="bw"))
    table = pd.DataFrame([*kernel_rows(rec), copy]).assign(total_ms=[2.0, 1.0, 0.5])
    assert list(kernel_class(table["op"])) == ["LN", "MEM", "MEM"]
    layer = predicted_layer(table, num_layer=1).set_index(["cls", "phase"])["pred_ms"]
    assert layer[("LN", "bw")] == 3.0 and layer[("MEM", "bw")] == 0.5


def test_gradient_sum_is_an_add_priced_as_any_and_in_no_label_node():
    # autograd summing two gradients of [4, 8]: classify's 'add' row, its aten name tagged; in the one-layer
    # comparison it belongs to no label node (UNTIMED), so predicted_layer leaves it out and untimed_layer_ms has it
    import pandas as pd

    from lib.calibration import UNTIMED, kernel_node_class, predicted_layer, untimed_layer_ms
    from lib.graph_ops import GRAD_SUM
    rec = dict(_rec("aten.add.Tensor", [(4, 8), (4, 8)], [(4, 8)], phase="bw"), grad_sum=True)
    (row,) = kernel_rows(rec)
    assert row == dict(classify(rec), aten="aten.add.Tensor" + GRAD_SUM) and _dims(row) == {"op": "add", "B": 4, "H": 8}
    plain = kernel_rows(dict(rec, grad_sum=False))
    assert plain == kernel_rows({k: v for k, v in rec.items() if k != "grad_sum"}) == [classify(rec)]
    table = pd.DataFrame([row, *plain]).assign(total_ms=[3.0, 1.0])
    assert list(kernel_node_class(table)) == [UNTIMED, "EW"]
    layer = predicted_layer(table, num_layer=2).set_index(["cls", "phase"])["pred_ms"]
    assert layer[("EW", "bw")] == 0.5 and layer.sum() == 0.5
    assert untimed_layer_ms(table, num_layer=2) == 1.5
