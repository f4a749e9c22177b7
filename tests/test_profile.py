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
                 "GEMM_DIMS", "VEC_DIMS", "VEC_OPS", "ALL_OPS", "SCALAR", "KEEP_FRACTION", "l2_flusher",
                 "FLUSH_L2_FACTOR"):
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
    for bad in (["--repeat", "0"], ["--warmup", "-1"]):                   # refused before looking for a GPU
        assert P.main(["--ops", "bmm", "--dims", "test", "--output", str(tmp_path / "o.csv"), *bad]) == 2
        assert "--repeat must be >= 1 and --warmup >= 0" in capsys.readouterr().err
    assert P.gpu_folder("NVIDIA A100-SXM4-80GB/MIG 1g") == "NVIDIA_A100-SXM4-80GB_MIG_1g"   # no folder inside a folder
    monkeypatch.setattr(P, "require_cuda", lambda: torch)
    with pytest.raises(P.ProfileError, match="different dims"):
        P.collect(["bmm", "add"], "test", tmp_path / "o.csv")


def test_cores_per_sm_agree_with_the_dataset_spec_sheets():
    # compute capability of each GPU the dataset has a spec of: its Core_Per_SM is the table's. Not the P4 (sm_61:
    # 20 SMs of 128 cores), which the dataset describes as 40 SMs of 64 (the same 2,560 cores)
    from lib.devices import device_by_name
    capability = {"Tesla P100-PCIE-16GB": (6, 0), "Tesla V100-PCIE-32GB": (7, 0),
                  "Tesla T4": (7, 5), "NVIDIA A100-PCIE-40GB": (8, 0), "NVIDIA L4": (8, 9),
                  "NVIDIA H100 80GB HBM3": (9, 0)}
    for name, cc in capability.items():
        assert P.CORES_PER_SM[cc] == device_by_name(name).cores_per_sm, name


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


def _fake_cuda(free_bytes=40e9):
    """A stand-in for the torch module collect() uses on a GPU: names, memory, versions; nothing runs."""
    ns = types.SimpleNamespace
    props = ns(name="NVIDIA Fake", total_memory=80 * 2**30, multi_processor_count=132, major=9, minor=0,
               L2_cache_size=50 * 2**20)
    cuda = ns(get_device_name=lambda i: "NVIDIA Fake", get_device_properties=lambda i: props,
              mem_get_info=lambda: (free_bytes, 80e9), memory_reserved=lambda: 0, memory_allocated=lambda: 0,
              empty_cache=lambda: None, synchronize=lambda: None, OutOfMemoryError=torch.cuda.OutOfMemoryError)
    backends = ns(cuda=ns(matmul=ns(allow_tf32=True)), cudnn=ns(allow_tf32=True, version=lambda: 91002))
    return ns(cuda=cuda, backends=backends, version=ns(cuda="12.8"), __version__="2.13.0+cu128")


@pytest.fixture
def fake_gpu(monkeypatch, tmp_path):
    """collect() on CPU: ops built on CPU, a fixed latency per shape (B x 0.01 ms), kernel names from a stub."""
    fake = _fake_cuda()
    monkeypatch.setattr(P, "require_cuda", lambda: fake)
    monkeypatch.setattr(P, "build_op", lambda op, shape, device, seed, dtype="fp32":
                        profile_ops.build_op(op, shape, "cpu", seed, dtype))
    monkeypatch.setattr(P, "time_op", lambda fn, warmup, repeat, before=None: 0.01 * fn().shape[0])
    monkeypatch.setattr(P, "profile_kernels",
                        lambda calls, num_sm: [{"Kernel Name": "sm90_xmma_gemm_128x64", "Kernels": ";k"}] * len(calls))
    dims = tmp_path / "dims.csv"
    dims.write_text("".join(f"{b};8;8;8\n" for b in range(1, 8)))
    return fake, dims


