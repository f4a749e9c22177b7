"""lib.train: the relative-error loss by hand, and weights that do not depend on the machine's thread count."""
import numpy as np
import pytest
import torch

from lib import numerics, paths, train


def test_relative_error_loss_by_hand():
    # |1.5 - 1| / 1 = 0.5 and |3 - 4| / 4 = 0.25 -> mean 0.375
    assert train.relative_error_loss(torch.tensor([1.5, 3.0]), torch.tensor([1.0, 4.0])).item() == pytest.approx(0.375)


def _train_once(threads: int) -> list[torch.Tensor]:
    """Train a small MLP through train.cached with `threads` torch threads set by the caller."""
    torch.set_num_threads(threads)
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.normal(size=(4096, 64)).astype(np.float32))
    y = torch.from_numpy(np.exp(rng.normal(size=4096)).astype(np.float32))
    cfg = train.TrainConfig(epochs=3, patience=3, batch_size=512, val_fraction=0.0)

    def build():
        train.set_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(64, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                                    torch.nn.ReLU(), torch.nn.Linear(512, 1))
        predict = lambda m, b: torch.exp(m(b["x"]).squeeze(-1))
        train.fit(model, predict, {"x": x}, y, np.arange(len(x)), cfg)
        return {"model": model.state_dict()}, {}

    state, info = train.cached(f"threads{threads}", "k", build)
    assert info["train_threads"] == numerics.TRAIN_THREADS and "cpu_capability" in info
    return list(state["model"].values())


def test_weights_do_not_depend_on_the_callers_thread_count(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    before = torch.get_num_threads()
    try:
        one, three = _train_once(1), _train_once(3)
        assert torch.get_num_threads() == 3       # cached() gives the caller its threads back
    finally:
        torch.set_num_threads(before)
    assert all(torch.equal(a, b) for a, b in zip(one, three))


@pytest.mark.parametrize("raw", ["abc", "0", "-2", ""])
def test_bad_thread_setting_names_the_variable(monkeypatch, raw):
    monkeypatch.setenv("NEUSIGHT_TRAIN_THREADS", raw)
    with pytest.raises(ValueError, match="NEUSIGHT_TRAIN_THREADS"):
        numerics._train_threads()


def test_fit_keeps_the_best_validation_weights_and_stops_after_patience():
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.normal(size=(512, 4)).astype(np.float32))
    y = torch.from_numpy(np.exp(rng.normal(size=512)).astype(np.float32))
    model = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    predict = lambda m, b: torch.exp(m(b["x"]).squeeze(-1))
    cfg = train.TrainConfig(epochs=60, patience=2, batch_size=64, lr=0.3, val_fraction=0.3)   # lr high: it overfits fast
    h = train.fit(model, predict, {"x": x}, y, np.arange(512), cfg)
    val_losses = [r["val_loss"] for r in h["history"]]
    _, val_idx = train.split_indices(np.arange(512), 0.3, 0)
    with torch.no_grad():
        returned = train.relative_error_loss(predict(model, {"x": x[val_idx]}), y[val_idx]).item()
    # the model handed back is the best epoch's, not the last one's
    assert returned == pytest.approx(min(val_losses), rel=1e-5) and h["best_val_loss"] == pytest.approx(min(val_losses))
    # and training stopped `patience` epochs after that best epoch
    assert h["epochs_run"] < cfg.epochs and h["epochs_run"] == int(np.argmin(val_losses)) + 1 + cfg.patience


def test_fit_counts_an_improvement_under_1e_5_as_none():
    # validation loss |2 - d - 1| / 1 = 1 - d, where d grows by `step` per epoch (lr 0: the weights never move)
    x, y = torch.zeros(20, 1), torch.ones(20)
    val = np.zeros(20, bool)
    val[:5] = True

    def run(step):
        calls = []

        def predict(m, b):
            if len(b["x"]) == 5:             # the validation rows
                calls.append(None)
            return m(b["x"]).squeeze(-1) * 0 + 2.0 - step * len(calls)
        cfg = train.TrainConfig(epochs=12, patience=3, batch_size=15, lr=0.0, weight_decay=0.0)
        return train.fit(torch.nn.Linear(1, 1), predict, {"x": x}, y, np.arange(20), cfg, val_mask=val)
    # 2e-6 per epoch stays under 1e-5 below the best for `patience` epochs, so it stops after 1 + 3; 2e-5 per epoch
    # improves every time, so all 12 epochs run
    assert run(2e-6)["epochs_run"] == 1 + 3 and run(2e-5)["epochs_run"] == 12


