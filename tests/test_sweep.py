"""python -m lib.sweep and lib.sweep.sweep_table (notebook 05): several GPUs and batches, each as lib.forecast gives it."""
import io
import json

import pandas as pd
import pytest

from lib import paths
from lib.devices import load_device
from lib.forecast import forecast, main as forecast_main
from lib.sweep import COLUMNS, main as sweep_main, sweep_table

from cli_run import run_main, run_module

GPT2 = paths.MODEL_CONFIGS / "gpt2_large.json"
GPT3_27 = paths.MODEL_CONFIGS / "gpt3_27.json"
L4 = paths.DEVICE_CONFIGS / "NVIDIA_L4.json"
T4 = paths.DEVICE_CONFIGS / "Tesla_T4.json"
MI250 = paths.DEVICE_CONFIGS / "AMD_Instinct_MI250.json"


def cli(*args):
    return run_main(sweep_main, "python -m lib.sweep", *args)


def test_rows_follow_the_order_given_and_equal_single_forecasts():
    l4, t4 = load_device(L4), load_device(T4)
    table = sweep_table(GPT2, [t4, l4, t4], [8, 2, 8], 256, "inference", method="roofline")
    # each GPU and batch once, in the order first given
    assert list(zip(table.device, table.batch)) == [(t4.name, 8), (t4.name, 2), (l4.name, 8), (l4.name, 2)]
    for row in table.itertuples():
        one = forecast(GPT2, t4 if row.device == t4.name else l4, row.batch, 256, "inference", method="roofline")
        assert row.latency_ms == pytest.approx(one["latency_ms"], rel=1e-6) and row.kernels == one["kernels"]
        assert row.seq == 256 and row.mode == "inference" and row.backward_ms == 0 and row.fits_memory


def test_cli_gives_each_gpu_the_answer_lib_forecast_gives_it():
    # an NVIDIA and an AMD GPU in one call: each by its own vendor's NeuSight models, as lib.forecast picks them
    r = cli("--model", "gpt2_large", "--device", "MI250", "L4", "--batch", 1, "--seq", 128, "--mode", "training")
    assert r.returncode == 0, r.stderr
    table = pd.read_csv(io.StringIO(r.stdout))
    assert list(table.columns) == COLUMNS and list(table.device) == ["AMD Instinct MI250", "NVIDIA L4"]
    for row, device in zip(table.itertuples(), (MI250, L4)):
        one = run_main(forecast_main, "python -m lib.forecast", "--model", GPT2, "--device", device, "--batch", 1,
                       "--seq", 128, "--mode", "training")
        assert one.returncode == 0, one.stderr
        single = json.loads(one.stdout)
        for key in ("latency_ms", "forward_ms", "backward_ms"):
            assert getattr(row, key) == pytest.approx(single[key], rel=1e-6), (device, key)
        assert row.kernels == single["kernels"]
    # the warnings lib.forecast prints for each GPU, each once
    assert r.stderr.count("warning: NVIDIA L4's machine balance") == 1
    assert r.stderr.count("warning: AMD Instinct MI250 is not an NVIDIA GPU") == 1


def test_a_run_that_cannot_fit_is_flagged_and_warned(tmp_path):
    out = tmp_path / "sweep.csv"
    r = cli("--model", GPT3_27, "--device", L4, "--batch", 1, "--seq", 1024, "--mode", "training", "--method",
            "roofline", "--output", out)
    assert r.returncode == 0 and r.stdout == "", r.stderr
    table = pd.read_csv(out)
    assert len(table) == 1 and not table.fits_memory.iloc[0]
    assert "warning: batch 1: the model's fp32 weights (10.6 GB, 2.65 B parameters)" in r.stderr
    assert "more than NVIDIA L4's 24 GB" in r.stderr and f"wrote 1 forecasts to {out}" in r.stderr


@pytest.mark.parametrize("args, message", [
    (("--batch", 0), "error: --batch must be positive integers, got 0"),
    (("--device", "A100"), "error: argument --device: 'A100' names 3 known GPUs"),
    (("--method", "li"), "error: argument --method: invalid choice: 'li'"),
    (("--seq", 4096), "seq 4096 is longer than the model's maximum of 1024 positions"),
])
def test_cli_errors_are_one_line(args, message):
    base = {"--model": GPT2, "--device": L4, "--batch": 1, "--seq": 128, "--mode": "inference", "--method": "roofline"}
    extra = dict(zip(args[::2], args[1::2]))
    r = cli(*[x for k, v in {**base, **extra}.items() for x in (k, v)])
    assert r.returncode == 2 and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert message in r.stderr, r.stderr


