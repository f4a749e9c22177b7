"""Notebook 01's GPU run in one call (lib.profile_all), on CPU: its budget, its order, its failures, its archive."""
import json
import os
import signal
import tarfile
import types
from pathlib import Path

import pytest
import torch
import yaml

from lib import paths
from lib import profile as P
from lib import profile_all as PA
from lib import profile_model as PM


def test_op_seconds_shares_what_is_left_evenly_and_keeps_the_cap():
    assert PA.op_seconds(None, 3, 500) == 500 and PA.op_seconds(None, 3, None) is None
    assert PA.op_seconds(90, 3, 500) == 30 and PA.op_seconds(90, 3, None) == 30   # 90 s left over 3 ops
    assert PA.op_seconds(90, 3, 10) == 10                                        # the per-op cap still holds
    assert PA.op_seconds(-5, 2, 500) == 0                                        # spent: nothing, not no limit


def test_gemms_last_keeps_each_groups_order():
    assert PA.gemms_last(["bmm", "add", "linear", "softmax", "ln"]) == ["add", "softmax", "ln", "bmm", "linear"]
    assert PA.gemms_last(["gelu", "relu"]) == ["gelu", "relu"]


def test_round_robin_takes_one_setting_per_model_in_turn():
    settings = [("a", "inference", 1, 8), ("a", "training", 1, 8), ("b", "inference", 1, 8),
                ("c", "inference", 1, 8), ("c", "inference", 2, 8)]
    assert PA.round_robin(settings) == [settings[0], settings[2], settings[3], settings[1], settings[4]]
    assert PA.round_robin([]) == []


@pytest.mark.parametrize("kind", ["full", "smoke"])
def test_notebook_01s_parameter_files_load(kind):
    params = PA.load_params(paths.ROOT / "params" / kind / "01-profile-kernels.yaml")
    assert set(params) == set(PA.PARAMS) and params["profile_dims"] == "test"
    assert params["profile_ops"] and all(op in P.ALL_OPS for op in params["profile_ops"])


def test_the_parameters_cell_gives_what_the_yaml_does_not(monkeypatch):
    defaults = PA.notebook_defaults()
    assert set(PA.PARAMS) <= set(defaults) and defaults["profile_out_dir"] == "build/measured"
    smoke = PA.load_params(paths.ROOT / "params" / "smoke" / "01-profile-kernels.yaml")
    assert smoke["profile_ops"] == defaults["profile_ops"] and smoke["profile_out_dir"] == "build/measured-smoke"


