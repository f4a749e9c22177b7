"""The end-to-end collector (lib.profile_model) on CPU: the passes it times and the label JSON it writes."""
import json

import pytest
import torch

from lib import labels
from lib import profile_model as PM
from test_graph import TINY_GPT2, _write


@pytest.mark.parametrize("mode", ["inference", "training"])
def test_measure_writes_a_label_the_dataset_loader_parses(tmp_path, mode):
    cfg = _write(tmp_path, TINY_GPT2, "tiny_gpt2")
    out = PM.measure(cfg, 2, 8, mode, out_dir=tmp_path / "labels", warmup=1, repeat=2, device="cpu")
    software = f"torch{torch.__version__.split('+')[0]}_cuda{torch.version.cuda}"
    path = tmp_path / "labels" / software / "cpu" / f"tiny_gpt2-{'inf' if mode == 'inference' else 'train'}-8-2.json"
    assert out["path"] == str(path)
    label = json.loads(path.read_text())
    assert labels.LABEL_FILE.match(path.stem)
    assert labels._read_json(path) == label and label["num_layer"] == TINY_GPT2["n_layer"]
    assert label["fw_latency"] > 0 and label["e2e_latency"] == label["fw_latency"] + label["bwall_latency"]
    assert (label["bwall_latency"] > 0) == (mode == "training")
    assert label["torch_version"] == torch.__version__
    with pytest.raises(PM.ProfileError, match="exists: delete it"):      # a rerun replaces it only when asked
        PM.measure(cfg, 2, 8, mode, out_dir=tmp_path / "labels", warmup=1, repeat=2, device="cpu")
    PM.measure(cfg, 2, 8, mode, out_dir=tmp_path / "labels", warmup=1, repeat=1, device="cpu", overwrite=True)


def test_time_passes_runs_warmup_then_keeps_the_fastest_half(monkeypatch):
    # a fake model whose forward takes 5, 4, 3, 2, 1 ms of a fake clock: warm-up 1 drops the 5, the fastest half of
    # (4, 3, 2, 1) is (1, 2): 1.5 ms; backward from the logits runs once per pass and takes 7 ms
    clock, costs, backward = [0.0], iter([5, 4, 3, 2, 1]), []

    def fake_backward(ts, gs, create_graph=False):
        backward.append(len(ts))
        clock[0] += 7 / 1e3

    class Model(torch.nn.Module):
        def forward(self, input_ids, return_dict=True):
            clock[0] += next(costs) / 1e3
            return {"logits": torch.ones(2, requires_grad=True) * 2}
    monkeypatch.setattr("time.perf_counter", lambda: clock[0])
    monkeypatch.setattr(torch.autograd, "backward", fake_backward)
    fw_ms, bw_ms = PM.time_passes(torch, Model(), {"input_ids": None}, "training", 1, 4, "cpu")
    assert fw_ms == pytest.approx(1.5) and bw_ms == pytest.approx(7.0) and backward == [1] * 5


def test_grad_mode_backward_writes_its_own_software_folder(tmp_path):
    # the backward as the dataset's labels ran it (create_graph=True): its label goes under <software>-grad-mode and
    # says so, beside the plain one of the same setting
    cfg = _write(tmp_path, TINY_GPT2, "tiny_gpt2")
    plain = PM.measure(cfg, 2, 8, "training", out_dir=tmp_path / "labels", warmup=0, repeat=1, device="cpu")
    grad = PM.measure(cfg, 2, 8, "training", out_dir=tmp_path / "labels", warmup=0, repeat=1, device="cpu",
                      grad_mode=True)
    software = f"torch{torch.__version__.split('+')[0]}_cuda{torch.version.cuda}"
    assert grad["path"] == str(tmp_path / "labels" / (software + PM.GRAD_MODE_SUFFIX) / "cpu" / "tiny_gpt2-train-8-2.json")
    assert (plain["backward"], grad["backward"]) == ("plain", "grad mode") and grad["bwall_latency"] > 0
    with pytest.raises(PM.ProfileError, match="only a training pass runs"):     # inference has no backward
        PM.measure(cfg, 2, 8, "inference", out_dir=tmp_path / "labels", device="cpu", grad_mode=True)
    assert "backward" not in PM.measure(cfg, 2, 8, "inference", warmup=0, repeat=1, device="cpu")


