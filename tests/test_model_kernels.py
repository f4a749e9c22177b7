"""lib.model_kernels: profiles of model runs (lib.profile_model --kernels-out) read back and set beside a forecast."""
import numpy as np
import pandas as pd
import pytest

from lib import model_kernels as MK
from lib.model_kernels import OP_KERNEL_COLUMNS


def test_op_base_strips_namespace_overload_and_tag():
    assert MK.op_base("aten::addmm") == "addmm"
    assert MK.op_base("aten.addmm.default") == "addmm"
    assert MK.op_base("aten.add.Tensor[sum of grads]") == "add"
    assert MK.op_base("aten.native_dropout_backward.default[mask->float]") == "native_dropout_backward"
    assert MK.op_base("") == ""


def _profile(rows):
    return pd.DataFrame(rows, columns=OP_KERNEL_COLUMNS)


def test_load_profiles_reads_the_layout_and_names_bad_files(tmp_path):
    assert list(MK.load_profiles(tmp_path).columns) == MK.SETTING_COLUMNS + OP_KERNEL_COLUMNS   # none: empty
    folder = tmp_path / "torch2.11.0_cuda13.0" / "NVIDIA_H200"
    folder.mkdir(parents=True)
    _profile([("fw", "aten::addmm", "[[4], [8, 3], [3, 4]]", "sgemm", 2, 30.0, 15.0),
              ("", "", "", "Memcpy HtoD", 1, 2.0, 2.0)]).to_csv(folder / "switchxl4-inf-512-1.csv", index=False)
    got = MK.load_profiles(tmp_path)
    assert len(got) == 2 and set(got[["software", "gpu", "model", "mode", "seq", "batch"]].drop_duplicates()
                                   .itertuples(index=False, name=None)) == {
        ("torch2.11.0_cuda13.0", "NVIDIA_H200", "switchxl4", "inference", 512, 1)}
    assert got.loc[1, "op"] == "" and got.loc[1, "phase"] == ""                  # blanks stay blank, not NaN
    (folder / "notes.csv").write_text("x\n1\n")
    with pytest.raises(MK.ProfileFileError, match="notes.csv: not named"):
        MK.load_profiles(tmp_path)
    (folder / "notes.csv").unlink()
    pd.DataFrame({"phase": ["fw"]}).to_csv(folder / "bert_large-train-512-2.csv", index=False)
    with pytest.raises(MK.ProfileFileError, match="bert_large-train-512-2.csv: missing column"):
        MK.load_profiles(tmp_path)


def test_compare_by_hand():
    profile = _profile([("fw", "aten::addmm", "[]", "sgemm", 2, 350.0, 175.0),
                        ("fw", "aten::relu", "[]", "relu", 1, 50.0, 50.0),
                        ("bw", "aten::mm", "[]", "sgemm_nn", 1, 150.0, 150.0),
                        ("bw", "aten::mm", "[]", "sgemm_nt", 1, 250.0, 250.0),
                        ("fw", "", "", "Memcpy DtoD", 1, 10.0, 10.0)])
    table = pd.DataFrame({"aten": ["aten.addmm.default", "aten.relu.default", "aten.mm.default",
                                   "aten.add.Tensor[sum of grads]"],
                          "phase": ["fw", "fw", "bw", "bw"], "count": [2, 1, 2, 1], "total_ms": [0.2, 0.05, 0.5, 0.08]})
    got = MK.compare(profile, table)
    assert list(got.columns) == MK.COMPARE_COLUMNS
    rows = [(r.phase, r.op, r.measured_kernels, r.measured_ms, r.forecast_kernels, r.forecast_ms) for r in got.itertuples()]
    # the largest difference first: addmm 0.15, mm 0.1 (two kernels of one op), add 0.08 (no kernel measured), the
    # memcpy 0.01 (no op), relu 0
    assert rows == [("fw", "addmm", 2, pytest.approx(0.35), 2, pytest.approx(0.2)),
                    ("bw", "mm", 2, pytest.approx(0.4), 2, pytest.approx(0.5)),
                    ("bw", "add", 0, 0.0, 1, pytest.approx(0.08)),
                    ("fw", "", 1, pytest.approx(0.01), 0, 0.0),
                    ("fw", "relu", 1, pytest.approx(0.05), 1, pytest.approx(0.05))]
    assert got["measured_over_forecast"].tolist()[:3] == pytest.approx([1.75, 0.8, 0.0])
    assert pd.isna(got.loc[3, "measured_over_forecast"])                   # nothing forecast there


