"""Notebook 01's GPU run in one call: every op's kernels, then every plain label setting, in one time budget.

  python -m lib.profile_all [--params params/full/01-profile-kernels.yaml] [--budget-s S] [--archive OUT.tgz]
                            [--flush-l2 | --gpu-busy] [--dtype fp32|fp16]
                            [--model-kernels] [--grad-mode] [--models NAME,...]

The parameters are notebook 01's (profile_ops, profile_dims, profile_out_dir, profile_overwrite, profile_sample,
profile_max_seconds, profile_models_max, seed): its parameters cell, then the YAML, so a GPU lent for minutes (a
device session: data/measured/README.md) measures what `make figures` on a GPU machine would. With --budget-s: the
kernel ops share KERNEL_SHARE of the budget, the GEMMs last (an op that ends early leaves its time to the ops
after it), and label settings start while the budget lasts, one model at a time in turn, so a cut leaves as many
models as possible measured once. A kernel shape or a model setting already started is finished: allow a minute
beyond the budget. --archive packs the measurement folder into one .tgz after every op and setting and once more
at the end, also after an error, Ctrl-C or SIGTERM (a timeout's), so what was measured comes back. Exit status: 0,
1 if an op or a setting failed, 2 on bad input, 130 when interrupted. --flush-l2 (the L2 flushed before every timed
call), --gpu-busy (every timed call queued behind a busy GPU, so its launch gap is not timed) and --dtype fp16 (the
GEMM ops alone, on tensor cores) time kernel ops alone, with the whole budget, into a subfolder of the run folder
(lib.measured.kernel_folder): the model settings are the dataset's, fp32 and unflushed. --model-kernels and
--grad-mode time model settings alone, with the whole budget: --model-kernels profiles each setting once more
(lib.profile_model --kernels-out) and writes its kernels and its label JSON under <out dir>/model-kernels/ (a second
run of the setting, beside the labels'), --grad-mode the training settings with grad mode on in the backward (labels
under <software>-grad-mode); --models keeps the settings of the named models only.
"""
from __future__ import annotations

import ast
import csv
import itertools
import json
import signal
import sys
import tarfile
import time
from pathlib import Path

from . import paths
from .cli import Parser
from .ops import GEMM_DIMS
from .profile_ops import DTYPE_BYTES, FP16_OPS, ProfileError, dims_of

# Share of --budget-s for the kernel ops; the model settings get the rest, and any the kernels leave.
KERNEL_SHARE = 0.5
PARAMS = ("profile_ops", "profile_dims", "profile_out_dir", "profile_overwrite", "profile_sample",
          "profile_max_seconds", "profile_models_max", "seed")
NOTEBOOK = paths.ROOT / "notebooks" / "01-profile-kernels.ipynb"


def notebook_defaults(notebook: Path = NOTEBOOK) -> dict:
    """name -> value of each literal assignment in a notebook's `parameters` cell (what papermill overrides)."""
    cells = json.loads(Path(notebook).read_text())["cells"]
    cell = next(c for c in cells if "parameters" in c.get("metadata", {}).get("tags", []))
    tree = ast.parse("".join(cell["source"]))
    return {node.targets[0].id: ast.literal_eval(node.value) for node in tree.body
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)}


def load_params(path: Path) -> dict:
    """Notebook 01's collection parameters: its parameters cell, then a papermill YAML; ProfileError naming the file."""
    import yaml
    try:
        raw = yaml.safe_load(Path(path).read_text()) or {}
    except FileNotFoundError:
        raise ProfileError(f"{path}: parameter file not found") from None
    except yaml.YAMLError as e:
        raise ProfileError(f"{path}: not valid YAML ({type(e).__name__})") from None
    if not isinstance(raw, dict):
        raise ProfileError(f"{path}: expected 'name: value' lines")
    try:
        defaults = notebook_defaults(NOTEBOOK)
    except (OSError, ValueError, KeyError, StopIteration, SyntaxError) as e:
        raise ProfileError(f"{NOTEBOOK}: no parameters cell of literals to start from ({type(e).__name__})") from None
    params = {k: v for k, v in (defaults | raw).items() if k in PARAMS}
    missing = [k for k in PARAMS if k not in params]
    if missing:
        raise ProfileError(f"{path}: missing {', '.join(missing)}")
    if not isinstance(params["profile_ops"], list) or not params["profile_ops"]:
        raise ProfileError(f"{path}: profile_ops must be a non-empty list of ops")
    for op in params["profile_ops"]:
        try:
            dims_of(op)
        except ProfileError as e:
            raise ProfileError(f"{path}: {e}") from None
    return params


