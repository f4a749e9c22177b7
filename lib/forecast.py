"""End-to-end latency of a model on a GPU: captured kernels -> predicted kernels -> sum (notebook 05).

    python -m lib.forecast --model MODEL_CONFIG.json --device DEVICE.json --batch B --seq S \
        --mode inference|training [--fusion] [--method neusight|roofline|habitat|li] [--calibrate]
        [--kernels-out KERNELS.csv]

prints {"latency_ms", "forward_ms", "backward_ms", "kernels"}; --kernels-out PATH also writes the predicted kernel
table (one row per distinct kernel: phase, layer (prologue/layer/epilogue), aten op, op class, shape, count, pred_ms,
total_ms; fused and raw_ms with --fusion / --calibrate) as CSV, to see where the time goes. One-line warnings on stderr:
--fusion in training mode (no label validates it); a GPU whose machine
balance lies outside the training GPUs' (lib.caveats.extrapolation_note); a spec field that looks like other units,
or a training GPU's name with another spec (lib.caveats.spec_notes); a model whose fp32 weights (+ in training the
larger of their gradients and the activations saved for the backward) alone exceed the GPU's memory
(lib.caveats.memory_note); and a note where the config's `architectures` names another
class than the one built (lib.caveats.head_note: BERT's heads follow the labels). Kernels run one after another,
so a model's latency is the sum of its kernels' latencies (DESIGN.md):
    latency_ms = sum_k count_k * pred_ms_k,  forward_ms over phase 'fw', backward_ms over 'bw'.
Each distinct kernel shape is predicted once; an AMD GPU's by lib.amd's models (lib.kernels.vendor_models).
Optionally (--calibrate; off by default, as notebook 05 shows it does not help reliably; it keeps the NVIDIA-trained
models on any GPU, whose forecasts its factors were fitted to) the forecast is calibrated:
each group g (forward kernels per op class; all backward kernels) is scaled by a factor f_g
fitted on the TRAINING GPUs' end-to-end labels only (lib.calibration.fit_e2e_calibration):
    latency_ms = sum_g f_g * sum_{k in g} count_k * pred_ms_k
The factors are cached in build/cache/calibration/ keyed by the predictor config and the code.
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from . import paths, reference_weights
from .caveats import activation_gb, extrapolation_note, fusion_note, head_note, memory_note, spec_notes
from .cli import Parser, device_arg, model_arg, stdout_failed
from .devices import Device, DeviceError, load_device
from .fusion import fuse_elementwise
from .graph import capture, parameter_count
from .model_config import GraphError
from .traffic import traffic_scale

SHAPE_COLS = ["op", "B", "M", "N", "K", "H", "bytes"]
METHODS = ("neusight", "roofline", "habitat", "li")
CALIBRATION_CACHE = paths.CACHE / "calibration"
# Modules whose source decides a NeuSight prediction or the calibration fit (cache key).
_CALIBRATION_CODE = ("calibration.py", "kernels.py", "kernel_input.py", "predictors.py", "predictor_config.py",
                     "utilization.py", "selection.py", "devices.py", "envelope.py", "ops.py", "traffic.py",
                     "features.py", "tiles.py", "tile_choice.py", "roofline.py", "waves.py", "graph.py", "graph_ops.py",
                     "fusion.py", "graph_capture.py", "model_config.py", "train.py", "data.py", "labels.py",
                     "forecast.py", "overhead.py", "baselines.py", "direct.py")


def predict_table(kernels: pd.DataFrame, device: Device, method: str = "neusight", tiles: str = "spec",
                  cfg_by_class: dict | None = None, habitat_cfg: dict | None = None, seed: int = 0) -> pd.DataFrame:
    """The kernel table with `pred_ms` (one kernel) and `total_ms` (x count); unique shapes predicted once
    (seed: the default models' training seed, lib.kernels.predict_kernels)."""
    from .kernels import predict_kernels   # on the device as given (its JSON, not a lookup by name)
    key = kernels[SHAPE_COLS].fillna(-1.0)
    uniq = key.drop_duplicates().reset_index(drop=True)
    uniq["pred_ms"] = predict_kernels(uniq.replace(-1.0, np.nan), device, method, tiles, cfg_by_class, habitat_cfg, seed)
    out = kernels.copy()
    out["pred_ms"] = key.merge(uniq, on=SHAPE_COLS, how="left")["pred_ms"].to_numpy() * traffic_scale(kernels)
    out["total_ms"] = out["pred_ms"] * out["count"]
    return out


def _calibration_key(method: str, tiles: str, cfg_by_class: dict | None) -> str:
    from .data import fingerprint   # the kernel dataset the predictors learn from
    from .train import cache_folder, code_text   # comments and docstrings do not reach the key
    here = Path(__file__).parent
    src = "".join(code_text((here / f).read_text()) for f in _CALIBRATION_CODE if (here / f).exists()).encode()
    labels = sorted(str(p.relative_to(paths.LABELS)) for p in paths.LABELS.glob("*/*.json"))
    blob = json.dumps({"method": method, "tiles": tiles, "cfg": cfg_by_class, "labels": labels,
                       "data": fingerprint("nvidia"), "predictors": cache_folder(),   # how they were trained
                       "committed_weights": reference_weights.digest()},                # or which were loaded
                      sort_keys=True, default=str).encode()
    return hashlib.sha256(src + blob).hexdigest()[:16]


_CAL: dict = {}


def get_calibration(method: str = "neusight", tiles: str = "spec", cfg_by_class: dict | None = None) -> dict:
    """Calibration of lib.calibration.fit_e2e_calibration, cached in memory and under build/cache/calibration/."""
    key = _calibration_key(method, tiles, cfg_by_class)
    if key in _CAL:
        return _CAL[key]
    path = CALIBRATION_CACHE / f"{method}-{key}.json"
    if path.exists():
        cal = json.loads(path.read_text())
    else:
        from .calibration import fit_e2e_calibration
        cal = fit_e2e_calibration(method, tiles, cfg_by_class)
        path.parent.mkdir(parents=True, exist_ok=True)
        paths.write_atomic(path, lambda tmp: tmp.write_text(json.dumps(cal, indent=1)))
    _CAL[key] = cal
    return cal


def apply_calibration(table: pd.DataFrame, factors: dict) -> pd.DataFrame:
    """total_ms scaled by its group's factor (lib.calibration.calibration_group); raw total kept as raw_ms."""
    from .calibration import calibration_group
    f = np.array([factors.get(g, 1.0) for g in calibration_group(table)])
    return table.assign(raw_ms=table["total_ms"], total_ms=table["total_ms"] * f)


def summarize(table: pd.DataFrame) -> dict:
    """{"latency_ms", "forward_ms", "backward_ms", "kernels"} of a predicted table."""
    # a kernel the method cannot predict (li on a GPU without measurements: NaN) makes the sum NaN
    by_phase = table.groupby("phase")["total_ms"].sum(min_count=1)
    if table["total_ms"].isna().any():
        by_phase[:] = np.nan
    fw, bw = float(by_phase.get("fw", 0.0)), float(by_phase.get("bw", 0.0))
    return {"latency_ms": fw + bw, "forward_ms": fw, "backward_ms": bw, "kernels": int(table["count"].sum())}


# A captured table (lib.graph.capture) passed as `kernels` needs these columns: the shapes, which pass, how often.
TABLE_COLUMNS = [*SHAPE_COLS, "phase", "count"]


def forecast_table(model_config, device: Device, batch: int, seq: int, mode: str, *, fusion: bool = False,
                   method: str = "neusight", tiles: str = "spec", kernels: pd.DataFrame | None = None,
                   cfg_by_class: dict | None = None, habitat_cfg: dict | None = None,
                   calibrate: bool = False, seed: int = 0) -> pd.DataFrame:
    """Predicted kernel table of one pass (calibrate: scale by the training-GPU calibration factors).

    Given `kernels` (a captured table), model_config, batch, seq and mode are not read: the table fixes them.
    The CLI's warnings are not raised here: lib.caveats.extrapolation_note, spec_notes and memory_note give them.
    """
    if kernels is None:
        kernels = capture(model_config, batch, seq, mode)
    elif missing := [c for c in TABLE_COLUMNS if c not in kernels]:
        raise ValueError(f"kernels: missing column(s) {missing}; pass a table from lib.graph.capture")
    if fusion:
        kernels = fuse_elementwise(kernels)
    table = predict_table(kernels, device, method, tiles, cfg_by_class, habitat_cfg, seed)
    if calibrate:
        table = apply_calibration(table, get_calibration(method, tiles, cfg_by_class)["factors"])
    return table


# Columns of --kernels-out: where a kernel runs, what it is, and what it costs ('fused': ops merged into it,
# with --fusion; 'raw_ms': total_ms before --calibrate).
KERNEL_TABLE_COLUMNS = ["phase", "layer", "aten", "op_class", "op", "B", "M", "N", "K", "H", "bytes", "shapes",
                        "count", "fused", "pred_ms", "total_ms", "raw_ms"]


KERNEL_TABLE_SUMS = ("count", "total_ms", "raw_ms")   # added up over the rows of one distinct kernel


def write_kernel_table(table: pd.DataFrame, path) -> Path:
    """A predicted kernel table (forecast_table) as CSV, one row per distinct kernel of a block with its op class
    (lib.calibration.CLASSES), atomically."""
    from .calibration import kernel_class
    out = table.assign(op_class=kernel_class(table["op"]))
    out = out[[c for c in KERNEL_TABLE_COLUMNS if c in out]]
    # the graph has a row per call site: the same kernel called at several places of a block is one row here
    key = [c for c in out if c not in KERNEL_TABLE_SUMS]
    out = out.groupby(key, dropna=False, sort=False)[[c for c in KERNEL_TABLE_SUMS if c in out]].sum().reset_index()
    out = out[[c for c in KERNEL_TABLE_COLUMNS if c in out]]
    return paths.write_atomic(path, lambda tmp: out.to_csv(tmp, index=False))


def forecast(model_config, device: Device, batch: int, seq: int, mode: str, *, fusion: bool = False,
             method: str = "neusight", tiles: str = "spec", kernels: pd.DataFrame | None = None,
             cfg_by_class: dict | None = None, habitat_cfg: dict | None = None,
             calibrate: bool = False, seed: int = 0) -> dict:
    """{"latency_ms", "forward_ms", "backward_ms", "kernels"} for one model, GPU, batch and sequence.

    Pass `kernels` (a captured table) to reuse one capture across devices and methods; batch, seq and mode
    are then the table's, not read. No warnings here (lib.caveats has the CLI's).
    """
    return summarize(forecast_table(model_config, device, batch, seq, mode, fusion=fusion, method=method,
                                    tiles=tiles, kernels=kernels, cfg_by_class=cfg_by_class,
                                    habitat_cfg=habitat_cfg, calibrate=calibrate, seed=seed))


def forecast_sweep(model_config, devices, batches, seq: int, mode: str, *, method: str = "neusight",
                   fusion: bool = False, tiles: str = "spec", cfg_by_class: dict | None = None,
                   calibrate: bool = False, habitat_cfg: dict | None = None, seed: int = 0) -> pd.DataFrame:
    """One row per (device, distinct batch), in that order: the forecast keys. One capture per batch; the unique
    kernel shapes of all batches are predicted on all devices in one call (lib.kernels.predict_devices: the same
    forecasts as one device at a time up to float32 last bits). devices: Devices (or one Device); the other
    arguments as forecast's."""
    devices = [devices] if isinstance(devices, Device) else list(devices)
    if not (batches := list(batches)):
        raise ValueError("batches: give at least one batch size")
    tables = {}
    for b in batches:   # lib.model_config.check_args refuses a batch that is not a positive integer
        k = capture(model_config, b, seq, mode)
        tables[int(b)] = fuse_elementwise(k) if fusion else k
    from .kernels import predict_devices
    uniq = pd.concat([t[SHAPE_COLS] for t in tables.values()], ignore_index=True).fillna(-1.0).drop_duplicates()
    uniq = uniq.reset_index(drop=True)
    factors = None
    if calibrate:
        factors = get_calibration(method, tiles, cfg_by_class)["factors"]
    pred_by_device = predict_devices(uniq.replace(-1.0, np.nan), devices, method, tiles, cfg_by_class, habitat_cfg, seed)
    # per batch, each kernel's row in uniq and its traffic scale: the same on every device
    where = {b: t[SHAPE_COLS].fillna(-1.0).merge(uniq.assign(row=np.arange(len(uniq))), on=SHAPE_COLS,
                                                 how="left")["row"].to_numpy() for b, t in tables.items()}
    scale = {b: traffic_scale(t) for b, t in tables.items()}
    rows = []
    for dev, pred_ms in zip(devices, pred_by_device.T):
        for b, t in tables.items():
            pred = pred_ms[where[b]] * scale[b]
            table = t.assign(pred_ms=pred, total_ms=pred * t["count"].to_numpy())
            if factors is not None:
                table = apply_calibration(table, factors)
            rows.append({"device": dev.name, "batch": int(b), "seq": seq, "mode": mode, **summarize(table)})
    return pd.DataFrame(rows)


def _why_not_forecast(table: pd.DataFrame, result: dict, device: Device, method: str, device_path: str) -> str | None:
    """Why the CLI's forecast is no answer (li without measurements, an overflow, habitat's cap), else None."""
    from .baselines import MAX_LOG_MS, habitat_capped, li_missing
    from .calibration import kernel_class
    from .kernel_input import MEM_OP
    unpredicted = table["pred_ms"].isna().to_numpy()
    if method == "li" and unpredicted.any():
        return li_missing(device.name, kernel_class(table.loc[unpredicted, "op"]))
    if not np.isfinite(result["latency_ms"]):
        return f"the forecast is not finite; check the spec values in {device_path}"
    if method != "habitat":
        return None
    # habitat holds a far extrapolation at its cap, exp(MAX_LOG_MS) ms per kernel before the traffic factor (op 'mem' is
    # priced by bandwidth, not by habitat)
    capped = habitat_capped(table["pred_ms"].to_numpy() / traffic_scale(table)) & (table["op"] != MEM_OP).to_numpy()
    if capped.any():
        return (f"a kernel's predicted latency overflows (habitat's cap of {np.exp(MAX_LOG_MS):.0e} ms): the model's "
                f"shapes or the spec values in {device_path} lie far outside its training data")
    return None


def input_error(model_config, error: Exception) -> str:
    """The one-line message of a forecast CLI (this one, lib.sweep) for an error its inputs raised (notebook 05)."""
    from .kernel_input import KernelInputError
    if isinstance(error, KernelInputError):   # no kernel CSV here: the config's sizes made the kernel
        return (f"error: {model_config}: the model's graph has a kernel the predictors cannot take ({error}); check "
                "the config's sizes")
    return f"error: {error}"


def main(argv=None) -> int:
    p = Parser(prog="python -m lib.forecast", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, type=model_arg,
                   help="Hugging Face config.json of a BERT, GPT-2, OPT, SwitchTransformer, Llama-family, Gemma, Phi-3, "
                        "GPT-NeoX or Mixtral model (e.g. data/neusight/data/DLmodel_configs/gpt3_27.json, "
                        "data/models/llama3_8b.json), or the name of one there (gpt3_27, llama3_8b)")
    p.add_argument("--device", required=True, type=device_arg,
                   help="device spec JSON (dataset format), or a known GPU's name (H100, Tesla T4, NVIDIA_H200)")
    p.add_argument("--batch", type=int, required=True, help="sequences per step")
    p.add_argument("--seq", type=int, required=True, help="tokens per sequence (<= the model's maximum)")
    p.add_argument("--mode", choices=("inference", "training"), required=True,
                   help="one forward pass, or forward + backward (no optimizer step)")
    p.add_argument("--fusion", action="store_true",
                   help="fuse chains of element-wise ops, and fold them into a following softmax/layernorm")
    p.add_argument("--method", choices=METHODS, default="neusight",
                   help="kernel predictor: NeuSight (default) or a baseline")
    p.add_argument("--calibrate", action="store_true",
                   help="scale by factors fitted on the training GPUs' end-to-end labels (lib.calibration)")
    p.add_argument("--kernels-out", metavar="PATH",
                   help="also write the predicted kernel table (one row per distinct kernel) to this CSV file "
                        "(not '-': standard output carries the JSON line)")
    args = p.parse_args(argv)
    if args.kernels_out == "-":   # standard output carries the JSON line
        p.error("argument --kernels-out: '-' (standard output) is not supported, standard output carries the "
                "forecast's JSON line; give a file path")
    for name, value in (("--batch", args.batch), ("--seq", args.seq)):
        if value < 1:
            print(f"error: {name} must be a positive integer, got {value}", file=sys.stderr)
            return 2
    if args.kernels_out and (problem := paths.output_problem(args.kernels_out, (args.model, args.device))):
        print(f"error: --kernels-out {args.kernels_out}: {problem}", file=sys.stderr)
        return 2
    from .data import DataError
    from .kernels import vendor_models
    try:
        device = load_device(args.device)
        # --calibrate's factors were fitted to the NVIDIA-trained models' forecasts: it keeps those on any GPU
        table = forecast_table(args.model, device, args.batch, args.seq, args.mode, fusion=args.fusion,
                               method=args.method, calibrate=args.calibrate,
                               cfg_by_class=None if args.calibrate else vendor_models(device, args.method))
        result = summarize(table)
        parameters = parameter_count(args.model)
        saved_gb = activation_gb(args.model, args.batch, args.seq) if args.mode == "training" else None
    except (DataError, DeviceError, GraphError, ValueError) as e:
        print(input_error(args.model, e), file=sys.stderr)
        return 2
    if why := _why_not_forecast(table, result, device, args.method, args.device):
        print(f"error: method '{args.method}' cannot forecast {device.name}: {why}", file=sys.stderr)
        return 2
    if args.kernels_out:
        try:
            write_kernel_table(table, args.kernels_out)
        except OSError as e:
            print(f"error: --kernels-out {args.kernels_out}: {e.strerror or e}", file=sys.stderr)
            return 2
    for note in (extrapolation_note(device), *spec_notes(device),
                 memory_note(parameters, args.mode, device, saved_gb), fusion_note(args.fusion, args.mode)):
        if note:
            print(f"warning: {note}", file=sys.stderr)
    if note := head_note(args.model, args.mode):
        print(f"note: {note}", file=sys.stderr)
    try:
        print(json.dumps(result), flush=True)
    except OSError as e:   # a full disk, a reader that quit (BrokenPipeError): the run gave no answer
        stdout_failed(e, args.kernels_out)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