def _rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_collect_writes_the_schema_and_sets_fp32(fake_gpu, tmp_path):
    fake, dims = fake_gpu
    assert P.run_folder(fake) == "NVIDIA_Fake_torch2.13.0_cuda12.8"
    out = P.collect(["bmm"], str(dims), tmp_path / "m" / "bmm.csv", chunk=3, device_json=tmp_path / "m" / "d.json")
    rows = _rows(out)
    assert [int(r["B"]) for r in rows] == list(range(1, 8))
    assert [float(r["Latency"]) for r in rows] == pytest.approx([0.01 * b for b in range(1, 8)])
    assert {r["Device"] for r in rows} == {"NVIDIA Fake"} and rows[0]["Torch Version"] == "p2.13.0"
    assert rows[0]["CUDA Version"] == "cu128" and rows[0]["Kernel Name"] == "sm90_xmma_gemm_128x64"
    assert fake.backends.cuda.matmul.allow_tf32 is False and fake.backends.cudnn.allow_tf32 is False
    assert (tmp_path / "m" / "d.json").is_file() and not list((tmp_path / "m").glob(".tmp-*"))


def test_collect_flushes_the_l2_only_when_asked(fake_gpu, tmp_path, monkeypatch):
    # the flush is sized from the GPU's L2 (the fake's 50 MiB) and handed to every time_op call; without
    # flush_l2, no buffer is made and time_op gets none
    fake, dims = fake_gpu
    made, seen = [], []

    def flush():
        pass
    monkeypatch.setattr(P, "l2_flusher", lambda torch, l2_bytes: made.append(l2_bytes) or flush)

    def time_op(fn, warmup, repeat, before=None):
        seen.append(before)
        return 1.0
    monkeypatch.setattr(P, "time_op", time_op)
    P.collect(["bmm"], str(dims), tmp_path / "flushed.csv", flush_l2=True)
    assert made == [50 * 2**20] and seen == [flush] * 7
    made.clear(), seen.clear()
    P.collect(["bmm"], str(dims), tmp_path / "plain.csv")
    assert made == [] and seen == [None] * 7


def test_collect_keeps_the_gpu_busy_only_when_asked(fake_gpu, tmp_path, monkeypatch):
    # gpu_busy hands time_op a spinner of GPU_BUSY_CYCLES (no buffer, no flush); with flush_l2 too, it refuses
    # before timing anything and writes nothing
    fake, dims = fake_gpu
    spun, seen = [], []
    monkeypatch.setattr(P, "gpu_spinner", lambda torch: spun.append(torch) or "spin")
    monkeypatch.setattr(P, "l2_flusher", lambda torch, l2_bytes: pytest.fail("flushed"))
    monkeypatch.setattr(P, "time_op", lambda fn, warmup, repeat, before=None: seen.append(before) or 1.0)
    P.collect(["bmm"], str(dims), tmp_path / "busy.csv", gpu_busy=True)
    assert spun == [fake] and seen == ["spin"] * 7
    with pytest.raises(P.ProfileError, match="--flush-l2 and --gpu-busy exclude each other"):
        P.collect(["bmm"], str(dims), tmp_path / "both.csv", flush_l2=True, gpu_busy=True)
    assert not (tmp_path / "both.csv").exists() and len(seen) == 7


def test_collect_skips_a_failing_shape_and_keeps_the_rest(fake_gpu, tmp_path, monkeypatch, capsys):
    fake, dims = fake_gpu
    import weakref
    failed = []

    def time_op(fn, warmup, repeat, before=None):
        b = fn().shape[0]
        if b == 3:
            failed.append(weakref.ref(fn))
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB\nmore")
        if b == 5:
            raise RuntimeError("CUBLAS_STATUS_EXECUTION_FAILED when calling cublasSgemmStridedBatched")
        return 1.0
    released = []

    def empty_cache():          # the failed shape's closure, and so its tensors, must be gone by now
        if failed and not released:
            released.append(failed[0]() is None)
    monkeypatch.setattr(fake.cuda, "empty_cache", empty_cache)
    monkeypatch.setattr(P, "time_op", time_op)
    out = P.collect(["bmm"], str(dims), tmp_path / "bmm.csv")
    assert [int(r["B"]) for r in _rows(out)] == [1, 2, 4, 6, 7]
    assert released == [True]
    err = capsys.readouterr().err
    assert "skip bmm (3, 8, 8, 8): OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB" in err
    assert "skip bmm (5, 8, 8, 8): RuntimeError: CUBLAS_STATUS_EXECUTION_FAILED" in err and "more" not in err