def test_a_profile_as_the_collector_writes_it_reads_back(tmp_path):
    # lib.profile_ops.kernels_by_op's table, written as lib.profile_model writes it, read by load_profiles
    from lib.profile_ops import kernels_by_op
    ev = [{"cat": "user_annotation", "name": "fw", "ts": 0, "dur": 50, "tid": 1},
          {"cat": "cpu_op", "name": "aten::addmm", "ts": 1, "dur": 10, "tid": 1, "args": {"Input Dims": [[4], [8, 3], [3, 4]]}},
          {"cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 2, "tid": 1, "args": {"correlation": 1}},
          {"cat": "kernel", "name": "sgemm", "ts": 100, "dur": 9.0, "args": {"correlation": 1}},
          {"cat": "gpu_memcpy", "name": "Memcpy DtoH", "ts": 120, "dur": 1.0, "args": {"correlation": 2}}]
    written = kernels_by_op({"traceEvents": ev})
    folder = tmp_path / "torch2.11.0_cuda13.0" / "NVIDIA_H200"
    folder.mkdir(parents=True)
    written[OP_KERNEL_COLUMNS].to_csv(folder / "gpt2_large-train-1024-1.csv", index=False)
    read = MK.load_profiles(tmp_path)
    pd.testing.assert_frame_equal(read[OP_KERNEL_COLUMNS], written[OP_KERNEL_COLUMNS], check_dtype=False)
    assert (read["mode"] == "training").all() and (read["seq"] == 1024).all()


def test_short_kernel_split_by_hand():
    # one setting, four op rows: 2 kernels of 3 us each (short), 1 of 50 us, one op the run did not launch, and a
    # memcpy of 4 us: short = 0.006 + 0.004 ms measured, 0.03 + 0 forecast; long = 0.05 / 0.04; forecast only 0.02
    setting = dict(software="s", gpu="G", model="m", mode="inference", seq=8, batch=1)
    compared = pd.DataFrame([("fw", "mul", 2, 0.006, 2, 0.03), ("fw", "addmm", 1, 0.05, 1, 0.04),
                             ("fw", "clone", 0, 0.0, 3, 0.02), ("fw", "", 1, 0.004, 0, 0.0)],
                            columns=["phase", "op", "measured_kernels", "measured_ms", "forecast_kernels", "forecast_ms"])
    compared = compared.assign(**setting)
    got = MK.short_kernel_split(pd.concat([compared, compared.assign(model="n", forecast_ms=0.0)]))
    assert list(got.columns) == MK.SETTING_COLUMNS + MK.SPLIT_COLUMNS and got["model"].tolist() == ["m", "n"]
    row = got.iloc[0]
    assert [row[c] for c in MK.SPLIT_COLUMNS] == pytest.approx([0.01, 0.03, 0.05, 0.04, 0.02, 0.06, 0.09])
    assert MK.short_kernel_split(compared, short_us=2.0).iloc[0]["short_measured_ms"] == 0.0   # no kernel under 2 us


def test_elementwise_paths_tell_indexed_from_vectorized():
    dims = "[[1, 4, 8, 8], [1, 4, 8, 8], []]"
    profile = _profile([("fw", "aten::add_", dims, "void at::native::elementwise_kernel<128, 2, add>(int)", 2, 30.0, 15.0),
                        ("fw", "aten::add_", dims, "void at::native::elementwise_kernel<128, 2, add>(int)", 1, 18.0, 18.0),
                        ("fw", "aten::add_", dims, "void at::native::vectorized_elementwise_kernel<4, add>(int)", 1, 4.0, 4.0),
                        ("fw", "aten::add_", dims, "void at::native::index_add_kernel(int)", 1, 9.0, 9.0),
                        ("fw", "aten::mul", dims, "void at::native::elementwise_kernel<128, 2, mul>(int)", 1, 7.0, 7.0)])
    profile = profile.assign(software="s", gpu="G", model="m", mode="inference", seq=8, batch=1)
    got = MK.elementwise_paths(profile, "aten::add_")
    assert got[["path", "kernels", "total_us", "mean_us"]].values.tolist() == [["indexed", 3, 48.0, 16.0],
                                                                              ["vectorized", 1, 4.0, 4.0]]


def test_op_totals_add_up_the_named_ops_per_setting():
    compared = pd.DataFrame([("fw", "addmm", 2, 0.5, 0.4), ("bw", "mm", 3, 0.3, 0.2), ("fw", "mul", 1, 0.1, 0.3)],
                            columns=["phase", "op", "measured_kernels", "measured_ms", "forecast_ms"])
    compared = compared.assign(software="s", gpu="G", model="m", mode="training", seq=8, batch=1)
    got = MK.op_totals(compared)
    assert got[["measured_kernels", "measured_ms", "forecast_ms"]].values.tolist() == [pytest.approx([5, 0.8, 0.6])]
    assert MK.op_totals(compared, ops=("mul",))["forecast_ms"].tolist() == [0.3]


def test_gemm_dims_of_each_product():
    assert MK.gemm_dims("mm", "[[512, 1024], [1024, 4]]") == (1, 512, 4, 1024)
    assert MK.gemm_dims("addmm", "[[3840], [1024, 1280], [1280, 3840], [], []]") == (1, 1024, 3840, 1280)
    assert MK.gemm_dims("bmm", "[[20, 1024, 64], [20, 64, 1024]]") == (20, 1024, 1024, 64)
    assert MK.gemm_dims("baddbmm", "[[32, 8, 16], [32, 8, 4], [32, 4, 16], [], []]") == (32, 8, 16, 4)
    with pytest.raises(ValueError, match="op must be one of"):
        MK.gemm_dims("add", "[[2, 2], [2, 2]]")
    with pytest.raises(ValueError, match="not two factors"):
        MK.gemm_dims("mm", "[[512, 1024], [512, 4]]")                  # K does not meet


def test_gemm_calls_by_hand():
    # a forward product of 1024 x 4096 by 4096 x 1024 (one call: its GEMM and a split-K kernel), the backward's two of
    # the same sizes in other orders (falling together with no forward twin), a bmm, and a relu that is no GEMM
    profile = _profile([("fw", "aten::addmm", "[[1024], [1024, 4096], [4096, 1024], [], []]", "gemm", 1, 90.0, 90.0),
                        ("fw", "aten::addmm", "[[1024], [1024, 4096], [4096, 1024], [], []]", "split_k", 1, 10.0, 10.0),
                        ("bw", "aten::mm", "[[1024, 1024], [1024, 4096]]", "gemm_nn", 1, 120.0, 120.0),
                        ("bw", "aten::mm", "[[1024, 1024], [1024, 4096]]", "gemm_nt", 1, 80.0, 80.0),
                        ("fw", "aten::bmm", "[[8, 64, 32], [8, 32, 64]]", "bmm", 2, 6.0, 3.0),
                        ("fw", "aten::relu", "[[1024, 4096]]", "relu", 1, 5.0, 5.0)])
    table = pd.DataFrame({"aten": ["aten.addmm.default", "aten.mm.default", "aten.bmm.default", "aten.relu.default"],
                          "phase": ["fw", "bw", "fw", "fw"], "B": [1.0, np.nan, 8.0, np.nan],
                          "M": [1024.0, 4096.0, 64.0, np.nan], "N": [1024.0, 1024.0, 64.0, np.nan],
                          "K": [4096.0, 1024.0, 32.0, np.nan], "count": [1, 2, 2, 1], "total_ms": [0.15, 0.1, 0.012, 0.004]})
    got = MK.gemm_calls(profile, table)
    assert list(got.columns) == MK.GEMM_CALL_COLUMNS
    rows = {(r.phase, r.B, r.shape): (r.calls, r.measured_us, r.forecast_us) for r in got.itertuples()}
    assert rows == {("fw", 1, "1024x1024x4096"): (1, 100.0, pytest.approx(150.0)),
                    ("bw", 1, "1024x1024x4096"): (2, 200.0, pytest.approx(100.0)),
                    ("fw", 8, "32x64x64"): (2, 6.0, pytest.approx(12.0))}
    fw = got.set_index(["phase", "shape"]).loc[("fw", "1024x1024x4096")]
    assert fw.measured_us_per_call == 100.0 and fw.forecast_over_measured == pytest.approx(1.5)
    one_sided = MK.gemm_calls(profile[profile["phase"] == "fw"], table)              # the backward was not profiled
    assert one_sided.set_index("phase").loc["bw", "measured_us"] != one_sided.set_index("phase").loc["bw", "measured_us"]


def test_ratio_by_time_bins_and_medians():
    rows = pd.DataFrame({"source": ["a", "a", "a", "b"], "t": [10.0, 40.0, 150.0, 50.0], "r": [2.0, 4.0, 1.0, 0.5]})
    got = MK.ratio_by_time(rows, "t", "r", ["source"])
    assert [(r.source, str(r.time_us), r.shapes, r.median_ratio) for r in got.itertuples()] == [
        ("a", "[0.0, 50.0)", 2, 3.0), ("a", "[100.0, 200.0)", 1, 1.0), ("b", "[50.0, 100.0)", 1, 0.5)]
