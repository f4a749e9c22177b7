"""The collector's ops, dims files, timing reduction and trace parsing (lib.profile_ops), on CPU."""
import types

import pytest
import torch

from lib import profile_ops as P


def test_read_dims_gemm_and_vec(tmp_path):
    f = tmp_path / "d.csv"
    f.write_text("8;2;18;16\n\n15;9;7;6\n")
    assert P.read_dims(f, P.GEMM_DIMS) == [(8, 2, 18, 16), (15, 9, 7, 6)]
    g = tmp_path / "v.csv"
    g.write_text("B;H\n127,168\n")  # header and commas accepted
    assert P.read_dims(g, P.VEC_DIMS) == [(127, 168)]


@pytest.mark.parametrize("text, needle", [("1;2;3\n", "expected 4 fields"), ("1;2;x;4\n", "not integers"),
                                          ("1;0;3;4\n", "positive"), ("\n", "no shapes")])
def test_read_dims_errors_name_file_and_line(tmp_path, text, needle):
    f = tmp_path / "bad.csv"
    f.write_text(text)
    with pytest.raises(P.ProfileError, match=needle) as e:
        P.read_dims(f, P.GEMM_DIMS)
    assert "bad.csv" in str(e.value)


def test_missing_dims_file(tmp_path):
    with pytest.raises(P.ProfileError, match="not found"):
        P.read_dims(tmp_path / "nope.csv", P.VEC_DIMS)


def test_dataset_dims_files_parse():
    # the dataset's own lists: GEMM lists have 4 fields, vec/ln lists 2
    for op in ("bmm", "linear", "add", "ln"):
        for split in ("train", "test"):
            path = P.dataset_dims_file(op, split)
            assert path.is_file(), path
            shapes = P.read_dims(path, P.dims_of(op))
            assert len(shapes) > 100


def test_dims_of():
    assert P.dims_of("bmm") == ("B", "M", "N", "K")
    assert P.dims_of("softmax") == ("B", "H")
    with pytest.raises(P.ProfileError, match="unknown op 'conv2d'"):
        P.dims_of("conv2d")


def test_ops_have_dataset_semantics():
    # bmm [B,M,N] @ [B,N,K] -> [B,M,K]; N is reduced
    assert P.build_op("bmm", (2, 3, 4, 5))().shape == (2, 3, 5)
    # linear: [B,M,N] through Linear(N,K) with bias -> [B,M,K]
    assert P.build_op("linear", (1, 3, 4, 5))().shape == (1, 3, 5)
    for op in P.VEC_OPS:
        assert P.build_op(op, (3, 7))().shape == (3, 7), op
    # softmax over the last dim: rows sum to 1; ln: rows have mean 0
    assert torch.allclose(P.build_op("softmax", (4, 9))().sum(-1), torch.ones(4))
    assert torch.allclose(P.build_op("ln", (4, 9))().mean(-1), torch.zeros(4), atol=1e-5)
    # the 'u' forms use the scalar: (x + s) - x == s
    addu, relu = P.build_op("addu", (2, 5), seed=1)(), P.build_op("relu", (2, 5), seed=1)()
    assert torch.allclose(addu - relu, torch.full((2, 5), P.SCALAR))  # x in [0,1): relu(x) == x


def test_footprint_bytes():
    assert P.footprint_bytes("bmm", (2, 3, 4, 5)) == 4 * (2 * 3 * 4 + 2 * 4 * 5 + 2 * 3 * 5)
    assert P.footprint_bytes("linear", (1, 3, 4, 5)) == 4 * (12 + 20 + 5 + 15)
    assert P.footprint_bytes("add", (10, 10)) == 4 * 300
    assert P.footprint_bytes("relu", (10, 10)) == 4 * 200
    for op in ("mul", "div", "pow"):   # every binary op reads two tensors and writes one
        assert P.footprint_bytes(op, (10, 10)) == 4 * 300, op
    assert P.footprint_bytes("bmm", (2, 3, 4, 5), "fp16") == 2 * (2 * 3 * 4 + 2 * 4 * 5 + 2 * 3 * 5)   # 2 bytes each


