"""lib.report: the README's result block, from hand-made tables and from the committed figures/tables."""
import numpy as np
import pandas as pd
import pytest

from lib import report


def _e2e(rows):
    return pd.DataFrame(rows, columns=["device", "neusight_ape", "paper_neusight"])


def test_e2e_headline_by_hand():
    t = _e2e([("A", 2.0, 4.0), ("A", 4.0, float("nan")), ("B", 9.0, 1.0)])
    h = report.e2e_headline(t)
    assert h.loc["A", "neusight_ape"] == 3.0 and h.loc["A", "paper_neusight"] == 4.0   # NaN skipped
    assert h.loc["ALL", "neusight_ape"] == 5.0 and h.loc["ALL", "paper_neusight"] == 2.5


def test_e2e_summary_and_per_gpu_flag_missed_targets():
    inf = _e2e([("A", 4.0, 6.0), ("B", 5.0, 3.0)])
    train = _e2e([("A", 6.0, 5.0)])
    fused = pd.DataFrame({"neusight_ape": [1.0, 3.0], "paper_ape_pct": [2.0, 2.0]})
    s = report.e2e_summary(inf, train, fused)
    assert s.loc["inference", "ours"] == 4.5 and s.loc["inference", "<= 5%"] == "yes"
    assert s.loc["training", "<= 5%"] == "**no**" and s.loc["fused inference", "labels"] == 2
    assert s.loc["training", "ours, 95% CI"] == "6.0 to 6.0"             # one label: no spread
    assert s.loc["training", "ours - paper, 95% CI"] == "1.0 to 1.0"
    at_target = report.e2e_summary(_e2e([("A", 5.0, 6.0)]), train, fused)
    assert at_target.loc["inference", "<= 5%"] == "yes"                 # 5.0% meets a target of <= 5%
    g = report.e2e_per_gpu(inf, train)
    assert list(g["below the paper"]) == ["yes", "**no**", "**no**"]   # (A, inf), (A, train), (B, inf)
    assert list(g["ours - paper, 95% CI"]) == ["-2.0 to -2.0", "1.0 to 1.0", "2.0 to 2.0"]


def test_paper_comparisons_use_only_the_labels_the_paper_has():
    # A's second label has no paper cell: ours over every label 6.0, over the paper's one 4.0 (below its 5.0)
    inf = _e2e([("A", 4.0, 5.0), ("A", 8.0, float("nan"))])
    g = report.e2e_per_gpu(inf, _e2e([]))
    row = g.loc[("A", "inference")]
    assert (row["ours"], row["ours, the paper's labels"], row["paper"]) == (6.0, 4.0, 5.0)
    assert row["below the paper"] == "yes" and row["ours - paper, 95% CI"] == "-1.0 to -1.0"
    s = report.e2e_summary(inf, _e2e([]), pd.DataFrame({"neusight_ape": [1.0], "paper_ape_pct": [2.0]}))
    assert s.loc["inference", "ours"] == 6.0 and s.loc["inference", "ours, the paper's labels"] == 4.0


def test_markdown_by_hand():
    df = pd.DataFrame({"x": [1.25, float("nan")], "y": ["a", "b"]}, index=pd.Index(["r1", "r2"], name="k"))
    expected = ["| k | x | y |", "|---|---|---|", "| r1 | 1.2 | a |", "| r2 | n/a | b |"]
    assert report.markdown(df).splitlines() == expected


def test_replace_block_needs_the_markers():
    with pytest.raises(ValueError, match="NOTES.md has no result block"):
        report.replace_block("no markers here", "x", "NOTES.md")
    text = f"head\n{report.BEGIN_MARK} -->\nold\n{report.END}\ntail"
    assert report.replace_block(text, "NEW", "r") == "head\nNEW\ntail"


def test_readme_block_matches_the_committed_tables():
    # figures/tables/ hold the last full run; the README's block must be what they give.
    assert report.main(["--check"]) == 0, "README result block is stale: run `python -m lib.report`"


def test_check_reports_a_stale_block(tmp_path):
    stale = tmp_path / "README.md"
    stale.write_text(f"{report.BEGIN}\nBMM 1.0\n{report.END}\n")
    assert report.main(["--check", "--readme", str(stale)]) == 1
    assert report.main(["--readme", str(stale)]) == 0 and report.main(["--check", "--readme", str(stale)]) == 0
    assert report.main(["--readme", str(tmp_path / "missing.md")]) == 2


