"""lib.reference_weights: the committed models come before this machine's cache, a full run leaves exactly its
models there, and `make repro` never loads them."""
import json
import os

import pytest
import torch

from lib import notebooks, paths, predictors, reference_weights, repro, train

TINY = {"BMM": {"layers": 1, "width": 8, "epochs": 1, "batch_size": 4096, "max_rows": 1500}}
OWN, COMMITTED = {"reference": False}, {"reference": True}   # ledger records of a model (no hash: ledgers before it)


@pytest.fixture
def folders(tmp_path, monkeypatch):
    """A scratch build/ and figures/, and NEUSIGHT_NO_REFERENCE unset."""
    monkeypatch.setattr(paths, "BUILD", tmp_path / "build")
    monkeypatch.setattr(paths, "FIGURES", tmp_path / "figures")
    monkeypatch.delenv(reference_weights.NO_REFERENCE_ENV, raising=False)
    return tmp_path


def _save(path, value: float, **info) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"state": {"w": torch.full((2,), value)}, "info": info}, path)


def test_committed_weights_come_before_this_machines_cache(folders, monkeypatch):
    _save(train.cache_path("m", "k"), 1.0, train_seconds=3.0)
    _save(reference_weights.folder() / "m-k.pt", 2.0, train_seconds=5.0)
    never = lambda: pytest.fail("a model with saved weights was trained")
    monkeypatch.setenv(paths.MODEL_LEDGER_ENV, str(folders / "models.jsonl"))
    state, info = train.cached("m", "k", never)
    assert json.loads((folders / "models.jsonl").read_text()) == {
        "model": "m-k.pt", "cached": True, "train_s": 5.0, "reference": True,
        "sha256": reference_weights.file_hash(reference_weights.folder() / "m-k.pt"), "weights": True}
    monkeypatch.delenv(paths.MODEL_LEDGER_ENV)
    assert torch.equal(state["w"], torch.full((2,), 2.0)) and info["cached"] and info["train_seconds"] == 5.0
    for off in ("1", "yes"):   # the user's switch: this machine's own weights
        monkeypatch.setenv(reference_weights.NO_REFERENCE_ENV, off)
        assert torch.equal(train.cached("m", "k", never)[0]["w"], torch.full((2,), 1.0))
    monkeypatch.setenv(reference_weights.NO_REFERENCE_ENV, "0")
    assert torch.equal(train.cached("m", "k", never)[0]["w"], torch.full((2,), 2.0))
    # a key with no committed model trains and goes to this machine's cache only
    state, info = train.cached("m", "new", lambda: ({"w": torch.zeros(2)}, {}))
    assert not info["cached"] and train.cache_path("m", "new").is_file()
    assert sorted(p.name for p in reference_weights.folder().iterdir()) == ["m-k.pt"]


def test_disabled_restores_the_users_setting(folders, monkeypatch):
    with reference_weights.disabled():
        assert not reference_weights.enabled()
    assert reference_weights.enabled() and reference_weights.NO_REFERENCE_ENV not in os.environ
    monkeypatch.setenv(reference_weights.NO_REFERENCE_ENV, "0")
    with reference_weights.disabled():
        assert not reference_weights.enabled()
    assert reference_weights.enabled() and os.environ[reference_weights.NO_REFERENCE_ENV] == "0"


def test_a_damaged_committed_model_names_its_file(folders):
    bad = reference_weights.folder() / "m-k.pt"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"version https://git-lfs.github.com/spec/v1\n")   # e.g. a pointer instead of the file
    with pytest.raises(RuntimeError, match="m-k.pt: not a saved predictor"):
        train.cached("m", "k", lambda: pytest.fail("trained over a damaged committed model"))