def test_collect_stops_when_an_error_broke_the_gpu(fake_gpu, tmp_path, monkeypatch, capsys):
    # an illegal address poisons the CUDA context: the next synchronize fails too, so the run stops there,
    # keeping the shapes timed before it
    fake, dims = fake_gpu
    broken = []

    def time_op(fn, warmup, repeat, before=None):
        if fn().shape[0] == 4:
            broken.append(True)
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return 1.0

    def synchronize():
        if broken:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
    monkeypatch.setattr(P, "time_op", time_op)
    monkeypatch.setattr(fake.cuda, "synchronize", synchronize)
    with pytest.raises(RuntimeError, match="illegal memory access"):
        P.collect(["bmm"], str(dims), tmp_path / "bmm.csv")
    assert [int(r["B"]) for r in _rows(tmp_path / "bmm.csv")] == [1, 2, 3]
    assert "3 rows kept after the error below" in capsys.readouterr().err


def test_collect_refuses_to_replace_a_measurement_unasked(fake_gpu, tmp_path, capsys):
    out = tmp_path / "bmm.csv"
    out.write_text("kept")
    with pytest.raises(P.ProfileError, match=r"bmm\.csv exists: delete it, or pass overwrite=True"):
        P.collect(["bmm"], str(fake_gpu[1]), out)
    assert out.read_text() == "kept"
    assert len(_rows(P.collect(["bmm"], str(fake_gpu[1]), out, overwrite=True))) == 7
    assert P.main(["--ops", "bmm", "--dims", str(fake_gpu[1]), "--output", str(out)]) == 2
    assert "exists" in capsys.readouterr().err
    # a folder is never replaced, asked or not: said as a folder, not as a measurement to delete
    for overwrite in (False, True):
        with pytest.raises(P.ProfileError, match=r"is a folder; give the path of a file to write"):
            P.collect(["bmm"], str(fake_gpu[1]), tmp_path, overwrite=overwrite)