def test_the_real_process_prints_the_table():
    r = run_module("lib.sweep", "--model", "gpt2_large", "--device", "T4", "--batch", 1, 2, "--seq", 64, "--mode",
                   "inference", "--method", "roofline")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == ",".join(COLUMNS) and len(r.stdout.splitlines()) == 3


def test_fused_training_is_said_to_be_unvalidated_once():
    base = ("--model", GPT2, "--device", L4, T4, "--batch", 1, "--seq", 8, "--method", "roofline", "--fusion")
    training, inference = cli(*base, "--mode", "training"), cli(*base, "--mode", "inference")
    assert training.returncode == 0 and training.stderr.count("every fused label of the dataset is inference") == 1
    assert inference.returncode == 0 and "every fused label" not in inference.stderr



def test_the_plot_draws_each_gpu_per_step_and_per_sequence():
    from lib.sweep import sweep_figure
    table = pd.DataFrame({"device": ["A", "A", "B", "B"], "batch": [1, 4, 1, 4], "latency_ms": [10.0, 20.0, 30.0, 100.0],
                          "fits_memory": [True, True, True, False]})
    fig = sweep_figure(table, "t")
    step, per_sequence = fig.axes
    # each GPU: a line through all its rows, dots where it fits, crosses where it cannot
    for ax, b_values in ((step, [30.0, 100.0]), (per_sequence, [30.0, 25.0])):
        lines = {(line.get_label(), line.get_marker()): list(line.get_ydata()) for line in ax.get_lines()}
        assert lines[("B", "None")] == b_values
        assert [v for (label, marker), v in lines.items() if marker == "x" and v] == [[b_values[1]]]
    legend = fig.legends[0]
    assert [t.get_text() for t in legend.get_texts()] == ["A", "B", "does not fit in memory"]


def test_cli_writes_the_plot_beside_the_table(tmp_path):
    plot = tmp_path / "sweep.png"
    r = cli("--model", GPT2, "--device", L4, T4, "--batch", 1, 2, "--seq", 64, "--mode", "inference", "--method",
            "roofline", "--plot", plot)
    assert r.returncode == 0, r.stderr
    assert len(pd.read_csv(io.StringIO(r.stdout))) == 4 and f"wrote the plot to {plot}" in r.stderr
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = tmp_path / "sweep.SVG"   # the suffix says the format, in any case
    assert cli("--model", GPT2, "--device", T4, "--batch", 1, "--seq", 64, "--mode", "inference", "--method",
               "roofline", "--plot", svg).returncode == 0
    assert b"<svg" in svg.read_bytes()[:500]


@pytest.mark.parametrize("plot, output, message", [
    ("sweep.jpg", None, "error: --plot {tmp}/sweep.jpg: name a png, pdf, svg file (by its suffix)"),
    ("missing/sweep.png", None, "error: --plot {tmp}/missing/sweep.png: folder {tmp}/missing does not exist"),
    ("same.png", "same.png", "error: --plot {tmp}/same.png: is also the --output file"),
])
def test_a_plot_that_cannot_be_written_is_refused_before_any_work(tmp_path, plot, output, message):
    extra = ("--output", tmp_path / output) if output else ()
    r = cli("--model", GPT2, "--device", T4, "--batch", 1, "--seq", 64, "--mode", "inference", "--method", "roofline",
            "--plot", tmp_path / plot, *extra)
    assert r.returncode == 2 and r.stdout == "" and r.stderr.strip() == message.format(tmp=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_runs_that_cannot_fit_are_warned_once_per_gpu():
    from lib.sweep import memory_warnings
    table = pd.DataFrame({"device": ["A", "A", "A", "B", "B", "C"], "batch": [8, 2, 4, 1, 2, 1],
                          "fits_memory": [False, False, False, True, False, True],
                          "memory_note": ["8 too big", "2 too big", "4 too big", "", "B's 2 too big", ""]})
    assert memory_warnings(table) == ["batch 2: 2 too big (nor can batches 4, 8)", "batch 2: B's 2 too big"]