def test_a_loadable_file_that_is_no_saved_model_names_its_file(folders):
    foreign = train.cache_path("m", "k")
    foreign.parent.mkdir(parents=True)
    torch.save({"w": torch.ones(2)}, foreign)
    with pytest.raises(RuntimeError, match="m-k.pt: not a saved predictor \\(no 'state' and 'info'"):
        train.cached("m", "k", lambda: pytest.fail("trained over a file it could not read"))


def _full_run(folders, calls) -> list:
    """Executed-notebook paths of a one-notebook full run whose ledger holds the lookups `calls` make."""
    out = folders / "build" / "notebooks" / "01-a.ipynb"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".time.json").write_text(json.dumps({"notebook": out.name, "wall_s": 1.0}))
    ledger = notebooks.ledger_path(out)
    ledger.write_text("")
    os.environ[paths.MODEL_LEDGER_ENV] = str(ledger)
    try:
        calls()
    finally:
        del os.environ[paths.MODEL_LEDGER_ENV]
    return [out]


def test_a_rerun_of_make_figures_syncs_the_same_ledgers_again(folders):
    """A full run's sync rewrites a committed file (strips it; replaces one without weights by the weights trained
    here); a `make figures` that reruns no notebook syncs the same ledgers again, and finds every file as it left it."""
    dest = reference_weights.folder()
    _save(dest / "h-1.pt", 1.0, history=[1])       # committed with weights; the run reads its history alone
    torch.save({"state": None, "info": {"history": [2]}}, dest / "w-1.pt")   # committed without weights ...
    never = lambda: pytest.fail("trained a model whose history is committed")
    outs = _full_run(folders, lambda: (train.cached("h", "1", never, weights=False),
                                       train.cached("w", "1", never, weights=False),
                                       train.cached("w", "1", lambda: ({"w": torch.zeros(2)}, {}))))  # ... now needed
    notebooks.provenance(outs)
    after = {p.name: p.read_bytes() for p in reference_weights.committed_files()}
    assert torch.load(dest / "h-1.pt")["state"] is None and torch.load(dest / "w-1.pt")["state"] is not None
    notebooks.provenance(outs)   # nothing reran
    assert {p.name: p.read_bytes() for p in reference_weights.committed_files()} == after
    # the committed file replaced after the run (say, by a checkout) is still caught, before it is loaded
    (dest / "h-1.pt").write_bytes(b"version https://git-lfs.github.com/spec/v1\n")
    with pytest.raises(ValueError, match="h-1.pt: .* holds other bytes than the run loaded"):
        notebooks.provenance(outs)


def test_sync_leaves_exactly_the_runs_models(folders):
    cache, dest = train.cache_dir(), reference_weights.folder()
    _save(cache / "a-1.pt", 1.0, cpu_model="CPU A")          # trained here: copied
    _save(cache / "b-1.pt", 1.0, cpu_model="CPU A")          # the run loaded the committed b: that one is kept
    _save(dest / "b-1.pt", 9.0)
    _save(dest / "old-1.pt", 1.0)                            # no longer used: removed
    (dest / ".tmp-7-c-1.pt").write_bytes(b"half")            # another process's temporary file: not a model
    big = cache / "paper-1.pt"                               # above the size cap: left out
    big.write_bytes(b"x" * (reference_weights.REFERENCE_MAX_BYTES + 1))
    assert ".tmp-7-c-1.pt" not in [p.name for p in reference_weights.committed_files()]
    got = reference_weights.sync({"a-1.pt": [OWN], "b-1.pt": [COMMITTED], "paper-1.pt": [OWN]}, cache)
    assert [p.name for p in reference_weights.committed_files()] == ["a-1.pt", "b-1.pt"]
    assert (dest / ".tmp-7-c-1.pt").exists()                 # not removed as a stale model either
    assert torch.load(dest / "b-1.pt")["state"]["w"][0] == 9.0
    assert got == {"models": 2, "bytes": (dest / "a-1.pt").stat().st_size + (dest / "b-1.pt").stat().st_size,
                   "without_weights": 0, "trained_on": {"CPU A": 1, "unrecorded": 1}, "left_out": ["paper-1.pt"]}
    # a run on this machine's own weights (NEUSIGHT_NO_REFERENCE=1) used the cache's b: that one is committed now
    reference_weights.sync({"a-1.pt": [OWN], "b-1.pt": [OWN]}, cache)
    assert torch.load(dest / "b-1.pt")["state"]["w"][0] == 1.0