def test_code_text_ignores_prose_but_not_code():
    src = 'def f(x):\n    """Doc."""\n    # a comment\n    return x + 1  # another\n'
    prose = 'def f(x):\n    """Another doc, longer."""\n    return x + 1\n'
    code = 'def f(x):\n    """Doc."""\n    return x + 2\n'
    assert train.code_text(src) == train.code_text(prose) == "def f(x):\n    return x + 1"
    assert train.code_text(code) != train.code_text(src)
    # a body that is only a docstring keeps a statement; a module docstring goes too
    assert train.code_text('"""Module."""\nclass A:\n    """Only a docstring."""\n') == "class A:\n    pass"
    assert train.cache_key(train.code_text(src)) == train.cache_key(train.code_text(prose)) != train.cache_key(train.code_text(code))


def test_predictor_cache_is_kept_apart_per_cpu_blas_fingerprint_and_library_versions(monkeypatch):
    path = train.cache_path("neusight-LN", "0123")
    versions = numerics.library_versions()
    monkeypatch.setattr(numerics, "cpu_model", lambda: "AMD EPYC")
    assert train.cache_path("neusight-LN", "0123").parent.name == (
        f"torch{versions['torch']}-numpy{versions['numpy']}-pandas{versions['pandas']}"
        f"-amd-epyc-blas-{numerics.blas_fingerprint()}-threads{numerics.TRAIN_THREADS}")
    monkeypatch.setattr(numerics, "cpu_model", lambda: "Intel(R) Xeon(R) Platinum 8480+")   # the same fingerprint
    assert "-intel-xeon-platinum-8480-blas-" in train.cache_path("neusight-LN", "0123").parent.name
    monkeypatch.setattr(numerics, "library_versions", lambda: {**versions, "torch": "9.9.9"})
    assert train.cache_path("neusight-LN", "0123").parent.name.startswith("torch9.9.9-numpy")
    assert path.parent.parent == paths.BUILD / "predictors" and path.name == "neusight-LN-0123.pt"


def _losses(epochs: int, schedule_epochs: int | None) -> list[float]:
    """Per-epoch training losses of a small MLP fitted with no validation rows."""
    rng = np.random.default_rng(1)
    x = torch.from_numpy(rng.normal(size=(256, 4)).astype(np.float32))
    y = torch.from_numpy(np.exp(rng.normal(size=256)).astype(np.float32))
    train.set_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    predict = lambda m, b: torch.exp(m(b["x"]).squeeze(-1))
    cfg = train.TrainConfig(epochs=epochs, patience=epochs, batch_size=64, lr=0.05, val_fraction=0.0,
                            schedule_epochs=schedule_epochs)
    hist = train.fit(model, predict, {"x": x}, y, np.arange(len(x)), cfg, val_mask=np.zeros(len(x), bool))["history"]
    return [h["train_loss"] for h in hist]


def test_a_short_run_on_a_longer_schedule_repeats_the_longer_runs_first_epochs():
    # lr(e) = lr (1 + cos(pi e / T)) / 2: 3 epochs of a 6-epoch schedule are the first 3 epochs of the 6-epoch run,
    # while a 3-epoch schedule lowers the lr sooner (epoch 1: 0.75 lr instead of 0.93 lr) and departs from it
    full, short, own = _losses(6, None), _losses(3, 6), _losses(3, None)
    assert short == full[:3]
    assert own[0] == full[0] and own[1:] != full[1:3]