def test_collect_warns_when_kernels_ran_in_tf32(fake_gpu, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(P, "profile_kernels", lambda calls, num_sm: [{"Kernel Name": "sm80_xmma_gemm_tf32f32"}] * len(calls))
    P.collect(["bmm"], str(fake_gpu[1]), tmp_path / "bmm.csv")
    assert "warning: 1 kernels ran in TF32, not fp32 as the dataset (e.g. sm80_xmma_gemm_tf32f32)" in capsys.readouterr().err


def test_collect_keeps_latencies_when_kernel_names_fail(fake_gpu, tmp_path, monkeypatch, capsys):
    def broken(calls, num_sm):
        raise RuntimeError("profiler failed")
    monkeypatch.setattr(P, "profile_kernels", broken)
    rows = _rows(P.collect(["bmm"], str(fake_gpu[1]), tmp_path / "bmm.csv"))
    assert len(rows) == 7 and {r["Kernel Name"] for r in rows} == {""}
    assert "kernel names of 7 shapes not recorded: RuntimeError: profiler failed" in capsys.readouterr().err


def test_collect_writes_after_each_batch_and_keeps_them_when_stopped(fake_gpu, tmp_path, monkeypatch):
    # Ctrl-C while timing the 6th shape: the two profiled batches (3 + 2 shapes) are on disk, with names
    out = tmp_path / "bmm.csv"
    seen_on_disk = []

    def time_op(fn, warmup, repeat, before=None):
        seen_on_disk.append(len(_rows(out)) if out.exists() else 0)
        if fn().shape[0] == 6:
            raise KeyboardInterrupt
        return 1.0
    monkeypatch.setattr(P, "time_op", time_op)
    monkeypatch.setattr(P, "footprint_bytes", lambda op, shape, dtype="fp32": 0)
    with pytest.raises(KeyboardInterrupt):
        P.collect(["bmm"], str(fake_gpu[1]), out, chunk=3)
    assert seen_on_disk == [0, 0, 0, 3, 3, 3]
    rows = _rows(out)
    assert [int(r["B"]) for r in rows] == [1, 2, 3, 4, 5]
    assert [r["Kernel Name"] for r in rows] == ["sm90_xmma_gemm_128x64"] * 3 + ["", ""]   # 4, 5: not profiled yet


def test_collect_skips_shapes_larger_than_usable_memory(fake_gpu, tmp_path, monkeypatch, capsys):
    fake, dims = fake_gpu
    # usable = free + reserved - allocated = 1000 + 500 - 100 bytes; a B x 8 x 8 bmm needs 4 x 192 x B bytes
    monkeypatch.setattr(fake.cuda, "mem_get_info", lambda: (1000, 80e9))
    monkeypatch.setattr(fake.cuda, "memory_reserved", lambda: 500)
    monkeypatch.setattr(fake.cuda, "memory_allocated", lambda: 100)
    rows = _rows(P.collect(["bmm"], str(dims), tmp_path / "bmm.csv"))
    assert [int(r["B"]) for r in rows] == [1]          # 768 <= 0.8 x 1400 = 1120 < 1536
    assert "skip bmm (2, 8, 8, 8): needs 0.0 GB, 0.0 GB usable" in capsys.readouterr().err


def test_warm_up_keeps_the_gpu_busy_for_its_seconds():
    # fp32 GEMMs in rounds of 8, each round synchronized, until the (fake) clock has passed `seconds`
    import torch
    now, synced = [0.0], []

    def clock():
        now[0] += 0.4
        return now[0]
    fake = types.SimpleNamespace(randn=lambda *shape, device: torch.ones(4, 4),
                                 cuda=types.SimpleNamespace(synchronize=lambda: synced.append(now[0])))
    assert P.warm_up_clocks(fake, seconds=1.0, clock=clock) == 16    # end at 1.4: rounds at 0.8 and 1.2
    assert len(synced) == 2


def test_collect_warms_up_before_timing(fake_gpu, tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(P, "warm_up_clocks", lambda torch, seconds: calls.append(seconds))
    P.collect(["bmm"], str(fake_gpu[1]), tmp_path / "w.csv", warmup=1, repeat=1, warm_up_s=1.0)
    assert calls == [1.0]
    P.collect(["bmm"], str(fake_gpu[1]), tmp_path / "none.csv", warmup=1, repeat=1)   # default: none
    assert calls == [1.0]


def test_the_command_passes_flush_l2_and_dtype_to_collect(monkeypatch, tmp_path):
    seen = []
    monkeypatch.setattr(P, "collect", lambda *a, **kw: seen.append((kw["flush_l2"], kw["dtype"], kw["gpu_busy"])))
    for extra in ([], ["--flush-l2"], ["--dtype", "fp16"], ["--gpu-busy"]):
        assert P.main(["--ops", "bmm", "--dims", "test", "--output", str(tmp_path / "o.csv"), *extra]) == 0
    assert seen == [(False, "fp32", False), (True, "fp32", False), (False, "fp16", False), (False, "fp32", True)]


def test_kernels_timed_unlike_the_dataset_get_their_own_folder():
    assert P.kernel_folder() == "" and P.kernel_folder(flush_l2=True) == P.FLUSH_L2_FOLDER == "flush-l2"
    assert P.kernel_folder(dtype="fp16") == "fp16" and P.kernel_folder(True, "fp16") == "fp16-flush-l2"
    assert P.kernel_folder(gpu_busy=True) == P.GPU_BUSY_FOLDER == "gpu-busy"
    assert P.kernel_folder(dtype="fp16", gpu_busy=True) == "fp16-gpu-busy"


def test_collect_times_fp16_gemms_and_refuses_other_ops_before_anything(fake_gpu, tmp_path, monkeypatch):
    fake, dims = fake_gpu
    built = []
    monkeypatch.setattr(P, "build_op", lambda op, shape, device, seed, dtype="fp32":
                        built.append(dtype) or profile_ops.build_op(op, shape, "cpu", seed, dtype))
    rows = _rows(P.collect(["bmm"], str(dims), tmp_path / "bmm.csv", dtype="fp16"))
    assert len(rows) == 7 and built == ["fp16"] * 7
    vec = tmp_path / "vec.csv"
    vec.write_text("4;8\n")
    with pytest.raises(P.ProfileError, match="softmax: fp16 is timed for GEMMs only"):
        P.collect(["softmax"], str(vec), tmp_path / "softmax.csv", dtype="fp16")
    assert not (tmp_path / "softmax.csv").exists()
