"""lib.direct: features, hand-counted parameter numbers, a tiny training run and its cache."""
import numpy as np
import pandas as pd
import pytest
import torch

from lib import direct, paths, train
from lib.data import EW_OPS, load_kernels
from lib.devices import device_by_name
from lib.train import TrainConfig

TINY = TrainConfig(width=8, epochs=2, batch_size=256, patience=2)


def test_feature_names():
    assert direct.feature_names("BMM") == ["B", "M", "N", "K", *direct.SPEC]
    assert len(direct.feature_names("EW")) == 2 + len(EW_OPS) + 7
    assert direct.feature_names("LN")[:2] == ["B", "H"]
    with pytest.raises(direct.DirectError, match="op_class"):
        direct.feature_names("CONV")


def test_raw_features_are_logs_and_spec_is_looked_up():
    t4 = device_by_name("Tesla T4")
    df = pd.DataFrame({"op": ["bmm"], "B": [2.0], "M": [8.0], "N": [16.0], "K": [32.0], "device": ["Tesla T4"]})
    x = direct.raw_features(df, "BMM")
    assert x.shape == (1, 11)
    np.testing.assert_allclose(x[0, :4], np.log([2, 8, 16, 32]), rtol=1e-6)
    np.testing.assert_allclose(x[0, 4], np.log(t4.mem_bw_gbps), rtol=1e-6)   # looked up by name
    ew = pd.DataFrame({"op": ["gelu"], "B": [4.0], "H": [1024.0], "device": ["Tesla T4"]})
    onehot = direct.raw_features(ew, "EW")[0, 2:2 + len(EW_OPS)]
    assert onehot.sum() == 1 and onehot[EW_OPS.index("gelu")] == 1


def test_bad_input_names_the_field():
    df = pd.DataFrame({"op": ["bmm"], "B": [2.0], "M": [8.0], "N": [16.0], "device": ["Tesla T4"]})
    with pytest.raises(direct.DirectError, match="'K'"):
        direct.raw_features(df, "BMM")
    with pytest.raises(direct.DirectError, match="'M'"):
        direct.raw_features(df.assign(K=1.0, M=0.0), "BMM")
    with pytest.raises(direct.DirectError, match="arch"):
        direct.build_model("rnn", 11, 2, 8)


def test_param_counts_by_hand():
    # MLP, 11 inputs, 2 hidden layers of 4: (11*4+4) + (4*4+4) + (4+1) = 48 + 20 + 5
    assert direct.count_params(direct.build_model("mlp", 11, 2, 4)) == 73
    # Transformer, 11 features, d=4, 1 layer, ff = 2*4 = 8:
    #   token weights 11*4 + feature embeddings 11*4                      = 88
    #   attention in_proj 3*4*4 + 12, out_proj 4*4 + 4                    = 80
    #   ff 4*8 + 8 + 8*4 + 4, two LayerNorms 2*(4+4)                       = 92
    #   final LayerNorm 4+4, head 4+1                                      = 13
    assert direct.count_params(direct.build_model("transformer", 11, 1, 4)) == 88 + 80 + 92 + 13


@pytest.mark.parametrize("arch", direct.ARCHS)
def test_forward_shapes(arch):
    model = direct.build_model(arch, 20, 2, 8)
    assert model(torch.zeros(5, 20)).shape == (5,)


def test_train_predict_and_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    p = direct.train_direct("BMM", "mlp", layers=1, cfg=TINY, max_rows=400)
    assert not p.info["cached"] and p.info["train_rows"] == 400 and 1 <= p.info["epochs"] <= TINY.epochs
    assert p.num_params == (11 * 8 + 8) + (8 + 1)
    test = load_kernels(ops="BMM", splits=["test_id", "test_ood"]).head(50)
    pred = p.predict(test)
    assert pred.shape == (50,) and np.all(np.isfinite(pred)) and np.all(pred > 0)
    # the output's offset: the mean log latency of the training rows (a geometric mean, not the mean's log)
    rows = direct.training_rows("BMM", 400, TINY.seed)
    assert p.log_offset == pytest.approx(float(np.mean(np.log(rows["latency_ms"]))))

    def no_training(*a, **k):
        raise AssertionError("a cached predictor was trained again")
    monkeypatch.setattr(train, "fit", no_training)
    again = direct.train_direct("BMM", "mlp", layers=1, cfg=TINY, max_rows=400)
    assert again.info["cached"] and again.info["train_seconds"] == p.info["train_seconds"]
    np.testing.assert_allclose(again.predict(test), pred, rtol=1e-6)
    # spec columns dropped: looked up from the device name, same answer
    spec_free = test.drop(columns=list(direct.SPEC))
    np.testing.assert_allclose(again.predict(spec_free), pred, rtol=1e-6)


def test_transformer_trains_on_vector_ops(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    p = direct.train_direct("EW", "transformer", layers=1, cfg=TINY, max_rows=300)
    test = load_kernels(ops="EW", splits="test_id").head(20)
    pred = p.predict(test)
    assert pred.shape == (20,) and np.all(pred > 0)
    # the op kind is an input: the same shape as another op gets another latency
    other = test.assign(op=np.where(test["op"] == "add", "gelu", "add"))
    assert not np.allclose(p.predict(other), pred)
    with pytest.raises(direct.DirectError, match="non element-wise"):     # not an all-zero one-hot
        direct.raw_features(test.assign(op="softmax"), "EW")


def test_training_rows_are_the_train_split_and_shapes_group_across_gpus():
    assert direct.training_rows("BMM", None, 0)["split"].eq("train").all()
    # one shape on two GPUs is one group (validation holds out the shape on every GPU); another shape, another
    df = pd.DataFrame({"op": "bmm", "device": ["Tesla T4", "Tesla P4", "Tesla T4"], "B": 1, "M": [64, 64, 128],
                       "N": 64, "K": 64})
    assert direct.shape_groups(df, "BMM").tolist() == [0, 0, 1]


def test_predict_standardizes_its_inputs_by_hand():
    # one-unit net with weights 1 and biases 0: log latency = log(2) + sum of standardized inputs (ReLU passes z >= 0)
    mean = np.log([2, 64, 64, 64, 1000, 10000, 80, 40, 16, 1400, 64]).astype(np.float32)
    net = direct.MLP(11, layers=1, width=1)
    with torch.no_grad():
        net.body[0].weight.fill_(1.0), net.body[0].bias.zero_(), net.head.weight.fill_(1.0), net.head.bias.zero_()
    p = direct.DirectPredictor("BMM", "mlp", 1, 1, net, mean, np.full(11, 2.0, np.float32), float(np.log(2.0)), {})
    row = lambda B: pd.DataFrame([{"op": "bmm", "B": B, "M": 64, "N": 64, "K": 64, "mem_bw_gbps": 1000,
                                   "peak_gflops": 10000, "num_sm": 80, "l2_mb": 40, "mem_gb": 16, "freq_mhz": 1400,
                                   "cores_per_sm": 64}])
    assert p.predict(row(2)) == pytest.approx([2.0], rel=1e-5)                  # every input at its mean: z = 0
    assert p.predict(row(2 * np.e ** 2)) == pytest.approx([2 * np.e], rel=1e-5)  # z_B = (log B - log 2) / 2 = 1
