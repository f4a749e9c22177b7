"""lib.bench: each benchmark's numbers land in their own rows (the timed processes replaced by fixed answers)."""
from lib import bench


def test_data_load_reads_rows_then_seconds(monkeypatch):
    answers = iter([(9.0, "260199 1.5\n"), (1.0, "260199 0.25\n")])     # cold, then cached
    monkeypatch.setattr(bench, "timed", lambda code, build=None: next(answers))
    rows = {r["metric"]: r for r in bench.bench_data()}
    assert rows["data_load_cold"]["value"] == 1.5 and rows["data_load_cold"]["note"].startswith("260199 kernel rows")
    assert rows["data_load_cached"]["value"] == 0.25


def test_forecast_cli_capture_is_the_first_timed_call_after_the_warm_up(monkeypatch):
    seconds = iter([30.0, 11.0, 2.5])                                    # warm-up, graph captured, graph cached
    monkeypatch.setattr(bench, "timed_cmd", lambda args, build=None: next(seconds))
    rows = {r["metric"]: r["value"] for r in bench.bench_forecast()}
    assert rows == {"forecast_cli_capture": 11.0, "forecast_cli_cold": 2.5}


def test_machine_row_names_cpu_isa_threads_and_commit(monkeypatch):
    import subprocess
    from lib import numerics
    monkeypatch.setattr(numerics, "numeric_env", lambda: {"cpu_model": "Some CPU", "cpu_capability": "AVX2", "train_threads": 2})
    answers = iter(["", "abc1234\n"])                                    # a clean git status, then git rev-parse
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, next(answers), ""))
    (row,) = bench.bench_machine()
    assert row["metric"] == "machine" and row["target"] == ""
    assert row["note"].startswith("Some CPU, torch AVX2, 2 training threads; commit abc1234, ")


def test_predict_throughput_as_pinned_then_under_mkl_auto(monkeypatch):
    import numpy as np
    calls = []
    def fake_timed(code, build=None, *argv, **environ):
        calls.append(environ)
        np.save(argv[0], [1.0, 2.0, 4.0] if not environ else [1.0, 2.0 * (1 + 3e-7), 4.0])   # one forecast moves
        return 5.0, ("1000 0.05\n" if not environ else "1000 0.04\n")  # 20,000 then 25,000 kernels/s
    monkeypatch.setattr(bench, "timed", fake_timed)
    rows = {r["metric"]: r for r in bench.bench_predict()}
    assert calls == [{}, {"MKL_CBWR": "AUTO"}]                           # lib's pin first, then MKL's own choice
    assert rows["predict_throughput"]["value"] == 20000 and rows["predict_throughput"]["target"] == ">= 20000"
    auto = rows["predict_throughput_mkl_auto"]
    assert auto["value"] == 25000 and auto["target"] == ""
    assert auto["note"].endswith("33% of the forecasts differ from the pinned ones, by at most 3.0e-07 relative")