def test_bad_arguments_are_one_line(tmp_path, capsys):
    cfg = _write(tmp_path, TINY_GPT2, "tiny_gpt2")
    assert PM.main(["--model", str(cfg), "--batch", "1", "--seq", "100000", "--mode", "inference"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "n_positions" in err
    with pytest.raises(SystemExit):
        PM.main(["--model", str(cfg), "--batch", "1", "--seq", "8", "--mode", "serving"])
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    with pytest.raises(PM.ProfileError, match="device must be"):
        PM.measure(cfg, 1, 8, "inference", device="tpu")
    for bad in (["--repeat", "0"], ["--warmup", "-1"]):
        assert PM.main(["--model", str(cfg), "--batch", "1", "--seq", "8", "--mode", "inference", *bad]) == 2
        assert "--repeat must be >= 1 and --warmup >= 0" in capsys.readouterr().err


def test_measure_runs_an_encoder_decoder_and_counts_both_stacks(tmp_path):
    # SwitchTransformer needs decoder inputs too; its label counts the layers of both stacks (6 + 6)
    from test_graph import TINY_SWITCH
    cfg = _write(tmp_path, TINY_SWITCH, "tiny_switch")
    out = PM.measure(cfg, 1, 8, "inference", out_dir=tmp_path / "labels", warmup=0, repeat=1, device="cpu")
    assert json.loads(open(out["path"]).read())["num_layer"] == 12


def test_kernels_out_needs_a_gpu_and_writes_nothing_without_one(tmp_path):
    cfg = _write(tmp_path, TINY_GPT2, "tiny_gpt2")
    with pytest.raises(PM.ProfileError, match="--kernels-out .* needs device 'cuda'"):
        PM.measure(cfg, 2, 8, "training", out_dir=tmp_path / "labels", device="cpu", kernels_out=tmp_path / "k.csv")
    assert not (tmp_path / "labels").exists() and not (tmp_path / "k.csv").exists()


def test_kernels_out_without_a_path_goes_where_notebook_05_reads_profiles(tmp_path, monkeypatch):
    from lib import model_kernels
    path = PM.profile_path("torch2.11.0_cuda13.0", "NVIDIA H200", "switchxl4", 1, 512, "inference", root=tmp_path)
    assert path == tmp_path / "torch2.11.0_cuda13.0" / "NVIDIA_H200" / "switchxl4-inf-512-1.csv"
    assert PM.profile_path("s", "g", "m", 1, 8, "training").parent.parent.parent == model_kernels.PROFILES
    # a file there reads back as that setting (lib.model_kernels.load_profiles)
    path.parent.mkdir(parents=True)
    path.write_text(",".join(model_kernels.OP_KERNEL_COLUMNS) + "\nfw,aten::mm,[],sgemm,1,5.0,5.0\n")
    got = model_kernels.load_profiles(tmp_path).iloc[0]
    assert (got.gpu, got.model, got["mode"], got.seq, got.batch) == ("NVIDIA_H200", "switchxl4", "inference", 512, 1)
    seen = {}
    monkeypatch.setattr(PM, "measure", lambda *a, **k: seen.update(k) or {})
    cfg = _write(tmp_path, TINY_GPT2, "tiny_gpt2")
    args = ["--model", str(cfg), "--batch", "1", "--seq", "8", "--mode", "inference"]
    assert PM.main(args + ["--kernels-out"]) == 0 and seen["kernels_out"] == PM.DEFAULT_PROFILE
    assert PM.main(args + ["--kernels-out", "k.csv"]) == 0 and seen["kernels_out"] == "k.csv"
    assert PM.main(args) == 0 and seen["kernels_out"] is None


def test_profiled_pass_names_its_phases_as_kernels_by_op_reads_them(tmp_path):
    # A real (CPU) profile of one annotated training pass: kernels_by_op finds its fw / bw ranges and aten ops. A CPU
    # runs no kernel, so one is planted, launched from inside the backward's first aten::mm.
    from lib.graph_capture import build_model
    from lib.model_config import load_config
    from lib.profile_ops import kernels_by_op
    cfg = load_config(_write(tmp_path, TINY_GPT2, "tiny_gpt2"))
    model = build_model(cfg, "training", cfg.num_layers, 2, device="cpu")
    inputs = {"input_ids": torch.zeros(2, 8, dtype=torch.long)}
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        PM.time_passes(torch, model, inputs, "training", 0, 1, "cpu", annotate=True)
    prof.export_chrome_trace(str(tmp_path / "trace.json"))
    events = json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
    phase = {e["name"]: e for e in events if e.get("cat") == "user_annotation" and e["name"] in ("fw", "bw")}
    assert set(phase) == {"fw", "bw"}
    bw = phase["bw"]
    mm = min((e for e in events if e.get("cat") == "cpu_op" and e["name"] == "aten::mm"
              and bw["ts"] <= e["ts"] <= bw["ts"] + bw["dur"]), key=lambda e: e["ts"])
    events += [{"cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": mm["ts"] + mm["dur"] / 2, "tid": mm["tid"],
                "args": {"correlation": -1}},
               {"cat": "kernel", "name": "planted_sgemm", "ts": 0, "dur": 3.0, "args": {"correlation": -1}}]
    t = kernels_by_op({"traceEvents": events})
    assert t[["phase", "op", "input_dims", "kernel", "count"]].values.tolist() == [
        ["bw", "aten::mm", str(mm["args"]["Input Dims"]), "planted_sgemm", 1]]


def test_label_settings_lists_each_plain_label_setting_once():
    every = PM.label_settings()
    plain = labels.load_labels().query("option == ''")
    assert len(every) == len(set(every)) == len(plain[["model", "mode", "batch", "seq"]].drop_duplicates())
    assert every == sorted(every) and PM.label_settings(2) == every[:2]
    assert ("bert_large", "inference", 8, 512) in every and ("gpt3_27", "training", 1, 2048) in every