def test_bad_parameter_files_name_the_file(monkeypatch, tmp_path):
    with pytest.raises(PA.ProfileError, match="nope.yaml: parameter file not found"):
        PA.load_params(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    for text, message in [("profile_ops: [bmm\n", "not valid YAML"), ("- bmm\n", "expected 'name: value' lines"),
                          ("profile_ops: [bmm, conv]\n", "unknown op 'conv'"),
                          ("profile_ops: bmm\n", "profile_ops must be a non-empty list")]:
        bad.write_text(text)
        with pytest.raises(PA.ProfileError, match=f"bad.yaml: {message}"):
            PA.load_params(bad)
    nb = tmp_path / "nb.ipynb"          # a parameters cell with two of the parameters: the YAML must give the rest
    nb.write_text(json.dumps({"cells": [{"cell_type": "code", "metadata": {"tags": ["parameters"]},
                                          "source": ["profile_ops = ['bmm']  # one\n", "seed = 0\n"]}]}))
    assert PA.notebook_defaults(nb) == {"profile_ops": ["bmm"], "seed": 0}
    monkeypatch.setattr(PA, "NOTEBOOK", nb)
    bad.write_text("seed: 1\n")
    with pytest.raises(PA.ProfileError, match="bad.yaml: missing profile_dims, profile_out_dir"):
        PA.load_params(bad)
    nb.write_text(json.dumps({"cells": [{"cell_type": "code", "metadata": {}, "source": ["seed = 0\n"]}]}))
    with pytest.raises(PA.ProfileError, match="nb.ipynb: no parameters cell of literals to start from"):
        PA.load_params(bad)


class FakeRun:
    """collect / measure stand-ins on a fake clock: each op takes op_s, each model setting model_s; 5 shapes per op."""

    def __init__(self, monkeypatch, tmp_path, op_s=10.0, model_s=30.0, fail=(), settings=None, short=(),
                 breaks=None):
        self.now, self.calls, self.fail, self.broken, self.flushed, self.dtypes = 0.0, [], set(fail), False, [], []
        self.measured = []      # (out_dir, keyword arguments) of each measure() call
        self.settings = settings or [("a", "inference", 1, 8), ("a", "training", 1, 8), ("b", "inference", 1, 8)]
        gpu = types.SimpleNamespace(cuda=types.SimpleNamespace(synchronize=self.synchronize))
        monkeypatch.setattr(P, "require_cuda", lambda: gpu)
        monkeypatch.setattr(P, "run_folder", lambda t: "NVIDIA_Fake_torch2_cuda12")
        monkeypatch.setattr(P, "sample_shapes", lambda op, dims, sample, seed: [(1, 2)] * 5)
        monkeypatch.setattr(PM, "label_settings", lambda limit: self.settings[:limit] if limit else self.settings)

        def write_device_json(t, path):
            self.calls.append(("device.json",))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("{}")

        def collect(ops, dims, out_csv, sample, seed, max_seconds, overwrite, flush_l2=False, dtype="fp32",
                    gpu_busy=False):
            self.calls.append(("collect", ops[0], max_seconds))
            self.flushed.append("flush" if flush_l2 else "busy" if gpu_busy else flush_l2)
            self.dtypes.append(dtype)
            self.now += op_s
            if ops[0] in self.fail:
                self.broken = ops[0] == breaks
                raise RuntimeError("CUDA error: an illegal memory access\nmore")
            out_csv.parent.mkdir(parents=True, exist_ok=True)
            out_csv.write_text("OPName,Latency\n" + f"{ops[0]},1.0\n" * (2 if ops[0] in short else 5))

        def measure(config, batch, seq, mode, out_dir, overwrite, **kw):
            self.calls.append(("measure", config.stem, mode, batch))
            self.measured.append((out_dir, kw))
            self.now += model_s
            if config.stem in self.fail:
                self.broken = config.stem == breaks
                raise AttributeError("module has no attribute 'eager_attention_forward'")
            if batch == 99:
                raise PM.ProfileError("out of GPU memory")
            return {"model": config.stem, "mode": mode, "batch": batch, "seq": seq}
        monkeypatch.setattr(P, "write_device_json", write_device_json)
        monkeypatch.setattr(P, "warm_up_clocks", lambda torch, seconds: self.calls.append(("warm-up", seconds)))
        monkeypatch.setattr(P, "collect", collect)
        monkeypatch.setattr(PM, "measure", measure)
        self.params = {"profile_ops": ["bmm", "linear", "add"], "profile_dims": "test",
                       "profile_out_dir": str(tmp_path / "measured"), "profile_overwrite": False,
                       "profile_sample": 5, "profile_max_seconds": 500, "profile_models_max": None, "seed": 0}

    def synchronize(self):
        if self.broken:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")

    def clock(self):
        return self.now

    def params_file(self, folder):
        """The parameters as a YAML file, for the command."""
        path = folder / "p.yaml"
        path.write_text(yaml.safe_dump(self.params))
        return path

    def ran(self, kind):
        return [c[1:] for c in self.calls if c[0] == kind]


def test_without_a_budget_every_op_gets_its_cap_and_every_setting_runs(monkeypatch, tmp_path):
    run, packed = FakeRun(monkeypatch, tmp_path), []
    out = PA.profile_all(run.params, clock=run.clock, after_each=lambda: packed.append(len(run.calls)))
    # device.json, then one warm-up of the GPU's clocks before anything is timed (lib.profile.warm_up_clocks)
    assert run.calls[:3] == [("device.json",), ("warm-up", P.WARM_UP_S), ("collect", "add", 500)]
    assert run.ran("collect") == [("add", 500), ("bmm", 500), ("linear", 500)]     # the GEMMs last
    assert run.flushed == [False] * 3 and run.dtypes == ["fp32"] * 3            # as the dataset timed
    assert [c[:2] for c in run.ran("measure")] == [("a", "inference"), ("b", "inference"), ("a", "training")]
    assert len(out["kernel_csvs"]) == 3 and len(out["labels"]) == 3
    assert out["kept"] == out["partial"] == out["skipped"] == out["failed"] == []
    assert packed == [3, 4, 5, 6, 7, 8]             # after every op and every setting
    run = FakeRun(monkeypatch, tmp_path / "zero")   # a cap of 0 is no cap, as collect() always read it
    PA.profile_all(run.params | {"profile_max_seconds": 0}, clock=run.clock)
    assert run.ran("collect") == [("add", None), ("bmm", None), ("linear", None)]


def test_a_budget_splits_the_kernels_share_and_cuts_the_settings(monkeypatch, tmp_path):
    # budget 100 s: the kernels share 50 s; ops of 10 s each get 50/3, then 40/2 = 20, then 30/1 = 30 s;
    # settings of 40 s start at 30 s and 70 s, and the third may not start at 110 s > 100 s
    run = FakeRun(monkeypatch, tmp_path, model_s=40.0)
    out = PA.profile_all(run.params, budget_s=100, clock=run.clock)
    assert run.ran("collect") == [("add", pytest.approx(50 / 3)), ("bmm", 20), ("linear", 30)]
    assert [c[:2] for c in run.ran("measure")] == [("a", "inference"), ("b", "inference")]
    assert out["skipped"] == ["a training 1 8: the 100 s budget was spent"] and out["failed"] == []
    # ops slower than their share: the last op finds the kernels' share spent and is skipped, not run without limit
    run = FakeRun(monkeypatch, tmp_path / "slow", op_s=30.0)
    out = PA.profile_all(run.params, budget_s=100, clock=run.clock)
    assert [c[0] for c in run.ran("collect")] == ["add", "bmm"]
    assert out["skipped"][0] == "linear: the kernels' share of the 100 s budget was spent"


def test_an_op_cut_short_is_listed_as_partial(monkeypatch, tmp_path):
    run = FakeRun(monkeypatch, tmp_path, short={"linear"})
    out = PA.profile_all(run.params, clock=run.clock)
    assert out["partial"] == ["linear: 2 of 5 shapes timed"] and len(out["kernel_csvs"]) == 3


def test_a_failure_is_reported_and_the_rest_still_run(monkeypatch, tmp_path):
    run = FakeRun(monkeypatch, tmp_path, fail={"bmm", "a"},
                  settings=[("a", "inference", 1, 8), ("b", "inference", 99, 8), ("c", "training", 1, 8)])
    out = PA.profile_all(run.params, clock=run.clock)
    assert [c[0] for c in run.ran("collect")] == ["add", "bmm", "linear"]
    assert [p.stem for p in out["kernel_csvs"]] == ["add", "linear"]    # the failed op's CSV is not listed
    assert (Path(run.params["profile_out_dir"]) / "NVIDIA_Fake_torch2_cuda12" / "device.json").exists()
    assert out["failed"] == ["bmm: RuntimeError: CUDA error: an illegal memory access",
                             "a inference 1 8: AttributeError: module has no attribute 'eager_attention_forward'"]
    assert out["skipped"] == ["b inference 99 8: out of GPU memory"] and [r["model"] for r in out["labels"]] == ["c"]


def test_an_error_that_breaks_the_gpu_stops_the_run(monkeypatch, tmp_path):
    run = FakeRun(monkeypatch, tmp_path, fail={"linear"}, breaks="linear")
    out = PA.profile_all(run.params, clock=run.clock)
    assert [c[0] for c in run.ran("collect")] == ["add", "bmm", "linear"] and run.ran("measure") == []
    assert out["failed"][-1] == "the GPU stopped working after this error: nothing after it was run"
    run = FakeRun(monkeypatch, tmp_path / "model", fail={"a"}, breaks="a")
    out = PA.profile_all(run.params, clock=run.clock)
    assert [c[:2] for c in run.ran("measure")] == [("a", "inference")] and len(out["failed"]) == 2


def test_a_flushed_run_times_the_kernels_alone_into_their_own_folder(monkeypatch, tmp_path):
    # --flush-l2: every op flushed, its CSV in <run folder>/flush-l2 (apart from the dataset-method CSVs), no model
    # setting (a model pass is not one kernel), and the kernels share the whole budget: 100 s over 3 ops
    run = FakeRun(monkeypatch, tmp_path)
    out = PA.profile_all(run.params, budget_s=100, clock=run.clock, flush_l2=True)
    assert run.ran("collect") == [("add", pytest.approx(100 / 3)), ("bmm", 45), ("linear", 80)]
    assert run.flushed == ["flush"] * 3 and run.ran("measure") == []
    folder = Path(run.params["profile_out_dir"]) / "NVIDIA_Fake_torch2_cuda12"
    assert out["kernel_csvs"] == [folder / P.FLUSH_L2_FOLDER / f"{op}.csv" for op in ("add", "bmm", "linear")]
    assert (folder / "device.json").exists() and not list(folder.glob("*.csv"))
    assert out["labels"] == out["skipped"] == out["failed"] == []


def test_a_busy_gpu_run_times_the_kernels_alone_into_their_own_folder(monkeypatch, tmp_path):
    # --gpu-busy, like --flush-l2: every op, into <run folder>/gpu-busy, no model setting; with --flush-l2 too, it
    # refuses before the GPU is asked for
    run = FakeRun(monkeypatch, tmp_path)
    out = PA.profile_all(run.params, budget_s=100, clock=run.clock, gpu_busy=True)
    assert run.flushed == ["busy"] * 3 and run.ran("measure") == []
    assert [p.parent.name for p in out["kernel_csvs"]] == [P.GPU_BUSY_FOLDER] * 3
    with pytest.raises(P.ProfileError, match="exclude each other"):
        PA.profile_all(run.params, clock=run.clock, flush_l2=True, gpu_busy=True)


def test_an_fp16_run_times_the_gemms_alone_into_their_own_folder(monkeypatch, tmp_path):
    # --dtype fp16: the vector ops are left out (tensor cores run GEMMs), the GEMMs share the whole budget (100 s over
    # 2 ops), no model setting is timed; with --flush-l2 too, the folder says both
    run = FakeRun(monkeypatch, tmp_path)
    out = PA.profile_all(run.params, budget_s=100, clock=run.clock, dtype="fp16")
    assert run.ran("collect") == [("bmm", 50), ("linear", 90)] and run.dtypes == ["fp16"] * 2
    folder = Path(run.params["profile_out_dir"]) / "NVIDIA_Fake_torch2_cuda12"
    assert out["kernel_csvs"] == [folder / "fp16" / f"{op}.csv" for op in ("bmm", "linear")]
    assert run.ran("measure") == [] and out["labels"] == out["skipped"] == []
    run = FakeRun(monkeypatch, tmp_path / "both")
    out = PA.profile_all(run.params, clock=run.clock, flush_l2=True, dtype="fp16")
    assert [p.parent.name for p in out["kernel_csvs"]] == ["fp16-flush-l2"] * 2 and run.flushed == ["flush"] * 2


def test_a_model_kernels_run_profiles_the_settings_alone_with_the_whole_budget(monkeypatch, tmp_path):
    # --model-kernels: no kernel op; every setting (the whole budget: 100 s, settings of 40 s start at 0, 40 and 80 s),
    # each profiled, its label JSON and profile under <out dir>/model-kernels (beside each other, not the labels')
    run = FakeRun(monkeypatch, tmp_path, model_s=40.0)
    out = PA.profile_all(run.params, budget_s=100, clock=run.clock, model_kernels=True)
    assert run.ran("collect") == [] and out["kernel_csvs"] == [] and len(out["labels"]) == 3
    profiles = tmp_path / "measured" / "model-kernels"
    assert run.measured == [(profiles, {"kernels_out": PM.DEFAULT_PROFILE, "profiles": profiles})] * 3
    # --grad-mode: the training settings alone, grad mode on, their labels beside the plain ones (measure puts them
    # under <software>-grad-mode); with --model-kernels too, profiled as well
    run = FakeRun(monkeypatch, tmp_path / "grad")
    out = PA.profile_all(run.params, clock=run.clock, grad_mode=True)
    assert run.ran("measure") == [("a", "training", 1)] and run.ran("collect") == []
    assert run.measured == [(tmp_path / "grad" / "measured" / "labels", {"grad_mode": True})]
    run = FakeRun(monkeypatch, tmp_path / "both")
    PA.profile_all(run.params, clock=run.clock, grad_mode=True, model_kernels=True)
    assert run.measured[0][1]["grad_mode"] and run.measured[0][1]["kernels_out"] == PM.DEFAULT_PROFILE
    with pytest.raises(P.ProfileError, match="run them separately"):    # kernels alone and settings alone: refused
        PA.profile_all(run.params, clock=run.clock, gpu_busy=True, model_kernels=True)


def test_models_keeps_the_named_models_settings_and_names_an_unknown_one(monkeypatch, tmp_path, capsys):
    settings = [("a", "inference", 1, 8), ("a", "training", 1, 8), ("b", "inference", 1, 8)]
    assert PA.pick_settings(settings, ["b"]) == [("b", "inference", 1, 8)]
    assert PA.pick_settings(settings, None, training_only=True) == [("a", "training", 1, 8)]
    assert PA.pick_settings(settings, []) == settings
    with pytest.raises(P.ProfileError, match="--models: no label setting of c, d \\(known: a, b\\)"):
        PA.pick_settings(settings, ["a", "d", "c"])
    run = FakeRun(monkeypatch, tmp_path)     # the command passes its flags through
    params = run.params_file(tmp_path)
    assert PA.main(["--params", str(params), "--model-kernels", "--models", "b"]) == 0
    assert run.ran("measure") == [("b", "inference", 1)] and run.measured[0][1]["kernels_out"] == PM.DEFAULT_PROFILE
    assert PA.main(["--params", str(params), "--grad-mode", "--models", "c"]) == 2
    assert "error: --models: no label setting of c" in capsys.readouterr().err


def test_existing_measurements_are_kept_unless_overwrite(monkeypatch, tmp_path):
    run = FakeRun(monkeypatch, tmp_path)
    kept = tmp_path / "measured" / "NVIDIA_Fake_torch2_cuda12" / "linear.csv"
    kept.parent.mkdir(parents=True)
    kept.write_text("OPName,Latency\nlinear,1.0\n")
    (kept.parent / "device.json").write_text('{"Device": "kept"}')
    out = PA.profile_all(run.params, clock=run.clock)
    assert out["kept"] == ["linear"] and kept in out["kernel_csvs"]
    assert out["partial"] == ["linear: 1 of 5 shapes timed (kept from an earlier run)"]   # a short one is said
    assert [c[0] for c in run.ran("collect")] == ["add", "bmm"] and ("device.json",) not in run.calls
    run = FakeRun(monkeypatch, tmp_path)
    PA.profile_all(run.params | {"profile_overwrite": True}, clock=run.clock)
    assert [c[0] for c in run.ran("collect")] == ["add", "bmm", "linear"] and run.calls[0] == ("device.json",)


def test_the_command_packs_what_was_measured_even_when_a_run_fails(monkeypatch, tmp_path, capsys):
    run = FakeRun(monkeypatch, tmp_path, fail={"add"})
    params = run.params_file(tmp_path)
    archive = tmp_path / "out" / "measured.tgz"
    (tmp_path / "measured").mkdir()
    (tmp_path / "measured" / "README.md").write_text("what this folder holds")
    rc = PA.main(["--params", str(params), "--budget-s", "1000", "--archive", str(archive)])
    out = capsys.readouterr().out
    assert rc == 1 and "labels: 3 timed; 0 skipped, 1 failed" in out and "failed add: RuntimeError" in out
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    assert "measured/NVIDIA_Fake_torch2_cuda12/bmm.csv" in names and "measured/NVIDIA_Fake_torch2_cuda12/add.csv" not in names
    assert all(not n.endswith(".md") for n in names)     # unpacking it must not overwrite data/measured/README.md
    # an interrupt (Ctrl-C) still packs what was written before it, and sums it up
    archive.unlink()
    monkeypatch.setattr(PM, "label_settings", lambda limit: (_ for _ in ()).throw(KeyboardInterrupt()))
    assert PA.main(["--params", str(params), "--archive", str(archive)]) == 130
    assert "interrupted: the summary below" in capsys.readouterr().out
    assert archive.exists() and not list(archive.parent.glob(".tmp-*"))


def test_a_timeouts_sigterm_still_packs_the_archive(monkeypatch, tmp_path):
    # the device tool ends a run past its limit with SIGTERM, which would skip every finally: main turns it into an
    # interrupt, packs, and puts the earlier handler back
    run = FakeRun(monkeypatch, tmp_path)
    params = run.params_file(tmp_path)
    monkeypatch.setattr(PM, "label_settings", lambda limit: os.kill(os.getpid(), signal.SIGTERM))
    before = signal.getsignal(signal.SIGTERM)
    archive = tmp_path / "m.tgz"
    assert PA.main(["--params", str(params), "--archive", str(archive)]) == 130
    with tarfile.open(archive) as tar:
        assert "measured/NVIDIA_Fake_torch2_cuda12/add.csv" in tar.getnames()
    assert signal.getsignal(signal.SIGTERM) is before


def test_an_interrupted_op_is_partial_and_an_interrupted_setting_skipped(monkeypatch, tmp_path):
    run = FakeRun(monkeypatch, tmp_path)
    collect = P.collect

    def interrupted(ops, dims, out_csv, **kw):
        if ops[0] != "linear":
            return collect(ops, dims, out_csv, **kw)
        out_csv.write_text("OPName,Latency\nlinear,1.0\nlinear,2.0\n")    # collect keeps what it timed
        raise KeyboardInterrupt
    monkeypatch.setattr(P, "collect", interrupted)
    result = PA.empty_result()
    with pytest.raises(KeyboardInterrupt):
        PA.profile_all(run.params, clock=run.clock, result=result)
    assert result["partial"] == ["linear: 2 of 5 shapes timed (interrupted)"] and len(result["kernel_csvs"]) == 2
    run = FakeRun(monkeypatch, tmp_path / "model")
    monkeypatch.setattr(PM, "measure", lambda *a, **kw: (_ for _ in ()).throw(KeyboardInterrupt()))
    result = PA.empty_result()
    with pytest.raises(KeyboardInterrupt):
        PA.profile_all(run.params, clock=run.clock, result=result)
    assert result["skipped"] == ["a inference 1 8: interrupted"] and len(result["kernel_csvs"]) == 3


def test_label_settings_that_cannot_be_read_are_one_line(monkeypatch, tmp_path, capsys):
    run = FakeRun(monkeypatch, tmp_path)
    params = run.params_file(tmp_path)
    monkeypatch.setattr(PM, "label_settings", lambda limit: (_ for _ in ()).throw(KeyError("model")))
    assert PA.main(["--params", str(params)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: cannot list the label settings from ") and "KeyError" in err[-1]


def test_no_gpu_and_bad_budget_are_one_line_errors(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    smoke = tmp_path / "smoke.yaml"     # notebook 01's smoke parameters, measuring into a folder not yet there
    params = yaml.safe_load((paths.ROOT / "params" / "smoke" / "01-profile-kernels.yaml").read_text())
    smoke.write_text(yaml.safe_dump(params | {"profile_out_dir": str(tmp_path / "measured")}))
    assert PA.main(["--params", str(smoke), "--archive", str(tmp_path / "m.tgz")]) == 2
    err = capsys.readouterr().err.strip()
    assert "error: no CUDA GPU:" in err and len(err.splitlines()) == 1
    with pytest.raises(SystemExit) as e:
        PA.main(["--params", str(smoke), "--budget-s", "0"])
    assert e.value.code == 2 and "--budget-s must be positive" in capsys.readouterr().err


def test_the_budget_counts_from_the_start_of_the_run(monkeypatch, tmp_path):
    # a monotonic clock starts anywhere: the kernels' share ends KERNEL_SHARE * budget after the run starts, not at that
    # reading of the clock; and a setting may still start when exactly the budget has gone by (nothing starts after it)
    run = FakeRun(monkeypatch, tmp_path, model_s=35.0)
    run.now = 1000.0
    out = PA.profile_all(run.params, budget_s=100, clock=run.clock)
    assert [c[1] for c in run.ran("collect")] == [pytest.approx(50 / 3), 20, 30]
    # settings start 30, 65 and 100 s into the run
    assert len(run.ran("measure")) == 3 and out["skipped"] == []


def test_the_archive_keeps_the_folder_path_within_the_repository(monkeypatch, tmp_path):
    # build/measured packs as build/measured/...: unpacked at the repository root it lands where it was measured
    monkeypatch.setattr(paths, "ROOT", tmp_path)
    folder = tmp_path / "build" / "measured" / "NVIDIA_X"
    folder.mkdir(parents=True)
    (folder / "bmm.csv").write_text("OPName,Latency\n")
    with tarfile.open(PA.archive(tmp_path / "build" / "measured", tmp_path / "m.tgz")) as tar:
        assert "build/measured/NVIDIA_X/bmm.csv" in tar.getnames()


def test_the_command_puts_back_the_sigterm_handler_it_found(monkeypatch, tmp_path):
    run = FakeRun(monkeypatch, tmp_path)
    params = run.params_file(tmp_path)
    mine = lambda signum, frame: None   # noqa: E731  a caller's own handler
    before = signal.signal(signal.SIGTERM, mine)
    try:
        assert PA.main(["--params", str(params)]) == 0
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, before)
