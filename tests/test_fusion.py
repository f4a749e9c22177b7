"""Tests of lib.fusion: element-wise chains and reduction prologues, by hand."""
import pandas as pd
import pytest

from lib import fusion


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
    assert fusion.fused_scale(fused) == pytest.approx([1.0, 1.4, 1.0, 1.0])
    assert fusion.fused_scale(pd.DataFrame(rows)) == pytest.approx([1.0] * 6)
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
    assert fusion.fused_scale(fused) == pytest.approx([1.25])