def test_a_model_used_for_its_info_alone_is_committed_without_weights(folders, monkeypatch):
    cache, dest = train.cache_dir(), reference_weights.folder()
    info_only, both = {"reference": False, "weights": False}, {"reference": False, "weights": True}
    _save(cache / "h-1.pt", 1.0, history=[{"epoch": 0, "val_loss": 0.5}], cpu_model="CPU A")
    _save(cache / "w-1.pt", 2.0, cpu_model="CPU A")
    got = reference_weights.sync({"h-1.pt": [info_only], "w-1.pt": [info_only, both]}, cache)
    assert torch.load(dest / "h-1.pt") == {"state": None, "info": torch.load(cache / "h-1.pt")["info"]}
    assert (dest / "w-1.pt").read_bytes() == (cache / "w-1.pt").read_bytes()
    assert got["without_weights"] == 1 and got["trained_on"] == {"CPU A": 2}
    assert (dest / "h-1.pt").stat().st_size < 2000
    # the next run reads the committed history and nothing else: it stays as it is
    ledger = folders / "models.jsonl"
    monkeypatch.setenv(paths.MODEL_LEDGER_ENV, str(ledger))
    (cache / "h-1.pt").unlink()
    never = lambda: pytest.fail("trained a model whose history is committed")
    state, info = train.cached("h", "1", never, weights=False)
    assert state is None and info["history"] == [{"epoch": 0, "val_loss": 0.5}]
    stripped = (dest / "h-1.pt").read_bytes()
    reference_weights.sync({"h-1.pt": [json.loads(ledger.read_text())], "w-1.pt": [both]}, cache)
    assert (dest / "h-1.pt").read_bytes() == stripped
    # a run that needs its weights: the committed file cannot give them, so it trains here, and they are committed
    ledger.write_text("")
    state, info = train.cached("h", "1", lambda: ({"w": torch.full((2,), 3.0)}, {}))
    assert not info["cached"] and torch.equal(state["w"], torch.full((2,), 3.0))
    record = json.loads(ledger.read_text())
    assert record["weights"] and not record["reference"]
    reference_weights.sync({"h-1.pt": [record], "w-1.pt": [both]}, cache)
    assert torch.equal(torch.load(dest / "h-1.pt")["state"]["w"], torch.full((2,), 3.0))
    # a committed model without weights that a run says it loaded for them: something moved it since
    reference_weights.sync({"h-1.pt": [info_only]}, cache)
    with pytest.raises(ValueError, match="h-1.pt: the run used its weights, and .* holds none"):
        reference_weights.sync({"h-1.pt": [{"reference": True, "weights": True}]}, cache)


def test_sync_rehashes_only_the_records_of_the_committed_file(folders):
    # a model loaded for its history alone, from the committed file and from this machine's identical copy: sync strips
    # the committed file, so its record takes the new hash, while the record of this machine's file keeps its own
    cache, dest = train.cache_dir(), reference_weights.folder()
    _save(cache / "h-1.pt", 1.0, history=[])
    dest.mkdir(parents=True)
    (dest / "h-1.pt").write_bytes((cache / "h-1.pt").read_bytes())
    own_hash = reference_weights.file_hash(cache / "h-1.pt")
    records = [{"reference": True, "weights": False, "sha256": own_hash},
               {"reference": False, "weights": False, "sha256": own_hash}]
    reference_weights.sync({"h-1.pt": records}, cache)
    assert torch.load(dest / "h-1.pt")["state"] is None
    assert records[0]["sha256"] == reference_weights.file_hash(dest / "h-1.pt") != own_hash
    assert records[1]["sha256"] == own_hash
    reference_weights.sync({"h-1.pt": records}, cache)   # the same ledger again (a make figures that reruns nothing)