def test_code_text_of_a_function_carries_the_constants_it_reads(monkeypatch):
    # latency_ms multiplies by MS_PER_S: its source names the constant, the key must also see its value
    from lib import utilization
    assert train.code_text(utilization.latency_ms).endswith("\nMS_PER_S = 1000.0")
    before = train.code_text(utilization.latency_ms)
    monkeypatch.setattr(utilization, "MS_PER_S", 1.0)
    assert train.code_text(utilization.latency_ms) != before
    # a class: the constants its methods read (OverheadMLP starts log_t0 at T0_INIT_MS)
    from lib import overhead
    assert "\nT0_INIT_MS = 0.02" in train.code_text(overhead.OverheadMLP)
    # functions, modules and source text are not constants; a module's text holds its constants already
    assert "\ntrain_mod =" not in train.code_text(overhead.OverheadMLP)
    assert train.code_text("X = 1\ndef f():\n    return X") == "X = 1\n\ndef f():\n    return X"


def test_copy_cached_fills_only_a_missing_key(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    old = train.cache_path("m", "old")
    old.parent.mkdir(parents=True)
    old.write_bytes(b"weights")
    assert train.copy_cached("m", "old", "new") and train.cache_path("m", "new").read_bytes() == b"weights"
    train.cache_path("m", "new").write_bytes(b"mine")
    assert not train.copy_cached("m", "old", "new") and train.cache_path("m", "new").read_bytes() == b"mine"
    assert not train.copy_cached("m", "absent", "other") and not train.cache_path("m", "other").exists()


def test_cached_writes_through_one_temporary_file_per_process(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    build = lambda: ({"w": torch.ones(2)}, {})
    # a write that fails halfway (disk full) leaves neither a model nor a temporary file behind
    write_bytes = type(tmp_path).write_bytes

    def half_then_full(self, data):
        write_bytes(self, data[: len(data) // 2])
        raise OSError("disk full")

    monkeypatch.setattr(type(tmp_path), "write_bytes", half_then_full)
    with pytest.raises(OSError):
        train.cached("m", "k", build)
    monkeypatch.setattr(type(tmp_path), "write_bytes", write_bytes)
    folder = train.cache_path("m", "k").parent
    assert list(folder.iterdir()) == []
    # a stale temporary file of the old fixed name (another run's) is neither read nor moved into place
    (folder / "m-k.tmp").write_bytes(b"half-written")
    state, info = train.cached("m", "k", build)
    assert not info["cached"] and torch.equal(torch.load(train.cache_path("m", "k"))["state"]["w"], torch.ones(2))
    assert sorted(p.name for p in folder.iterdir()) == ["m-k.pt", "m-k.tmp"]


def test_split_indices_holds_out_whole_groups_and_at_least_one():
    groups = np.repeat(np.arange(10), 3)                   # ten groups of three rows
    train_idx, val_idx = train.split_indices(groups, 0.2, 0)
    assert len(val_idx) == 6 and len(set(groups[val_idx])) == 2 and not set(groups[val_idx]) & set(groups[train_idx])
    # a fraction too small for one group still holds one out (val_fraction=0 is not "no validation": val_mask is)
    assert len(train.split_indices(groups, 0.0, 0)[1]) == 3


def test_fit_never_trains_on_its_validation_rows_and_without_any_keeps_the_last_weights():
    rng = np.random.default_rng(2)
    x = torch.from_numpy(rng.normal(size=(64, 4)).astype(np.float32))
    y = torch.from_numpy(np.exp(rng.normal(size=64)).astype(np.float32))
    rows, seen = torch.arange(64), set()

    def predict(m, b):                                     # records the rows each training step sees
        if m.training:
            seen.update(b["row"].tolist())
        return torch.exp(m(b["x"]).squeeze(-1))
    cfg = train.TrainConfig(epochs=2, patience=2, batch_size=16, lr=0.05)
    val_mask = np.arange(64) % 4 == 0
    train.set_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    train.fit(model, predict, {"x": x, "row": rows}, y, np.arange(64), cfg, val_mask=val_mask)
    assert seen == set(np.flatnonzero(~val_mask).tolist())
    # no validation rows: every epoch runs and the weights returned are trained ones, not the initial ones
    initial = [p.detach().clone() for p in model.parameters()]
    h = train.fit(model, predict, {"x": x, "row": rows}, y, np.arange(64), cfg, val_mask=np.zeros(64, bool))
    assert h["epochs_run"] == 2 and not all(torch.equal(a, b) for a, b in zip(initial, model.parameters()))
