"""lib.protocol.choice_check: recorded choices beside recomputed ones (no training here)."""
import pandas as pd

from lib import protocol
from lib.selection import UNSEEN_CHOICE


def test_choice_check_marks_a_recomputed_winner_that_differs():
    winners = pd.DataFrame({"config": ["logo_choice", "no_f_mem"], "epochs": [20, 37]},
                           index=pd.Index(["BMM", "FC"], name="op_class"))
    recomputed = protocol.winner_choices(winners)
    assert recomputed == {"BMM": ("logo_choice", 20), "FC": ("no_f_mem", 37)}
    assert all(type(e) is int for _, e in recomputed.values())   # not numpy ints in the table's text
    check = protocol.choice_check("unseen", UNSEEN_CHOICE, recomputed)
    assert check.to_dict("records") == [
        {"protocol": "unseen", "op_class": "BMM", "recorded": "('logo_choice', 40)",
         "recomputed": "('logo_choice', 20)", "reproduced": False},
        {"protocol": "unseen", "op_class": "FC", "recorded": "('no_f_mem', 37)",
         "recomputed": "('no_f_mem', 37)", "reproduced": True}]


def test_choice_check_compares_adoption_flags_too():
    check = protocol.choice_check("amendment 5", {"EW": True, "LN": True}, {"EW": True, "LN": False})
    assert check["reproduced"].tolist() == [True, False]