def test_report_errors_are_one_line(tmp_path, capsys):
    assert report.main(["--readme", str(tmp_path / "missing.md")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "missing.md" in err and len(err.splitlines()) == 1
    with pytest.raises(SystemExit) as e:
        report.main(["--bogus"])
    assert e.value.code == 2
    assert capsys.readouterr().err == "error: unrecognized arguments: --bogus (see python -m lib.report --help)\n"


def test_perop_summary_with_intervals():
    rows = []
    for method, (ood, ind) in {report.SPEC: (15.0, 20.0), report.ORACLE: (16.0, 21.0), report.PAPER: (14.0, 22.0)}.items():
        rows += [dict(method=method, split="OOD", op_class="BMM", mape_pct=ood),
                 dict(method=method, split="in-distribution", op_class="BMM", mape_pct=ind)]
    ci = pd.DataFrame([dict(method=report.SPEC, split="OOD", op_class="BMM", ci_low_pct=14.5, ci_high_pct=15.5,
                            vs_paper="above")])
    rows += [dict(method=m, split=split, op_class="FC", mape_pct=v) for m, split, v in
             [(report.SPEC, "OOD", 10.0), (report.ORACLE, "OOD", 11.0), (report.PAPER, "OOD", 13.0),
              (report.SPEC, "in-distribution", 12.0), (report.PAPER, "in-distribution", 14.0)]]
    s = report.perop_summary(pd.DataFrame(rows), ci)
    numbers = ["OOD, ours (spec-only tiles)", "OOD, ours (oracle tiles)", "OOD, paper (oracle tiles)",
               "in-dist., ours (spec-only tiles)", "in-dist., paper"]
    assert s.loc["BMM", numbers].astype(float).tolist() == [15, 16, 14, 20, 22]   # each method in its own column
    assert s.loc["FC", numbers].astype(float).tolist() == [10, 11, 13, 12, 14]
    assert s.loc["FC", "OOD below the paper"] == "yes"
    assert s.loc["BMM", "OOD below the paper"] == "**no**"
    assert s.loc["BMM", "OOD 95% CI, ours"] == "14.5 to 15.5" and s.loc["BMM", "CI vs the paper"] == "above"
    # equal to the paper is not below it
    tie = [dict(method=m, split=split, op_class="EW", mape_pct=13.0) for m in (report.SPEC, report.ORACLE, report.PAPER)
           for split in ("OOD", "in-distribution")]
    assert report.perop_summary(pd.DataFrame(tie)).loc["EW", "OOD below the paper"] == "**no**"


def test_seed_ranges_join_the_summaries():
    seeds = pd.DataFrame({"kind": ["inference", "inference", "training"], "device": ["ALL", "A", "A"],
                          "seed0_pct": [4.5, 4.0, 6.0], "seed1_pct": [5.5, 3.0, 7.0],
                          "min_pct": [4.5, 3.0, 6.0], "max_pct": [5.5, 4.0, 7.0],
                          "paper_labels_min_pct": [4.0, 2.0, 6.0], "paper_labels_max_pct": [5.0, 2.5, 7.0]})
    inf, train = _e2e([("A", 4.0, 6.0), ("B", 5.0, 3.0)]), _e2e([("A", 6.0, 5.0)])
    fused = pd.DataFrame({"neusight_ape": [1.0], "paper_ape_pct": [2.0]})
    s = report.e2e_summary(inf, train, fused, seeds)["ours over 2 seeds"]
    assert s.tolist() == ["4.5 to 5.5", "n/a", "n/a"]          # training and fused have no 'ALL' row here
    # per GPU, beside the paper's number: the range on the labels the paper's tables have
    g = report.e2e_per_gpu(inf, train, seeds)["ours over 2 seeds, the paper's labels"]
    assert g.tolist() == ["2.0 to 2.5", "6.0 to 7.0", "n/a"]    # (A, inf), (A, train), (B, inf)
    perop = pd.DataFrame([dict(method=m, split=split, op_class="BMM", mape_pct=1.0)
                          for m in (report.SPEC, report.ORACLE, report.PAPER) for split in ("OOD", "in-distribution")])
    spread = pd.DataFrame({"split": ["OOD", "in-distribution"], "op_class": "BMM", "seeds": 5, "min_pct": [15.3, 1.0],
                           "max_pct": [15.7, 2.0]})
    assert report.perop_summary(perop, seeds=spread).loc["BMM", "OOD over 5 seeds, ours"] == "15.3 to 15.7"



def test_held_out_summary_by_hand():
    from lib.metrics import NEVER_TRAINED_POOLS
    held, ood, every = NEVER_TRAINED_POOLS
    per_op = pd.DataFrame({"group": ["Tesla T4", held, ood, every], "op_class": ["FC"] * 4,
                           "mape_pct": [30.0, 30.0, 10.0, 20.0], "trained_mape_pct": [5.0, 5.0, None, None]})
    e2e = pd.DataFrame({"group": [held, ood, every], "kind": ["inference"] * 3, "mape_pct": [25.0, 7.0, 16.0],
                        "trained_mape_pct": [6.0, None, None]})
    t = report.held_out_summary(per_op, e2e)
    assert list(t.index) == ["FC (per kernel)", "inference (end to end)"]
    assert t.loc["FC (per kernel)"].tolist() == [30.0, 5.0, 10.0, 20.0]
    assert t.loc["inference (end to end)"].tolist() == [25.0, 6.0, 7.0, 16.0]
    assert list(t.columns) == ["training GPUs, each held out", "the same, trained on", "OOD GPUs",
                               "every GPU never trained on"]


def test_ood_gpus_note_by_hand():
    # the training GPU's row and the pooled rows are not OOD GPUs; classes sharing their GPUs are listed together
    per_op = pd.DataFrame({"group": ["X", "Y", "X", "Tesla T4", "OOD GPUs", "X"],
                           "op_class": ["BMM", "BMM", "FC", "EW", "EW", "LN"]})
    note = report.ood_gpus_note(per_op)
    assert note.startswith("OOD kernels: BMM on X and Y; FC, LN on X. ")


def test_bench_machine_names_the_cpu_and_is_empty_for_an_older_table():
    rows = [{"metric": "machine", "value": 2, "unit": "CPUs", "target": "", "note": "AMD EPYC, torch AVX2; commit abc"},
            {"metric": "forecast_cli_cold", "value": 2.5, "unit": "s", "target": "<= 5", "note": ""}]
    bench = pd.DataFrame(rows)
    assert report.bench_machine(bench) == " on 2 CPUs, AMD EPYC, torch AVX2; commit abc"
    assert report.bench_machine(bench.iloc[1:]) == ""
    assert list(report.bench_summary(bench).index) == ["forecast_cli_cold"]   # no target: not a speed row


def test_amd_summary_by_hand():
    from lib.report import amd_summary
    h = pd.DataFrame({"mode": ["inference", "training"], "device": ["AMD Instinct MI250"] * 2, "labels": [10.0, 1.0],
                      "ours": [4.0, 20.0], "ours_ci_lo": [2.0, np.nan], "ours_ci_hi": [6.0, np.nan],
                      "ours_paper_labels": [4.0, 20.0], "paper": [8.0, 15.0], "nvidia_trained": [16.0, 21.0],
                      "roofline": [35.0, 45.0], "split": ["OOD", "OOD"]})
    t = amd_summary(h)
    assert t.loc[("inference", "AMD Instinct MI250"), "below the paper"] == "yes"
    assert t.loc[("training", "AMD Instinct MI250"), "below the paper"] == "**no**"
    assert t["ours, 95% CI"].tolist() == ["2.0 to 6.0", "n/a"] and t["labels"].tolist() == ["10", "1"]


def test_distributed_summary_by_hand():
    from lib.report import distributed_summary
    s = pd.DataFrame({"which": ["dp", "NVIDIA H100 80GB HBM3", "all"], "labels": [3.0, 8.0, 11.0],
                      "ours_mape": [2.0, 9.0, 5.0], "ours_ci_lo": [1.0, 5.0, 3.0], "ours_ci_hi": [3.0, 12.0, 7.0],
                      "paper_mape": [8.0, 6.0, 7.0], "ours_max": [5.0, 11.0, 11.0],
                      "forecast_over_measured_min": [0.95, 0.891, 0.891], "forecast_over_measured_max": [1.0, 0.99, 1.03],
                      "group": ["layout", "GPU", "all"]})
    t = distributed_summary(s)
    assert list(t.index) == ["data parallel", "NVIDIA H100 80GB HBM3", "all 4-GPU labels"]
    assert t["ours"].tolist() == [2.0, 9.0, 5.0] and t["labels"].tolist() == ["3", "8", "11"]
    assert t["below the paper"].tolist() == ["yes", "**no**", "yes"]
    assert t["ours, 95% CI"].tolist() == ["1.0 to 3.0", "5.0 to 12.0", "3.0 to 7.0"]
    assert t.loc["NVIDIA H100 80GB HBM3", "forecast / measured"] == "0.89 to 0.99"