def op_seconds(left_s: float | None, ops_left: int, cap_s: float | None) -> float | None:
    """Seconds one op may take: its even share of what is left of the kernels' budget, at most cap_s (None or 0: no cap)."""
    # share = left / ops still to run; an op that ends early raises the share of the ops after it
    cap_s = cap_s or None               # collect() reads a limit of 0 as none, as notebook 01 always did
    if left_s is None:
        return cap_s
    share = max(left_s, 0.0) / ops_left
    return share if cap_s is None else min(share, cap_s)


def gemms_last(ops: list[str]) -> list[str]:
    """ops with the GEMMs moved to the end, each group in its order: a vector op's shapes take seconds, a GEMM's
    minutes (H200: 3 to 40 s per vector op, about 75 s for bmm and 100 s for linear), so the time the vector ops leave
    of their even shares goes to the GEMMs."""
    return [op for op in ops if dims_of(op) != GEMM_DIMS] + [op for op in ops if dims_of(op) == GEMM_DIMS]


def round_robin(settings: list[tuple]) -> list[tuple]:
    """(model, mode, batch, seq) settings reordered one model at a time: every model's first, then every second, ..."""
    by_model = {}
    for s in settings:
        by_model.setdefault(s[0], []).append(s)
    return [s for group in itertools.zip_longest(*by_model.values()) for s in group if s is not None]


def pick_settings(settings: list[tuple], models: list[str] | None = None, training_only: bool = False) -> list[tuple]:
    """(model, mode, batch, seq) settings of the named models only (None: all), training ones only if asked;
    ProfileError naming a model that has no setting."""
    if models:
        unknown = sorted(set(models) - {s[0] for s in settings})
        if unknown:
            raise ProfileError(f"--models: no label setting of {', '.join(unknown)} "
                               f"(known: {', '.join(sorted({s[0] for s in settings}))})")
        settings = [s for s in settings if s[0] in models]
    return [s for s in settings if s[1] == "training"] if training_only else settings


def empty_result() -> dict:
    """What profile_all fills as it goes (see there)."""
    return {"kernel_csvs": [], "kept": [], "labels": [], "partial": [], "skipped": [], "failed": []}