def test_selection_runs_read_their_history_without_the_weights(folders, monkeypatch):
    from lib.protocol import selection_curves
    monkeypatch.setattr(predictors, "_LOADED", {})
    ledger = folders / "models.jsonl"
    monkeypatch.setenv(paths.MODEL_LEDGER_ENV, str(ledger))
    cfg = {**TINY["BMM"], "epochs": 2, "patience": 2}
    curves = selection_curves("BMM", cfg, holdouts=["Tesla T4"])
    records = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert len(records) == 2 and not any(r["weights"] for r in records)
    # the same history as the whole model's
    p = predictors.train_predictor("BMM", {**cfg, "validation": "Tesla T4"})
    assert curves[curves["run"] == "Tesla T4"]["val_mape"].tolist() == [100 * h["val_loss"] for h in p.info["history"]]
    with pytest.raises(ValueError, match="one seed at a time"):
        predictors.training_info("BMM", {**cfg, "ensemble": 2})


@pytest.mark.parametrize("used, problem", [
    ({"a-1.pt": [OWN], "gone-1.pt": [OWN]}, "gone-1.pt is no longer in"),       # build/ cleaned since the run
    ({"a-1.pt": [OWN], "b-1.pt": [COMMITTED]}, "b-1.pt is no longer in"),       # the committed file it loaded
    ({"a-1.pt": [COMMITTED, OWN]}, "a-1.pt: the run loaded the committed model and this machine's, and they differ"),
    # the run loaded other bytes under this name (a library upgrade moved the cache folder, a checkout the committed
    # folder)
    ({"a-1.pt": [{"reference": False, "sha256": "0" * 16}]}, "a-1.pt: .* holds other bytes than the run loaded")])
def test_sync_changes_nothing_unless_every_model_is_where_the_run_took_it(folders, used, problem):
    cache, dest = train.cache_dir(), reference_weights.folder()
    _save(cache / "a-1.pt", 1.0)
    _save(dest / "a-1.pt", 2.0)
    _save(dest / "old-1.pt", 3.0)
    before = {p.name: p.read_bytes() for p in dest.iterdir()}
    with pytest.raises(ValueError, match=f"cannot keep the models of this run .*{problem}"):
        reference_weights.sync(used, cache)
    assert {p.name: p.read_bytes() for p in dest.iterdir()} == before


def test_provenance_of_a_full_run_commits_its_models(folders):
    outs = [folders / "build" / "notebooks" / name for name in ("01-a.ipynb", "02-b.ipynb")]
    outs[0].parent.mkdir(parents=True)
    _save(train.cache_dir() / "m-1.pt", 1.0)
    for out, models in zip(outs, ([], ["m-1.pt", "m-1.pt"])):
        out.with_suffix(".time.json").write_text(json.dumps({"notebook": out.name, "wall_s": 1.0}))
        notebooks.ledger_path(out).write_text("".join(json.dumps({"model": m, "cached": True, "train_s": 2.0}) + "\n"
                                                      for m in models))
    notebooks.provenance(outs)   # every notebook run left a ledger: a full run
    record = json.loads((paths.FIGURES / "PROVENANCE.json").read_text())["reference_weights"]
    assert record["models"] == 1 and [p.name for p in reference_weights.committed_files()] == ["m-1.pt"]
    # a notebook ran without a ledger: not a full run, so nothing is synced and the record stays the last full run's
    outs[0].with_suffix(".models.jsonl").unlink()
    _save(reference_weights.folder() / "other-1.pt", 1.0)
    notebooks.provenance(outs)
    assert json.loads((paths.FIGURES / "PROVENANCE.json").read_text())["reference_weights"] == record
    assert [p.name for p in reference_weights.committed_files()] == ["m-1.pt", "other-1.pt"]
    # the next full run records its own models, not the last full run's record
    _save(train.cache_dir() / "n-1.pt", 2.0)
    outs[0].with_suffix(".models.jsonl").write_text(json.dumps({"model": "n-1.pt", "cached": True, "train_s": 2.0}) + "\n")
    notebooks.provenance(outs)
    assert json.loads((paths.FIGURES / "PROVENANCE.json").read_text())["reference_weights"]["models"] == 2


