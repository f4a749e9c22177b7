"""lib.repro: the committed scores, the comparison at the table's precision, and a scratch folder for its models."""
import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from lib import paths, predictors, repro

TINY = {"BMM": {"layers": 1, "width": 8, "epochs": 1, "batch_size": 4096, "max_rows": 1500}}


def test_same_as_table_compares_at_four_significant_digits():
    assert repro.same_as_table(16.9512, 16.95) and repro.same_as_table(3.22449e4, 3.224e4)
    assert not repro.same_as_table(16.956, 16.95) and not repro.same_as_table(17.85, 16.95)


def test_reference_scores_read_the_committed_row(tmp_path):
    committed = pd.read_csv(paths.ROOT / "figures" / "tables" / "predictor_scaling.csv")
    row = committed[committed.predictor == "NeuSight (spec tiles)"].iloc[0]
    assert repro.reference_scores() == {"in_dist_mape": row.in_dist_mape, "ood_mape": row.ood_mape}
    committed[committed.predictor != "NeuSight (spec tiles)"].to_csv(tmp_path / "predictor_scaling.csv", index=False)
    with pytest.raises(ValueError, match="expected one row 'NeuSight \\(spec tiles\\)', found 0"):
        repro.reference_scores(tmp_path)


def test_check_trains_in_a_scratch_folder_and_compares(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "BUILD", tmp_path / "build")   # the project's cache, for this test
    monkeypatch.setattr(predictors, "_LOADED", {})             # this process's memo, for this test
    loaded = predictors.get_predictor("BMM", TINY["BMM"])      # this process already holds the model
    ledger = tmp_path / "models.jsonl"
    monkeypatch.setenv(paths.MODEL_LEDGER_ENV, str(ledger))
    same, table = repro.check(TINY)
    # trained anew (the ledger logs it, not a memo or cache hit), in the scratch folder: the project's cache still
    # holds only the model loaded above
    assert [json.loads(line)["cached"] for line in ledger.read_text().splitlines()] == [False]
    assert len(list((tmp_path / "build").rglob("*.pt"))) == 1 and paths.BUILD == tmp_path / "build"
    assert predictors.get_predictor("BMM", TINY["BMM"]) is loaded   # the process's memo is as it was
    assert list(table.index) == ["in_dist_mape", "ood_mape"] and list(table.columns) == ["committed", "this machine", "same"]
    assert not same and not table["same"].any()   # a one-epoch model of width 8 is not the committed one
    assert table["committed"].to_dict() == repro.reference_scores()


def test_cli_prints_both_machines_and_exits_1_on_other_weights(tmp_path):
    cfg = tmp_path / "tiny.json"
    cfg.write_text(json.dumps(TINY))
    r = subprocess.run([sys.executable, "-m", "lib.repro", "--config", cfg], capture_output=True, text=True,
                       cwd=paths.ROOT, timeout=900)
    assert r.returncode == 1, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("reference machine (figures/PROVENANCE.json), which trained the committed weights: ")
    assert lines[1].startswith("this machine: ")
    assert "in_dist_mape" in r.stdout and lines[-1].startswith("this machine trains other weights")
    bad = subprocess.run([sys.executable, "-m", "lib.repro", "--config", tmp_path / "nope.json"], capture_output=True,
                         text=True, cwd=paths.ROOT, timeout=900)
    assert bad.returncode == 2 and bad.stdout == "" and len(bad.stderr.strip().splitlines()) == 1


def test_a_config_that_is_no_json_is_named(tmp_path, capsys):
    cfg = tmp_path / "bad.json"
    cfg.write_text('{"BMM": ')
    assert repro.main(["--config", str(cfg)]) == 2
    assert capsys.readouterr().err == f"error: --config {cfg}: Expecting value: line 1 column 9 (char 8)\n"


def test_with_committed_weights_the_verdict_says_make_figures_loads_them(tmp_path, monkeypatch, capsys):
    table = pd.DataFrame({"committed": [1.0], "this machine": [2.0], "same": [False]}, index=["ood_mape"])
    monkeypatch.setattr(repro, "check", lambda cfg: (False, table))
    monkeypatch.setattr(paths, "FIGURES", tmp_path)
    assert repro.main([]) == 1 and "will not rebuild the committed figures" in capsys.readouterr().out
    (tmp_path / "predictors").mkdir()
    (tmp_path / "predictors" / "m-k.pt").write_bytes(b"weights")
    assert repro.main([]) == 1
    assert capsys.readouterr().out.splitlines()[-1].startswith(
        "this machine trains other weights: `make figures` here loads the committed ones (figures/predictors/)")


def test_scores_by_hand(monkeypatch):
    # two held-out-shape rows (in_dist) and two rows of GPUs never trained on (ood), spec-only tiles, batched matmul
    from lib import data, kernels
    table = pd.DataFrame({"split": ["test_id", "test_ood", "test_id", "test_ood"], "latency_ms": [1.0, 2.0, 4.0, 5.0],
                          "device": ["Tesla T4", "NVIDIA H100 80GB HBM3", "Tesla T4", "NVIDIA H100 80GB HBM3"]})
    asked = []
    monkeypatch.setattr(data, "load_kernels", lambda **kw: asked.append(kw) or table)

    def predict(df, method, tiles, cfg_by_class):
        asked.append({"method": method, "tiles": tiles, "cfg": cfg_by_class})
        return np.array([1.1, 3.0, 3.0, 5.0])
    monkeypatch.setattr(kernels, "predict_by_device", predict)
    scores = repro.score_bmm_predictor({"BMM": {"layers": 1}})
    # in_dist: |1.1 - 1| / 1 = 10 %, |3 - 4| / 4 = 25 % -> 17.5; ood: 50 %, 0 % -> 25
    assert scores == {"in_dist_mape": pytest.approx(17.5), "ood_mape": pytest.approx(25.0)}
    assert asked == [{"ops": "BMM", "splits": ["test_id", "test_ood"]},
                     {"method": "neusight", "tiles": "spec", "cfg": {"BMM": {"layers": 1}}}]


def test_check_needs_both_scores_to_match(monkeypatch):
    monkeypatch.setattr(repro, "reference_scores", lambda: {"in_dist_mape": 17.85, "ood_mape": 14.03})
    monkeypatch.setattr(repro, "score_bmm_predictor", lambda cfg: {"in_dist_mape": 17.8512, "ood_mape": 14.2})
    same, table = repro.check()
    assert not same and table["same"].tolist() == [True, False]
    monkeypatch.setattr(repro, "score_bmm_predictor", lambda cfg: {"in_dist_mape": 17.8512, "ood_mape": 14.0349})
    assert repro.check()[0]


def test_two_committed_rows_are_an_error(tmp_path):
    # the table must name the model once: two rows would leave the reference ambiguous
    committed = pd.read_csv(paths.ROOT / "figures" / "tables" / "predictor_scaling.csv")
    row = committed[committed.predictor == repro.REFERENCE_ROW]
    pd.concat([committed, row]).to_csv(tmp_path / "predictor_scaling.csv", index=False)
    with pytest.raises(ValueError, match="expected one row 'NeuSight \\(spec tiles\\)', found 2"):
        repro.reference_scores(tmp_path)


def test_a_bad_committed_table_is_one_line(monkeypatch, capsys):
    # lib.repro's exit status 2 on an error (a missing or malformed committed table): one line, no traceback
    monkeypatch.setattr(repro, "check", lambda cfg: (_ for _ in ()).throw(ValueError("predictor_scaling.csv: no row")))
    assert repro.main([]) == 2
    assert capsys.readouterr().err == "error: predictor_scaling.csv: no row\n"
