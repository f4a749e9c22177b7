"""The collector's CSV schema, CLI and device JSON (lib.profile), on CPU."""
import csv
import sys
import types

import pytest
import torch

from lib import profile as P
from lib import profile_ops


def test_profile_reexports_the_ops_module():
    # notebooks and scripts import everything from lib.profile, as before the split
    for name in ("ProfileError", "read_dims", "dims_of", "dataset_dims_file", "build_op", "footprint_bytes",
                 "time_op", "fastest_mean", "kernels_by_label", "kernel_columns", "profile_kernels",
                 "GEMM_DIMS", "VEC_DIMS", "VEC_OPS", "ALL_OPS", "SCALAR", "KEEP_FRACTION"):
        assert getattr(P, name) is getattr(profile_ops, name), name


def test_write_rows_schema(tmp_path):
    row = {"OPName": "ln", "Latency": 0.05, "Device": "X", "B": 60, "H": 272, "Kernel Name": "k"}
    out = P.write_rows([row], P.VEC_DIMS, tmp_path / "sub" / "ln.csv")
    with open(out) as f:
        r = list(csv.reader(f))
    assert r[0] == list(P.SCHEMA) + ["B", "H"]
    assert r[0][:3] == ["OPName", "Latency", "Device"] and r[0][15] == "Kernels"
    assert r[1][0] == "ln" and r[1][-2:] == ["60", "272"]
    with pytest.raises(P.ProfileError, match="missing H"):
        P.write_rows([{"OPName": "ln", "Latency": 1, "Device": "X", "B": 1}], P.VEC_DIMS, tmp_path / "x.csv")


def test_no_gpu_exits_nonzero_with_one_line(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    rc = P.main(["--ops", "bmm", "--dims", "test", "--output", str(tmp_path / "o.csv")])
    err = capsys.readouterr().err.strip()
    assert rc != 0 and "no CUDA GPU:" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "o.csv").exists()


def test_bad_op_and_mixed_formats(monkeypatch, capsys, tmp_path):
    assert P.main(["--ops", "bmm,conv", "--dims", "test", "--output", str(tmp_path / "o.csv")]) == 2
    assert "unknown op 'conv'" in capsys.readouterr().err
    monkeypatch.setattr(P, "require_cuda", lambda: torch)
    with pytest.raises(P.ProfileError, match="different dims"):
        P.collect(["bmm", "add"], "test", tmp_path / "o.csv")


def test_device_spec_from_properties(monkeypatch):
    props = types.SimpleNamespace(name="NVIDIA Fake", total_memory=80 * 2**30, multi_processor_count=132,
                                  major=9, minor=0, L2_cache_size=50 * 2**20)
    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(get_device_properties=lambda i: props))
    monkeypatch.setitem(sys.modules, "pynvml", None)   # no NVML: the fields are marked, not invented
    spec = P.device_spec(fake)
    assert (spec["Device"], spec["Dev_Mem"], spec["Num_Sm"], spec["Core_Per_SM"], spec["L2Cache"]) == \
        ("NVIDIA Fake", 80, 132, 128, 50)
    assert spec["Freq"] is None and spec["SingleFLOPs"] is None
    assert "NEEDS DATASHEET" in spec["Sources"]["Freq"] and "NEEDS DATASHEET" in spec["Sources"]["SingleFLOPs"]
    # with NVML (an H100-like fake): max SM clock 1980 MHz, max memory clock 2619 MHz, 5120-bit bus
    clocks = {"SM": 1980, "MEM": 2619}
    nvml = types.SimpleNamespace(NVML_CLOCK_SM="SM", NVML_CLOCK_MEM="MEM", nvmlInit=lambda: None,
                                 nvmlDeviceGetHandleByIndex=lambda i: i,
                                 nvmlDeviceGetMaxClockInfo=lambda h, kind: clocks[kind],
                                 nvmlDeviceGetMemoryBusWidth=lambda h: 5120)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    spec = P.device_spec(fake)
    # Mem_Bw = 2619 MHz x 2 x 5120 bit / 8 / 1000 = 3352.32 GB/s; SingleFLOPs = 2 x 132 x 128 x 1.98 GHz = 66908.16
    assert (spec["Freq"], spec["Mem_Bw"], spec["SingleFLOPs"]) == (1980, 3352.3, 66908)