def profile_all(params: dict, budget_s: float | None = None, clock=time.monotonic, after_each=None,
                result: dict | None = None, flush_l2: bool = False, dtype: str = "fp32",
                gpu_busy: bool = False, model_kernels: bool = False, grad_mode: bool = False,
                models: list[str] | None = None) -> dict:
    """Measure notebook 01's kernels and label settings on GPU 0 into the folders of data/measured/README.md (notebook 01).

    Returns `result` (empty_result() if None), filled as the run goes, so an interrupted run still has it:
    {"kernel_csvs": [CSV paths written or kept], "kept": [ops measured before], "labels": [measure() rows],
    "partial": ["op: n of N shapes timed ..."], "skipped": ["what: why"], "failed": ["what: error"]}. A CSV with
    fewer rows than the op's sampled shapes is partial, whether its time ran out, shapes were skipped (out of
    memory), the op failed or was interrupted, or it was kept from an earlier run. A failing op or setting is listed
    and the run goes on (a GPU lent for minutes is not lent twice), unless it left the GPU unusable.
    `after_each()` runs after every op and setting (the command packs its archive there). flush_l2, gpu_busy or dtype
    fp16: the kernel ops alone (fp16: the GEMMs), timed so (lib.profile.collect) into <run folder>/<kernel_folder>,
    with the whole budget. model_kernels or grad_mode: the model settings alone, with the whole budget (module
    docstring); models: those models' settings only.
    """
    from .profile import (WARM_UP_S, check_before, collect, error_line, kernel_folder, require_cuda, run_folder,
                          sample_shapes, warm_up_clocks, write_device_json)
    from .model_kernels import PROFILES
    from .profile_model import DEFAULT_PROFILE, label_settings, measure
    check_before(flush_l2, gpu_busy)
    kernels_only = bool(kernel_folder(flush_l2, dtype, gpu_busy))   # no model setting is timed unlike the dataset
    settings_only = model_kernels or grad_mode
    if kernels_only and settings_only:
        raise ProfileError("--flush-l2, --gpu-busy and --dtype fp16 time kernel ops alone, --model-kernels and "
                           "--grad-mode model settings alone: run them separately")
    torch = require_cuda()
    start = clock()
    kernel_end = None if budget_s is None else start + (1.0 if kernels_only else KERNEL_SHARE) * budget_s
    out_dir = paths.ROOT / params["profile_out_dir"]
    run_dir = out_dir / run_folder(torch)
    kernel_dir = run_dir / kernel_folder(flush_l2, dtype, gpu_busy)
    result = empty_result() if result is None else result

    def note(kind: str, line: str) -> None:
        result[kind].append(line)
        print(f"{kind}: {line}", file=sys.stderr)

    def check_rows(op: str, out_csv: Path, how: str = "") -> None:
        """Note the op as partial if its CSV holds fewer rows than the shapes it was to time."""
        shapes = len(sample_shapes(op, params["profile_dims"], params["profile_sample"], params["seed"]))
        rows = _data_rows(out_csv) if out_csv.exists() else 0
        if rows < shapes:
            note("partial", f"{op}: {rows} of {shapes} shapes timed{how}")

    def gpu_broken(what: str, e: BaseException) -> bool:
        """Record a failure; True if the GPU no longer runs anything (every later call would fail too)."""
        note("failed", f"{what}: {error_line(e)}")
        try:
            torch.cuda.synchronize()
        except Exception:  # noqa: BLE001  a sticky CUDA error: nothing later can run
            note("failed", "the GPU stopped working after this error: nothing after it was run")
            return True
        return False

    if params["profile_overwrite"] or not (run_dir / "device.json").exists():
        write_device_json(torch, run_dir / "device.json")
    warm_up_clocks(torch, WARM_UP_S)     # the first op's first shapes at the boost clock, not the idle one
    ops = [] if settings_only else gemms_last([op for op in params["profile_ops"] if dtype == "fp32" or op in FP16_OPS])
    for i, op in enumerate(ops):
        out_csv = kernel_dir / f"{op}.csv"
        if out_csv.exists() and not params["profile_overwrite"]:
            result["kept"].append(op)
            result["kernel_csvs"].append(out_csv)
            print(f"{out_csv} exists: kept (profile_overwrite measures it again)", file=sys.stderr)
            check_rows(op, out_csv, " (kept from an earlier run)")
            continue
        seconds = op_seconds(None if kernel_end is None else kernel_end - clock(), len(ops) - i,
                             params["profile_max_seconds"])
        if seconds is not None and seconds <= 0:
            note("skipped", f"{op}: the kernels' share of the {budget_s:g} s budget was spent")
            continue
        try:
            collect([op], params["profile_dims"], out_csv, sample=params["profile_sample"], seed=params["seed"],
                    max_seconds=seconds, overwrite=True, flush_l2=flush_l2, dtype=dtype,
                    gpu_busy=gpu_busy)
        except KeyboardInterrupt:   # Ctrl-C, or the command's SIGTERM: collect wrote the rows it had timed
            check_rows(op, out_csv, " (interrupted)")
            raise
        except Exception as e:  # noqa: BLE001  one op fails alone; collect wrote the rows it had timed
            check_rows(op, out_csv, " (failed)")
            if gpu_broken(op, e):
                return result
            continue
        finally:
            if after_each:
                after_each()
        result["kernel_csvs"].append(out_csv)
        check_rows(op, out_csv)     # its time ran out, or shapes were skipped (stderr says which)
    if kernels_only:
        return result
    try:
        settings = label_settings(params["profile_models_max"])
    except Exception as e:  # noqa: BLE001  e.g. the dataset's label folder was not carried along
        raise ProfileError(f"cannot list the label settings from {paths.LABELS} ({error_line(e)})") from None
    settings = round_robin(pick_settings(settings, models, training_only=grad_mode))
    # --model-kernels: the setting's label JSON beside its profile, so each profile has the latency of its own run
    labels_dir = out_dir / (PROFILES.name if model_kernels else "labels")
    extra = {"grad_mode": True} if grad_mode else {}
    if model_kernels:
        extra |= {"kernels_out": DEFAULT_PROFILE, "profiles": out_dir / PROFILES.name}
    for n, setting in enumerate(settings):
        what = " ".join(map(str, setting))
        if budget_s is not None and clock() - start > budget_s:
            for rest in settings[n:]:
                note("skipped", f"{' '.join(map(str, rest))}: the {budget_s:g} s budget was spent")
            break
        model, mode, batch, seq = setting
        try:
            result["labels"].append(measure(paths.MODEL_CONFIGS / f"{model}.json", batch, seq, mode, labels_dir,
                                            overwrite=params["profile_overwrite"], **extra))
        except ProfileError as e:   # out of memory on a smaller GPU, or measured before: that setting only
            note("skipped", f"{what}: {e}")
        except KeyboardInterrupt:
            note("skipped", f"{what}: interrupted")
            raise
        except Exception as e:  # noqa: BLE001  e.g. another transformers version: reported, the rest still run
            if gpu_broken(what, e):
                return result
        finally:
            if after_each:
                after_each()
    return result


