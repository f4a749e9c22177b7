"""Baselines: Li et al.'s least-squares fit by hand, and the Habitat collapse guard."""
import numpy as np
import pandas as pd
import pytest

from lib import baselines
from lib.data import load_kernels


def test_fit_li_recovers_a_line():
    flops = np.array([1e9, 2e9, 4e9, 8e9])
    a, b = baselines.fit_li(flops, 3e-9 * flops + 0.01)
    assert a == pytest.approx(3e-9) and b == pytest.approx(0.01)


def test_fit_li_minimizes_relative_error_by_hand():
    # minimize (a + b - 1)^2 + (2a + b - 1)^2 + ((3a + b) / 4 - 1)^2: the normal equations give a = b = 3/7
    # (an absolute least-squares fit of the same points would give a = 1.5, b = -1)
    a, b = baselines.fit_li(np.array([1.0, 2.0, 3.0]), np.array([1.0, 1.0, 4.0]))
    assert a == pytest.approx(3 / 7) and b == pytest.approx(3 / 7)


class FakeModel:
    def __init__(self, lr, val_loss):
        self.lr, self.info = lr, {"best_val_loss": val_loss}


def test_collapsed_habitat_model_is_retrained_with_a_smaller_step(monkeypatch):
    calls = []

    def fake_train_direct(op_class, arch, layers, cfg, max_rows):
        calls.append(cfg.lr)
        return FakeModel(cfg.lr, 1.0 if len(calls) == 1 else 0.1)

    import lib.direct
    monkeypatch.setattr(lib.direct, "train_direct", fake_train_direct)
    monkeypatch.setattr(baselines, "_HABITAT", {})
    model = baselines._habitat_model("FC", 4, (("lr", 2e-3),), None)
    assert calls == [2e-3, 2e-3 * baselines.RETRY_LR_FACTOR] and model.info["best_val_loss"] == 0.1


def test_healthy_habitat_model_is_kept(monkeypatch):
    import lib.direct
    monkeypatch.setattr(lib.direct, "train_direct", lambda *a, cfg, **k: FakeModel(cfg.lr, 0.05))
    monkeypatch.setattr(baselines, "_HABITAT", {})
    assert baselines._habitat_model("BMM", 4, (("lr", 2e-3),), None).lr == 2e-3


TRAIN_POINT = np.log([2, 64, 64, 64, 1000, 10000, 80, 40, 16, 1400, 64]).astype(np.float32)  # B..K, spec


def _tiny_habitat(std_cores):
    """A BMM direct predictor whose net is relu(sum of z): latency_ms = exp(relu(sum z) + log 2)."""
    import torch
    from lib import direct

    net = direct.MLP(len(TRAIN_POINT), layers=1, width=1)
    with torch.no_grad():
        net.body[0].weight.fill_(1.0), net.body[0].bias.zero_()
        net.head.weight.fill_(1.0), net.head.bias.zero_()
    std = np.ones(len(TRAIN_POINT), np.float32)
    std[-1] = std_cores          # cores_per_sm: constant in training, its float32 std is rounding noise
    return direct.DirectPredictor("BMM", "mlp", 1, 1, net, TRAIN_POINT, std, float(np.log(2.0)), {})


def _bmm_row(cores_per_sm, B=2):
    return pd.DataFrame([{"op": "bmm", "B": B, "M": 64, "N": 64, "K": 64, "mem_bw_gbps": 1000,
                          "peak_gflops": 10000, "num_sm": 80, "l2_mb": 40, "mem_gb": 16,
                          "freq_mhz": 1400, "cores_per_sm": cores_per_sm}])


def test_habitat_prediction_is_finite_on_an_unseen_cores_per_sm(monkeypatch):
    lo = TRAIN_POINT.copy()
    lo[:-1] -= 1.0               # every feature but cores_per_sm varied in training
    monkeypatch.setattr(baselines, "_habitat_model", lambda *a: _tiny_habitat(std_cores=1e-4))
    monkeypatch.setattr(baselines, "_training_range", lambda *a: (lo, TRAIN_POINT))
    # the training point itself: z = 0, latency = exp(0 + log 2) = 2 ms
    assert baselines.habitat_predict(_bmm_row(64)) == pytest.approx([2.0], rel=1e-5)
    # 128 cores per SM: z = log(2) / 1e-4 ~ 6931 overflowed exp to inf; held at 64 it is 2 ms again
    assert baselines.habitat_predict(_bmm_row(128)) == pytest.approx([2.0], rel=1e-5)
    # B = 2e300: z_B = log(1e300) ~ 691, far past MAX_LOG_MS = log(1e12), so the cap applies
    assert baselines.habitat_predict(_bmm_row(64, B=2e300)) == pytest.approx([1e12], rel=1e-5)


def test_li_predicts_a_training_gpu_from_its_own_line():
    gpu = "Tesla T4"
    a, b = baselines.li_coefficients(gpu)["bmm"]
    # the line is fitted on this GPU's own training rows only: bmm [B, M, N] @ [B, N, K] is 2*B*M*N*K FLOP
    own = load_kernels(ops="bmm", devices=gpu, splits="train")
    flop = 2 * own["B"] * own["M"] * own["N"] * own["K"]
    assert (a, b) == pytest.approx(baselines.fit_li(flop.to_numpy(float), own["latency_ms"].to_numpy(float)))
    assert a > 0 and (a, b) != pytest.approx(baselines.li_coefficients("Tesla P4")["bmm"], rel=1e-3)
    row = pd.DataFrame({"op": ["bmm"], "B": [2.0], "M": [64.0], "N": [128.0], "K": [256.0], "H": [np.nan]})
    # bmm [B, M, N] @ [B, N, K]: 2 * B * M * N * K FLOP
    assert baselines.li_predict(row, gpu)[0] == pytest.approx(a * 2 * 2 * 64 * 128 * 256 + b)


def test_habitat_capped_recognizes_the_cap_only():
    # the cap is exp(MAX_LOG_MS) = 1e12 ms, however exp rounds its last bit; below it, NaN and 0 are not the cap
    cap = np.exp(np.minimum(np.array([40.0, baselines.MAX_LOG_MS]), baselines.MAX_LOG_MS))
    assert baselines.habitat_capped(cap).tolist() == [True, True]
    assert baselines.habitat_capped(np.array([1e12 * (1 - 1e-6), 2.0, 0.0, np.nan])).tolist() == [False] * 4