def test_fp16_gemms_are_the_fp32_ones_rounded_and_other_ops_refused():
    for op, shape in (("bmm", (2, 3, 4, 5)), ("linear", (2, 3, 4, 5))):
        torch.manual_seed(0)                       # linear's weights: the same layer in both precisions
        half = P.build_op(op, shape, seed=3, dtype="fp16")()
        torch.manual_seed(0)
        full = P.build_op(op, shape, seed=3)()
        assert half.dtype == torch.float16 and full.dtype == torch.float32 and half.shape == full.shape == (2, 3, 5)
        assert torch.allclose(half.float(), full, rtol=1e-2, atol=1e-2)
    with pytest.raises(P.ProfileError, match="softmax: fp16 is timed for GEMMs only \\(bmm, linear\\), on tensor cores"):
        P.build_op("softmax", (2, 8), dtype="fp16")
    with pytest.raises(P.ProfileError, match="unknown dtype 'bf16'; known: fp32, fp16"):
        P.check_dtype("bmm", "bf16")


def test_fastest_mean():
    assert P.fastest_mean([5.0, 1.0, 3.0, 2.0]) == pytest.approx(1.5)   # fastest 2 of 4
    assert P.fastest_mean([4.0, 1.0, 3.0]) == pytest.approx(2.0)        # ceil(1.5) = 2
    assert P.fastest_mean([7.0]) == 7.0
    assert P.fastest_mean([float(t) for t in range(10, 0, -1)]) == pytest.approx(3.0)   # fastest half of 10: 1..5


