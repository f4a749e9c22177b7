"""Board power per peak FLOP/s (lib.power): hand-computed cases and the table's errors."""
import pandas as pd
import pytest

from lib import power
from lib.devices import all_devices


def test_the_committed_table_covers_every_measured_gpu_with_a_source():
    watts = power.load_board_power()
    measured = {"Tesla P4", "Tesla P100-PCIE-16GB", "Tesla T4", "Tesla V100-PCIE-32GB", "NVIDIA A100-PCIE-40GB",
                "NVIDIA A100 80GB PCIe", "NVIDIA H100 80GB HBM3"}
    assert measured <= set(watts.index) and set(watts.index) <= set(all_devices())
    assert watts["Tesla T4"] == 70 and watts["NVIDIA H100 80GB HBM3"] == 700


def test_power_per_peak_by_hand():
    # T4: 70 W / 8.141 TFLOP/s = 8.598 W per TFLOP/s; V100: 250 / 14.03 = 17.82; a GPU without a power figure drops
    out = power.power_per_peak(pd.Series({"T4": 0.6, "V100": 0.98, "X": 0.5}),
                               pd.Series({"T4": 8141.0, "V100": 14030.0, "X": 1.0}),
                               pd.Series({"T4": 70.0, "V100": 250.0}))
    assert list(out.index) == ["T4", "V100"]
    assert out["w_per_peak_tflops"].tolist() == pytest.approx([70 / 8.141, 250 / 14.03])
    assert out.loc["V100", "peak_reached"] == 0.98


@pytest.mark.parametrize("text, match", [
    ("device,board_power_w\nT4,70\n", "missing column.*source"),
    ("device,board_power_w,source\nT4,-70,x\n", "row 2: needs a device, a positive board_power_w"),
    ("device,board_power_w,source\nT4,70,\n", "row 2: .*and a source"),
    ("device,board_power_w,source\nT4,70,x\n,71,y\n", "row 3: needs a device"),
    ("device,board_power_w,source\nT4,70,x\nT4,71,y\n", "device 'T4' listed twice"),
    ("", "not a readable CSV"),
])
def test_bad_tables_name_the_file_and_row(tmp_path, text, match):
    path = tmp_path / "p.csv"
    path.write_text(text)
    with pytest.raises(power.PowerError, match=f"^{path}: {match}"):
        power.load_board_power(path)
    with pytest.raises(power.PowerError, match="not found"):
        power.load_board_power(tmp_path / "none.csv")
