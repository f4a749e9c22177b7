"""lib.perop: the paper's per-op numbers as read from summary/perop.csv, and where our interval lies beside them."""
import numpy as np
import pandas as pd
import pytest

from lib import perop

NEUSIGHT = f"paper: {perop.PAPER_METHODS['NeuSight']}"


def test_paper_table_reads_the_summary_csv():
    paper = perop.paper_table()
    # summary/perop.csv, row 'NeuSight': OOD BMM 13.7836..., in-distribution LN 20.0516...
    assert paper.loc[NEUSIGHT, ("OOD", "BMM")] == pytest.approx(13.7836, abs=1e-4)
    assert paper.loc[NEUSIGHT, ("in-distribution", "LN")] == pytest.approx(20.0516, abs=1e-4)
    assert paper.loc[NEUSIGHT, ("OOD", "SOFTMAX")] == pytest.approx(13.8601, abs=1e-4)
    assert len(paper) == 4 and paper.shape[1] == 10


def test_mape_ci_says_where_the_interval_lies_beside_the_paper():
    # every BMM row off by exactly 15% (interval 15 to 15), every FC row by 10%; EW alternates 5% and 25%
    ape_pct = {"BMM": [15.0] * 40, "FC": [10.0] * 40, "EW": [5.0, 25.0] * 20}
    df = pd.DataFrame([{"split": "test_ood", "op_class": c, "latency_ms": 1.0, "pred_neusight": 1 + a / 100}
                       for c, apes in ape_pct.items() for a in apes])
    paper = pd.DataFrame([[14.0, 13.9, 15.0]], index=[NEUSIGHT],
                         columns=pd.MultiIndex.from_tuples([("OOD", "BMM"), ("OOD", "FC"), ("OOD", "EW")]))
    out = perop.mape_ci(df, ["pred_neusight"], paper).set_index("op_class")
    assert out.loc["BMM", ["ci_low_pct", "ci_high_pct"]].tolist() == pytest.approx([15.0, 15.0])
    assert out["vs_paper"].to_dict() == {"BMM": "above", "FC": "below", "EW": "spans"}
    assert out.loc["EW", "mape_pct"] == pytest.approx(15.0) and (out["rows"] == 40).all()