def _trace():
    ev = [{"cat": "user_annotation", "name": "lib.profile:0", "ts": 0, "dur": 10},
          {"cat": "user_annotation", "name": "lib.profile:1", "ts": 20, "dur": 10},
          {"cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 2, "args": {"correlation": 1}},
          {"cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 5, "args": {"correlation": 2}},
          {"cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 22, "args": {"correlation": 3}},
          {"cat": "kernel", "name": "fill", "ts": 100, "dur": 1,
           "args": {"correlation": 1, "grid": [1, 1, 1], "block": [128, 1, 1]}},
          {"cat": "kernel", "name": "ampere_sgemm_128x64_tn", "ts": 102, "dur": 9,
           "args": {"correlation": 2, "grid": [4, 2, 1], "block": [128, 1, 1]}},
          {"cat": "kernel", "name": "relu_kernel", "ts": 130, "dur": 3,
           "args": {"correlation": 3, "grid": [10, 1, 1], "block": [64, 2, 1],
                    "warps per SM": 0.5, "blocks per SM": 0.25}}]
    return {"traceEvents": ev}


def test_kernels_by_label_and_columns():
    found = P.kernels_by_label(_trace())
    assert [k["name"] for k in found["lib.profile:0"]] == ["fill", "ampere_sgemm_128x64_tn"]
    assert [k["name"] for k in found["lib.profile:1"]] == ["relu_kernel"]
    cols = P.kernel_columns(found["lib.profile:0"], num_sm=4)
    assert cols["Kernel Name"] == "ampere_sgemm_128x64_tn"   # the longest kernel
    assert cols["Kernels"] == ";fill;ampere_sgemm_128x64_tn"
    assert (cols["Grid x"], cols["Grid y"], cols["Block x"]) == (4, 2, 128)
    assert cols["Blocks per SM"] == pytest.approx(8 / 4)
    assert cols["Warps per SM"] == pytest.approx(8 * 4 / 4)   # 128 threads = 4 warps per block
    cols = P.kernel_columns(found["lib.profile:1"], num_sm=4)
    assert cols["Warps per SM"] == 0.5                        # the profiler's own value wins
    assert P.kernel_columns([], 4)["Kernel Name"] == ""
    # the longest kernel wherever it lies; a block of 48 threads is two warps (a partial warp is a warp)
    long = {"name": "long", "dur": 9, "args": {"grid": [2, 1, 1], "block": [48, 1, 1]}}
    cols = P.kernel_columns([long, {"name": "short", "dur": 1, "args": {}}], num_sm=1)
    assert cols["Kernel Name"] == "long" and cols["Warps per SM"] == 4


def test_kernels_by_op_finds_the_innermost_launching_op_and_phase():
    op = lambda name, ts, dur, tid=1, dims=None: {"cat": "cpu_op", "name": name, "ts": ts, "dur": dur, "tid": tid,
                                                  "args": {"Input Dims": dims} if dims else {}}
    launch = lambda ts, c, tid=1, name="cudaLaunchKernel": {"cat": "cuda_runtime", "name": name, "ts": ts, "tid": tid,
                                                            "args": {"correlation": c}}
    kernel = lambda name, c, dur, cat="kernel": {"cat": cat, "name": name, "ts": 1000 + c, "dur": dur,
                                                 "args": {"correlation": c}}
    ev = [{"cat": "user_annotation", "name": "fw", "ts": 0, "dur": 50, "tid": 1},
          {"cat": "user_annotation", "name": "bw", "ts": 60, "dur": 40, "tid": 1},
          {"cat": "user_annotation", "name": "lib.profile:0", "ts": 0, "dur": 200, "tid": 1},   # not a phase
          op("aten::linear", 1, 19), op("aten::addmm", 2, 13, dims=[[4], [8, 3], [3, 4]]), launch(3, 1),
          op("aten::relu", 21, 9, dims=[[8, 4]]), launch(22, 2), op("aten::relu", 31, 9, dims=[[8, 4]]), launch(32, 3),
          op("aten::mm", 61, 9, tid=2, dims=[[4, 8], [8, 3]]), launch(62, 4, tid=2),     # autograd's thread
          op("aten::sum", 61, 30), launch(80, 5, name="cudaMemcpyAsync"),    # holds launch 4 too, on another thread
          op("aten::fill_", 110, 5), launch(111, 6),                                     # after both phases
          kernel("sgemm", 1, 9.0), kernel("relu_kernel", 2, 2.0), kernel("relu_kernel", 3, 4.0),
          kernel("sgemm_nn", 4, 5.0), kernel("Memcpy DtoD", 5, 1.5, cat="gpu_memcpy"), kernel("fill", 6, 1.0),
          kernel("no launch", 99, 7.0)]
    t = P.kernels_by_op({"traceEvents": ev})
    assert list(t.columns) == P.OP_KERNEL_COLUMNS   # imported from lib.model_kernels
    rows = {(r.phase, r.op, r.kernel): (r.input_dims, r.count, r.total_us, r.mean_us) for r in t.itertuples()}
    assert rows == {("fw", "aten::addmm", "sgemm"): ("[[4], [8, 3], [3, 4]]", 1, 9.0, 9.0),   # not aten::linear
                    ("fw", "aten::relu", "relu_kernel"): ("[[8, 4]]", 2, 6.0, 3.0),         # two calls, one row
                    ("bw", "aten::mm", "sgemm_nn"): ("[[4, 8], [8, 3]]", 1, 5.0, 5.0),
                    ("bw", "aten::sum", "Memcpy DtoD"): ("", 1, 1.5, 1.5),
                    ("", "aten::fill_", "fill"): ("", 1, 1.0, 1.0),
                    ("", "", "no launch"): ("", 1, 7.0, 7.0)}
    assert P.kernels_by_op({"traceEvents": []}).empty


@pytest.mark.parametrize("later_ms, calls, latency_ms", [(1.0, 1 + 1 + 10 + 30, 1.0), (60.0, 1 + 1 + 2 + 6, 60.0),
                                                         (50.0, 1 + 1 + 10 + 30, 50.0)])   # at SLOW_MS: not slower
def test_time_op_decides_on_the_second_call(monkeypatch, later_ms, calls, latency_ms):
    # a fake GPU clock: the first call costs 500 ms (kernel loading, cuBLAS set-up), the later ones later_ms;
    # only a slow *second* call cuts the run to 2 warm-up and 6 timed calls (SLOW_MS = 50)
    clock, durations = [0.0], iter([500.0] + [later_ms] * 100)

    class Event:
        def __init__(self, enable_timing=False):
            self.t = None

        def record(self):
            self.t = clock[0]

        def elapsed_time(self, end):
            return end.t - self.t

    def fn():
        clock[0] += next(durations)
        n[0] += 1
    n = [0]
    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    assert P.time_op(fn, warmup=10, repeat=30) == latency_ms
    assert n[0] == calls


def test_a_flush_runs_before_each_timed_call_outside_its_events(monkeypatch):
    # a fake GPU clock: every call costs 2 ms, a flush 100 ms; the flush runs once ahead of each of the 30 timed
    # calls (not the warm-up ones), before the start event, so the latency is the call's 2 ms alone
    clock, log = [0.0], []

    class Event:
        def __init__(self, enable_timing=False):
            self.t = None

        def record(self):
            self.t = clock[0]
            log.append("event")

    Event.elapsed_time = lambda self, end: end.t - self.t

    def fn():
        clock[0] += 2.0
        log.append("call")

    def flush():
        clock[0] += 100.0
        log.append("flush")
    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    assert P.time_op(fn, warmup=10, repeat=30, before=flush) == 2.0
    assert log.count("flush") == 30 and log.count("call") == 1 + 1 + 10 + 30
    timed = log[log.index("flush"):]
    assert timed == ["flush", "event", "call", "event"] * 30


def test_gpu_spinner_sleeps_the_gpu_for_its_cycles():
    slept = []
    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(_sleep=slept.append))
    P.gpu_spinner(fake)()
    P.gpu_spinner(fake, cycles=7)()
    assert slept == [P.GPU_BUSY_CYCLES, 7] and P.GPU_BUSY_CYCLES == 200_000


def test_l2_flusher_overwrites_twice_the_l2():
    flush = P.l2_flusher(torch, 48, device="cpu")
    buf = flush.__self__                       # the buffer the flush writes
    buf.fill_(7)
    assert buf.numel() == P.FLUSH_L2_FACTOR * 48 == 96 and buf.dtype == torch.uint8
    flush()
    assert int(buf.sum()) == 0
    with pytest.raises(P.ProfileError, match="L2 cache size 0 bytes: cannot size an L2 flush"):
        P.l2_flusher(torch, 0, device="cpu")


def test_read_dims_skips_comment_lines(tmp_path):
    # '#' lines are notes, not shapes
    f = tmp_path / "d.csv"
    f.write_text("B;H\n# shapes of a test\n4;8\n  # more\n2;3\n")
    assert P.read_dims(f, P.VEC_DIMS) == [(4, 8), (2, 3)]


def test_op_values_by_hand():
    # the scalar ops apply SCALAR as documented (x / 1.5, x ** 1.5), to the same x as relu (x in [0, 1): relu(x) == x)
    x = P.build_op("relu", (3, 6), seed=2)()
    assert torch.allclose(P.build_op("divu", (3, 6), seed=2)(), x / P.SCALAR)
    assert torch.allclose(P.build_op("mulu", (3, 6), seed=2)(), x * P.SCALAR)
    assert torch.allclose(P.build_op("powu", (3, 6), seed=2)(), torch.pow(x, P.SCALAR))
    # the second operand of the binary ops lies in [0.5, 1.5): x / y stays below 2 (no division by ~0)
    assert (P.build_op("div", (64, 64))() < 2).all()
    # linear is Linear(N, K) with bias: the same layer (same global seed) on the same input by hand
    torch.manual_seed(0)
    out = P.build_op("linear", (2, 3, 4, 5), seed=7)()
    torch.manual_seed(0)
    ref = torch.nn.Linear(4, 5, bias=True)
    x = torch.rand(2, 3, 4, generator=torch.Generator().manual_seed(7))
    assert torch.allclose(out, ref(x))


def test_kernels_by_label_orders_by_time_and_sees_driver_launches():
    # kernel events come in any order (launch order is their start time); a driver-API launch (cuLaunchKernel)
    # counts like a runtime one; a launch at the range's very start belongs to it
    ev = [{"cat": "user_annotation", "name": "lib.profile:0", "ts": 0, "dur": 10},
          {"cat": "cuda_driver", "name": "cuLaunchKernel", "ts": 0, "args": {"correlation": 7}},
          {"cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 4, "args": {"correlation": 8}},
          {"cat": "kernel", "name": "second", "ts": 200, "dur": 1, "args": {"correlation": 8}},
          {"cat": "kernel", "name": "first", "ts": 100, "dur": 1, "args": {"correlation": 7}}]
    found = P.kernels_by_label({"traceEvents": ev})
    assert [k["name"] for k in found["lib.profile:0"]] == ["first", "second"]
    assert P.kernel_columns(found["lib.profile:0"], 1)["Kernels"] == ";first;second"


@pytest.mark.filterwarnings("ignore:CUDA is not available")
def test_profile_kernels_gives_each_call_its_own_label(monkeypatch):
    # call i runs inside record_function(LABEL + i) and gets the kernels found under that label (on CPU: the
    # profiler's annotations stand in for kernels, named after their label)
    real = P.kernels_by_label
    monkeypatch.setattr(P, "kernels_by_label", lambda trace: {n: [{"name": n, "dur": 1}] for n in real(trace)})
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    calls = [lambda: torch.ones(3) + 1, lambda: torch.ones(4) * 2, lambda: torch.zeros(2)]
    cols = P.profile_kernels(calls, num_sm=1)
    assert [c["Kernel Name"] for c in cols] == [f"{P.LABEL}{i}" for i in range(3)]


def test_backward_ops_match_autograd():
    # softmax_bw and ln_bw run what autograd runs for softmax / LayerNorm: same values as torch.autograd.grad
    B, H = 4, 9
    g = torch.Generator().manual_seed(0)
    x, dy = torch.rand(B, H, generator=g), torch.rand(B, H, generator=g)
    xg = x.clone().requires_grad_()
    (want,) = torch.autograd.grad(torch.softmax(xg, -1), xg, dy)
    assert torch.allclose(P.build_op("softmax_bw", (B, H))(), want, atol=1e-6)
    norm = torch.nn.LayerNorm(H)
    xg = x.clone().requires_grad_()
    dx, dgamma, dbeta = torch.autograd.grad(norm(xg), (xg, norm.weight, norm.bias), dy)
    got = P.build_op("ln_bw", (B, H))()
    for a, b in zip(got, (dx, dgamma, dbeta)):
        assert torch.allclose(a, b, atol=1e-5)


def test_backward_ops_take_a_dims_file_only():
    assert P.dims_of("softmax_bw") == P.VEC_DIMS
    assert P.footprint_bytes("softmax_bw", (10, 10)) == P.footprint_bytes("ln_bw", (10, 10)) == 4 * 300
    with pytest.raises(P.ProfileError, match="B;H file"):
        P.dataset_dims_file("ln_bw", "test")


def test_dropout_ops_match_autograd():
    # dropout_bw runs what autograd runs for dropout: dx = dy * mask / (1 - p), the mask of a dropout of x
    B, H = 6, 10
    out, mask = P.build_op("dropout", (B, H))()
    assert out.shape == mask.shape == (B, H) and mask.dtype == torch.bool
    g = torch.Generator().manual_seed(0)
    x, dy = torch.rand(B, H, generator=g), torch.rand(B, H, generator=g)
    got = P.build_op("dropout_bw", (B, H))()
    assert ((got == 0) | torch.isclose(got, dy / (1 - P.DROPOUT_P))).all()   # dropped, or scaled
    assert P.footprint_bytes("dropout", (10, 10)) == P.footprint_bytes("dropout_bw", (10, 10)) == 4 * 300
