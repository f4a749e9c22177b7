"""Baselines: Li et al.'s least-squares fit by hand, and the Habitat collapse guard."""
import numpy as np
import pytest

from lib import baselines


def test_fit_li_recovers_a_line():
    flops = np.array([1e9, 2e9, 4e9, 8e9])
    a, b = baselines.fit_li(flops, 3e-9 * flops + 0.01)
    assert a == pytest.approx(3e-9) and b == pytest.approx(0.01)


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