def _data_rows(csv_path: Path) -> int:
    """Rows of a CSV file, its header not counted."""
    with open(csv_path, newline="") as f:
        return max(sum(1 for _ in csv.reader(f)) - 1, 0)


def archive(folder: Path, target: Path) -> Path:
    """Pack `folder` (its path relative to the repository kept) into one .tgz, written atomically; .md files left out."""
    folder = Path(folder).resolve()
    arcname = folder.relative_to(paths.ROOT) if folder.is_relative_to(paths.ROOT) else folder.name

    def write(tmp: Path) -> None:
        with tarfile.open(tmp, "w:gz") as tar:   # measurements only: unpacking must not overwrite the README
            tar.add(folder, arcname=str(arcname), filter=lambda info: None if info.name.endswith(".md") else info)
    Path(target).parent.mkdir(parents=True, exist_ok=True)
    return paths.write_atomic(Path(target), write)


def main(argv: list[str] | None = None) -> int:
    ap = Parser(prog="python -m lib.profile_all", description=__doc__.splitlines()[0])
    ap.add_argument("--params", type=Path, default=paths.ROOT / "params" / "full" / "01-profile-kernels.yaml",
                    help="notebook 01's papermill parameters (default: params/full)")
    ap.add_argument("--budget-s", type=float, default=None, help="wall seconds after which nothing new starts")
    ap.add_argument("--archive", type=Path, default=None,
                    help="also pack the measurement folder into this .tgz, after every op and setting")
    ap.add_argument("--flush-l2", action="store_true",
                    help="time the kernel ops alone, the L2 flushed before every call, into <run folder>/flush-l2")
    ap.add_argument("--gpu-busy", action="store_true",
                    help="time the kernel ops alone, each call queued behind a busy GPU (its launch gap untimed, the "
                         "L2 as it was), into <run folder>/gpu-busy")
    ap.add_argument("--dtype", default="fp32", choices=tuple(DTYPE_BYTES),
                    help="fp16: time the GEMM ops alone, on tensor cores, into <run folder>/fp16")
    ap.add_argument("--model-kernels", action="store_true",
                    help="time the model settings alone, each profiled once more: its kernels and label JSON under "
                         "<out dir>/model-kernels")
    ap.add_argument("--grad-mode", action="store_true",
                    help="time the training settings alone, the backward with grad mode on (lib.profile_model --grad-mode)")
    ap.add_argument("--models", type=lambda v: [m for m in v.split(",") if m], default=None,
                    help="comma-separated model names (DLmodel_configs/ stems): their settings only")
    a = ap.parse_args(argv)
    if a.budget_s is not None and a.budget_s <= 0:
        ap.error("--budget-s must be positive")
    try:
        params = load_params(a.params)
        out_dir = paths.ROOT / params["profile_out_dir"]

        def pack() -> None:
            if a.archive is not None and out_dir.is_dir():
                archive(out_dir, a.archive)
        # a timeout's SIGTERM ends the run like Ctrl-C: what was measured is packed and summed up
        result, interrupted = empty_result(), False
        before = signal.signal(signal.SIGTERM, _raise_interrupt)
        try:
            profile_all(params, a.budget_s, after_each=pack, result=result, flush_l2=a.flush_l2, dtype=a.dtype,
                        gpu_busy=a.gpu_busy, model_kernels=a.model_kernels, grad_mode=a.grad_mode, models=a.models)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            pack()
            signal.signal(signal.SIGTERM, signal.SIG_DFL if before is None else before)
    except ProfileError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if interrupted:
        print("interrupted: the summary below is what was done before")
    print(f"kernels: {len(result['kernel_csvs'])} ops ({len(result['kept'])} kept, {len(result['partial'])} partial); "
          f"labels: {len(result['labels'])} timed; {len(result['skipped'])} skipped, {len(result['failed'])} failed")
    for kind in ("partial", "skipped", "failed"):
        for line in result[kind]:
            print(f"  {kind} {line}")
    return 130 if interrupted else 1 if result["failed"] else 0


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


if __name__ == "__main__":
    sys.exit(main())