def test_forced_training_and_migration_with_committed_weights(folders, monkeypatch):
    monkeypatch.setattr(predictors, "_LOADED", {})
    ledger = folders / "models.jsonl"
    monkeypatch.setenv(paths.MODEL_LEDGER_ENV, str(ledger))
    predictors.train_predictor("BMM", TINY["BMM"])
    name = json.loads(ledger.read_text().splitlines()[0])["model"]
    reference_weights.folder().mkdir(parents=True)
    (reference_weights.folder() / name).write_bytes(b"not weights")   # loaded, this would raise
    with pytest.raises(RuntimeError, match="not a saved predictor"):
        predictors.train_predictor("BMM", TINY["BMM"])
    ledger.write_text("")
    predictors.train_predictor("BMM", TINY["BMM"], force=True)   # make bench: trains, whatever is committed
    assert [json.loads(line)["cached"] for line in ledger.read_text().splitlines()] == [False]
    # NEUSIGHT_MIGRATE_FROM renames a committed model too (and this machine's), never over an existing one
    (reference_weights.folder() / "m-old.pt").write_bytes(b"committed")
    assert train.copy_cached("m", "old", "new") and (reference_weights.folder() / "m-new.pt").read_bytes() == b"committed"
    assert not train.copy_cached("m", "old", "new")


def test_digest_names_which_weights_a_lookup_uses(folders, monkeypatch):
    _save(reference_weights.folder() / "m-k.pt", 1.0)
    reference_weights._digest.cache_clear()
    one = reference_weights.digest()
    _save(reference_weights.folder() / "m-k.pt", 2.0)   # same name and size, other weights
    reference_weights._digest.cache_clear()
    assert reference_weights.digest() not in (one, "off") and len(one) == 16
    monkeypatch.setenv(reference_weights.NO_REFERENCE_ENV, "1")
    assert reference_weights.digest() == "off"


def test_repro_trains_anew_even_where_the_model_is_committed(folders, monkeypatch):
    monkeypatch.setattr(predictors, "_LOADED", {})
    ledger = folders / "models.jsonl"
    monkeypatch.setenv(paths.MODEL_LEDGER_ENV, str(ledger))
    monkeypatch.setattr(repro, "reference_scores", lambda: {"in_dist_mape": 1.0, "ood_mape": 1.0})
    repro.check(TINY)
    names = [json.loads(line)["model"] for line in ledger.read_text().splitlines()]
    reference_weights.folder().mkdir(parents=True)
    for name in names:   # committed files of the same names that cannot load: a lookup would raise
        (reference_weights.folder() / name).write_bytes(b"not weights")
    ledger.write_text("")
    repro.check(TINY)
    assert [json.loads(line)["cached"] for line in ledger.read_text().splitlines()] == [False] * len(names)
    assert reference_weights.enabled()


def test_the_committed_weights_are_the_last_full_runs():
    # figures/predictors/ holds as many models as figures/PROVENANCE.json says that run committed (none before the
    # first run that committed any)
    record = json.loads((paths.ROOT / "figures" / "PROVENANCE.json").read_text())
    committed = reference_weights.committed_files(paths.ROOT / "figures" / "predictors")
    assert len(committed) == record.get("reference_weights", {}).get("models", 0)
    assert all(p.stat().st_size <= reference_weights.REFERENCE_MAX_BYTES for p in committed)
