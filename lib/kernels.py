"""Kernel latency on any GPU from its spec: NeuSight and the baselines, API and CLI (notebook 04).

    python -m lib.kernels --device DEVICE.json --input KERNELS.csv --output PRED.csv \
        [--method neusight|roofline|habitat|li] [--tiles spec|oracle|autotune|classifier|hybrid|ranged|hedged]
        [--config CONFIGS.json] [--dtype fp32|fp16]

KERNELS.csv: `OPName` (or `op`) and the dimension columns (B,M,N,K for bmm/linear; B,H for
the others; `bytes` for op 'mem'); other columns are carried through, but a `dtype`, `precision` or `data_type`
column must say fp32 (or be blank): the predictors learned fp32 kernels only. PRED.csv = input + pred_ms.
--dtype fp16 forecasts GEMMs (bmm, linear) on tensor cores instead, by the fp32 predictors on an equivalent device,
no slower than the fp32 forecast (lib.precision: NeuSight or roofline; the fp16 peak from the device JSON's
`Fp16TensorFLOPs` or lib.precision's table), an extrapolation that warns on stderr; a precision column must then say
fp16.
--tiles oracle also reads `kernel_name` and, for a name without a tile, `grid_x`, `grid_y` (AMD: `block_x`); a
dataset CSV names them as lib.data.RENAME does (`Kernel Name`, `Grid x`, ...) and is an input as it is. KERNELS.csv
may be a pipe (/dev/stdin): it is read once.
A linear row with B > 1 is forecast as the one GEMM torch runs for it, over B*M rows (flatten_linear).
--config: {op class: training config} for the NeuSight MLPs, used on every GPU (default:
lib.selection's DEFAULT_CONFIGS for GPUs never trained on, KNOWN_CONFIGS for the five training
GPUs; the trained weights are loaded from figures/predictors/ or cached under build/predictors/; for a GPU never trained on, the classes with
`envelope` on are capped by the forecasts of the training GPUs it dominates, lib.envelope; an AMD GPU without --config:
lib.amd's models, trained on the AMD MI100 and MI210, vendor_models). The result goes to the file
(`--output -`: to standard output); progress to stderr; bad input exits non-zero with one line (lib.kernel_input
reads and checks it). A GPU whose machine balance lies outside the training GPUs' gets a one-line warning on stderr
(lib.caveats.extrapolation_note), and so does a spec field that looks like other units (lib.caveats.spec_notes), and
kernels whose tensors alone exceed the GPU's memory (lib.caveats.kernel_memory_note).
Kernels of kind 'mem' (copies, views, anything without a predictor) are memory-bound:
    latency_ms = bytes / (mem_bw_gbps * 1e9) * 1e3
"""
from __future__ import annotations

import sys
from dataclasses import fields

import numpy as np
import pandas as pd

from . import paths
from .caveats import extrapolation_note, kernel_memory_note, spec_notes
from .cli import Parser, device_arg
from .data import OP_CLASS, DataError
from .devices import Device, DeviceError, device_by_name, load_device
from .envelope import cap
from .features import add_features
from .kernel_input import (INPUT_NAMES, MEM_OP, ORACLE_COLUMNS, KernelInputError, as_fp16, check_kernels,
                           other_gpus, read_config, read_kernels)
from .roofline import add_roofline
from .ops import GEMM_DIMS, GEMM_OPS
from .precision import PrecisionError, fp16_device, fp16_note, predict_fp16, unaligned_note
from .tiles import gemm_tile_from_name

METHODS = ("neusight", "roofline", "habitat", "li")
TILES = ("spec", "oracle", "autotune", "classifier", "hybrid", "ranged", "hedged")
# what tiles='spec' means, per GEMM class: the autotuner (chosen in notebook 04 on ID validation), with the classifier's
# tile for narrow GEMMs (amendment 8, lib.selection; lib.tile_choice.narrow_gemms) on a GPU within the spec range of
# the GPUs the classifier was fitted on (amendment 9, lib.tile_choice.within_range); beyond that range an FC's narrow
# GEMM is forecast from both tiles (amendment 10, adopted for FC only)
SPEC_TILES = {"BMM": "ranged", "FC": "hedged"}
# The columns a device's spec adds to a kernel table (Device.spec_columns): equal in two rows, the same GPU
SPEC_KEY = ["device" if f.name == "name" else f.name for f in fields(Device) if f.name != "path"]


# torch runs a linear layer on a [B, M, N] input as one GEMM over its B*M rows (F.linear flattens the
# leading dimensions; the weight is shared), so (B, M) -> (1, B*M): the launched grid has
#     num_tiles = ceil(B*M / tile_m) * ceil(K / tile_n),   not   B * ceil(M / tile_m) * ceil(K / tile_n)
# FLOPs and bytes are unchanged (lib.roofline already counts one weight). Every linear row of the dataset
# and of lib.graph_ops has B = 1.
def flatten_linear(df: pd.DataFrame) -> pd.DataFrame:
    """Copy of a checked kernel table with every linear row's B folded into M (B = 1; notebook 04)."""
    if "B" not in df.columns:
        return df
    linear = (df["op"] == "linear").to_numpy() & (df["B"].to_numpy(float) != 1)
    if not linear.any():
        return df
    out = df.copy()
    out.loc[linear, "M"] = out.loc[linear, "B"] * out.loc[linear, "M"]
    out.loc[linear, "B"] = 1
    return out


def _with_spec(df: pd.DataFrame, device: Device) -> pd.DataFrame:
    out = df.copy()
    for k, v in device.spec_columns().items():
        out[k] = v
    return out


def _neusight(df: pd.DataFrame, tiles: str | dict, cfg_by_class: dict | None, seed: int = 0) -> np.ndarray:
    from .predictors import predict_featured
    from .tile_choice import (autotune_tiles, classifier_gpus, classify_tiles, named_tiles, narrow_gemms,
                              tile_candidates, tile_forest, within_range)
    predict = lambda feat: predict_featured(feat, cfg_by_class, seed)
    if tiles == "oracle":
        return predict(add_features(df, tiles="oracle"))
    gemm = df["op"].isin(GEMM_OPS).to_numpy()
    models = _gemm_models(cfg_by_class) if gemm.any() else cfg_by_class   # the tile fields their models carry
    forest = tile_forest(models)     # GEMM predictors with their own classifier (lib.amd): 'spec' is it
    # GEMM predictors with their own tiles but no classifier (lib.amd's before amendment A2) keep the autotuner:
    # amendment 8's hybrid was scored on NVIDIA's training GPUs, and its classifier knows NVIDIA's tiles only. A
    # classifier over NVIDIA's tiles (lib.measured_training's, fitted with one more GPU; a held-out GPU's model's,
    # fitted with one fewer, lib.predictors.held_out_tiles) serves the hybrid instead.
    if tiles == "spec":
        named = named_tiles(models)
        tiles = "classifier" if forest is not None and named else "autotune" if named else SPEC_TILES
    out = np.full(len(df), np.nan)
    g = df[gemm]
    # a rule per GEMM row (tiles='spec': SPEC_TILES, one per class)
    rule = np.where(g["op"].to_numpy() == "linear", tiles["FC"], tiles["BMM"]) if isinstance(tiles, dict) else \
        np.full(len(g), tiles)
    # hybrid: the classifier for narrow GEMMs, the autotuner for the others; ranged: the hybrid within the
    # classifier's spec range, the autotuner beyond it; hedged: the ranged rule, but a narrow GEMM beyond the range is
    # forecast from both tiles:  latency = sqrt(latency(classifier's tile) * latency(autotuner's tile))
    narrow = narrow_gemms(g)
    ranged = np.isin(rule, ("ranged", "hedged")) & narrow
    within = within_range(g, classifier_gpus(models)) if ranged.any() else np.ones(len(g), bool)
    classified = (rule == "classifier") | (narrow & (rule == "hybrid")) | (ranged & within)
    hedged = ranged & (rule == "hedged") & ~within
    gemm_out = np.full(len(g), np.nan)
    if (~classified).any():
        gemm_out[~classified] = autotune_tiles(g[~classified], predict, tile_candidates(models))[2]
    if (by_classifier := classified | hedged).any():
        c = g[by_classifier]
        tile_m, tile_n = classify_tiles(c) if forest is None else \
            classify_tiles(c, forest, tile_candidates(models))
        ms = predict(add_features(c.assign(tile_m=tile_m, tile_n=tile_n), tiles="given"))
        gemm_out[classified] = ms[classified[by_classifier]]
        gemm_out[hedged] = np.sqrt(gemm_out[hedged] * ms[hedged[by_classifier]])
    out[gemm] = gemm_out
    if (~gemm).any():
        out[~gemm] = predict(add_features(df[~gemm].assign(tile_m=np.nan, tile_n=np.nan), tiles="given"))
    return out


def _gemm_models(cfg_by_class: dict | None) -> dict | None:
    """cfg_by_class with its GEMM classes' configs replaced by their models (lib.predictors.get_predictor, loaded once
    per process), whose tile fields choose the spec-only tiles: lib.tile_choice reads them off models only (notebook 04)."""
    if not cfg_by_class:
        return cfg_by_class
    from .predictors import get_predictor
    return {**cfg_by_class, **{c: get_predictor(c, cfg_by_class[c]) for c in ("BMM", "FC") if cfg_by_class.get(c)}}


def _oracle_rows(df: pd.DataFrame, vendor: str) -> pd.DataFrame:
    """The rows to predict with tiles='oracle', with a block_x column (lib.tiles reads it on AMD only); a
    KernelInputError naming the first GEMM row (index label) whose tile neither its kernel_name nor its grid gives.
    Only GEMM rows read a kernel name: the other ops' tiles follow PyTorch's launch rules (lib.tiles)."""
    out = df if "block_x" in df.columns else df.assign(block_x=np.nan)
    gemm = df["op"].isin(GEMM_OPS).to_numpy()
    if not gemm.any():
        return out
    if "kernel_name" not in df.columns:
        raise KernelInputError("tiles='oracle' needs a 'kernel_name' column for GEMM rows (the target's profiled "
                               "kernels)")
    unnamed = gemm & df["kernel_name"].map(gemm_tile_from_name).isna().to_numpy()
    if not unnamed.any():
        return out
    dataset_name = {ours: theirs for theirs, ours in INPUT_NAMES.items()}
    for col in ("grid_x", "grid_y", "block_x") if vendor == "amd" else ("grid_x", "grid_y"):
        x = pd.to_numeric(df[col], errors="coerce").to_numpy(float) if col in df.columns else np.full(len(df), np.nan)
        if (bad := np.flatnonzero(unnamed & ~(np.isfinite(x) & (x > 0)))).size:
            name = df["kernel_name"].iloc[bad[0]]
            raise KernelInputError(f"row {df.index[bad[0]]}: tiles='oracle' finds no GEMM tile in kernel_name "
                                   f"{repr(name) if isinstance(name, str) and name else '(blank)'}, and the "
                                   f"launch-grid fallback needs a positive number in column '{col}' "
                                   f"(or '{dataset_name[col]}')")
    return out


def predict_kernels(df: pd.DataFrame, device: Device, method: str = "neusight", tiles: str = "spec",
                    cfg_by_class: dict | None = None, habitat_cfg: dict | None = None, seed: int = 0) -> np.ndarray:
    """Latency (ms) per row on `device`, read from its spec (+ training-GPU data) only.

    df: columns op, B, M, N, K, H (and 'bytes' for op 'mem'; 'kernel_name' for tiles='oracle').
    method: neusight | roofline | habitat | li (li: NaN for the ops without training-split rows on the device).
    tiles (neusight): spec (= SPEC_TILES, or the classifier GEMM predictors carry: lib.amd) | autotune | classifier |
        hybrid (the classifier for narrow GEMMs, lib.tile_choice.narrow_gemms; the autotuner for the others) |
        ranged (the hybrid on a GPU within the classifier's spec range, lib.tile_choice.within_range; else the
        autotuner) | hedged (the ranged rule, but beyond the range a narrow GEMM takes the geometric mean of its
        classifier-tile and autotuner-tile forecasts) | oracle (target's kernel names).
    cfg_by_class (neusight) and habitat_cfg (habitat): training configs; None = the defaults.
    seed (neusight): the training seed of the default configs (0: the committed results' models).
    """
    return predict_devices(df, [device], method, tiles, cfg_by_class, habitat_cfg, seed)[:, 0]


def predict_devices(df: pd.DataFrame, devices, method: str = "neusight", tiles: str = "spec",
                    cfg_by_class: dict | None = None, habitat_cfg: dict | None = None, seed: int = 0) -> np.ndarray:
    """Latency (ms) of every row (axis 0) on every device (axis 1), as predict_kernels gives it, with each model run
    once over all devices' rows (lib.forecast.forecast_sweep): per call a model costs more than its rows do.
    Several devices at once can differ from one at a time in float32 last bits (lib.envelope.cap)."""
    devices = list(devices)
    if not devices:
        raise KernelInputError("devices: give at least one device")
    if method not in METHODS:
        raise KernelInputError(f"unknown method {method!r}; known: {', '.join(METHODS)}")
    if tiles not in TILES:
        raise KernelInputError(f"unknown tiles {tiles!r}; known: {', '.join(TILES)}")
    for device in devices:
        if not isinstance(device, Device):
            raise KernelInputError(f"device must be a lib.devices.Device (load_device(path) or device_by_name(name)), "
                                   f"got {type(device).__name__}")
    if not isinstance(df, pd.DataFrame):
        raise KernelInputError(f"kernels must be a pandas DataFrame, got {type(df).__name__}")
    df = df.rename(columns={theirs: ours for theirs, ours in INPUT_NAMES.items() if ours not in df})   # 'OPName', ...
    base = flatten_linear(check_kernels(df).reset_index(drop=True))
    # one block of rows per device, its spec in every row
    blocks = [_with_spec(base, d) for d in devices]
    table = blocks[0] if len(blocks) == 1 else pd.concat(blocks, ignore_index=True)
    block = np.repeat(np.arange(len(devices)), len(base))   # each row's device, by position in `devices`
    out = np.full(len(table), np.nan)
    mem = (table["op"] == MEM_OP).to_numpy()
    # latency_ms = bytes / (mem_bw_gbps * 1e9) * 1e3
    out[mem] = table.loc[mem, "bytes"].to_numpy(float) / (table.loc[mem, "mem_bw_gbps"].to_numpy(float) * 1e6)
    rest = table[~mem]
    if len(rest) == 0:
        return out.reshape(len(devices), len(base)).T
    if method == "roofline":
        out[~mem] = add_roofline(rest)["roofline_ms"].to_numpy()
    elif method == "habitat":
        from .baselines import habitat_predict
        out[~mem] = habitat_predict(rest, habitat_cfg)
    elif method == "li":
        from .baselines import li_predict
        for i, device in enumerate(devices):   # each device's own coefficients
            rows = np.flatnonzero(~mem & (block == i))
            out[rows] = li_predict(table.iloc[rows], device.name, device.vendor)
    else:
        from .predictors import forecast_floor_ms
        if tiles == "oracle":
            for vendor in sorted({d.vendor for d in devices}):   # the launch-grid fallback reads the vendor
                rest = _oracle_rows(rest, vendor)
        # oracle: rows alike but for their kernel name or launch grid can have other tiles; rows of two GPUs are
        # kept apart by their spec columns (left out for one GPU: grouping by them costs a few percent on a large
        # table)
        extra = [c for c in ORACLE_COLUMNS if c in rest.columns] if tiles == "oracle" else []
        neusight = lambda t, key: _dedup(t, key, lambda u: _neusight(u, tiles, cfg_by_class, seed))
        floor = lambda t: forecast_floor_ms(add_roofline(t), cfg_by_class, seed)
        # amendment 6: no kernel slower than on a training GPU whose spec this one dominates (lib.envelope); one
        # device is passed as itself, which spares cap a Python pass over every row
        per_row = devices[0] if len(devices) == 1 else [devices[i] for i in block[~mem]]
        out[~mem] = cap(rest, neusight(rest, extra + (SPEC_KEY if len(set(devices)) > 1 else [])), per_row, cfg_by_class,
                        lambda pairs: _on_gpus(pairs, lambda t: neusight(t, extra + SPEC_KEY)),
                        lambda pairs: _on_gpus(pairs, floor))
    return out.reshape(len(devices), len(base)).T


def _on_gpus(pairs: list, predict) -> list[np.ndarray]:
    """[(kernels, GPU), ...] -> predict(all kernels, each with its GPU's spec) split back per pair (lib.envelope)."""
    table = pd.concat([_with_spec(t, g) for t, g in pairs], ignore_index=True)
    return np.split(predict(table), np.cumsum([len(t) for t, _ in pairs])[:-1])


def _dedup(df: pd.DataFrame, extra: list, predict) -> np.ndarray:
    """predict(unique rows) spread back to every row: identical kernels are predicted once."""
    cols = [c for c in ("op", *GEMM_DIMS, "H", *extra) if c in df.columns]
    codes = df.groupby(cols, sort=False, dropna=False).ngroup().to_numpy()
    first = np.unique(codes, return_index=True)[1]
    if len(first) == len(df):
        return predict(df)
    return predict(df.iloc[first].reset_index(drop=True))[codes]


def predict_by_device(df: pd.DataFrame, method: str = "neusight", tiles: str = "spec",
                      cfg_by_class: dict | None = None, habitat_cfg: dict | None = None, seed: int = 0) -> np.ndarray:
    """predict_kernels over a table with a 'device' column (e.g. load_kernels()), one device at a time."""
    out = np.full(len(df), np.nan)
    for name, rows in df.groupby("device").indices.items():
        out[rows] = predict_kernels(df.iloc[rows], device_by_name(name), method, tiles, cfg_by_class, habitat_cfg,
                                    seed)
    return out


def vendor_models(device: Device, method: str = "neusight") -> dict | None:
    """The CLIs' NeuSight models for a device: lib.amd's (trained on the AMD MI100 and MI210) for an AMD GPU, else None
    (the defaults, trained on NVIDIA GPUs) (notebook 06)."""
    if device.vendor != "amd" or method != "neusight":
        return None
    from .amd import amd_predictors
    return amd_predictors()


# habitat holds a far extrapolation at its cap, exp(MAX_LOG_MS) ms (lib.baselines): an overflow too, not a forecast
def _check_habitat_cap(pred: np.ndarray, kernels: pd.DataFrame, input_path: str, device_path: str) -> None:
    """KernelInputError naming the first row (not op 'mem') whose habitat latency is the cap."""
    from .baselines import MAX_LOG_MS, habitat_capped
    capped = habitat_capped(pred) & (kernels["op"] != MEM_OP).to_numpy()
    if capped.any():
        raise KernelInputError(f"{input_path}: row {int(np.flatnonzero(capped)[0])}: the predicted latency overflows "
                               f"(habitat's cap of {np.exp(MAX_LOG_MS):.0e} ms): the dimensions or the spec values in "
                               f"{device_path} lie far outside its training data")


def main(argv=None) -> int:
    ap = Parser(prog="python -m lib.kernels", description=__doc__.splitlines()[0])
    ap.add_argument("--device", required=True, type=device_arg,
                    help="device JSON (dataset format), or a known GPU's name (H100, Tesla T4, NVIDIA_H200)")
    ap.add_argument("--input", required=True, help="kernel CSV: OPName + B,M,N,K (bmm/linear), B,H (others) or bytes (mem) ('-': standard input)")
    ap.add_argument("--output", required=True, help="where to write the input + pred_ms ('-': standard output)")
    ap.add_argument("--method", default="neusight", choices=METHODS,
                    help="NeuSight (default) or a baseline; li needs training-split measurements of the target")
    ap.add_argument("--tiles", default="spec", choices=TILES,
                    help="GEMM tile rule: spec (default, from the spec only: the ranged rule for BMM, the hedged "
                         "one for FC); oracle needs kernel_name")
    ap.add_argument("--config", help="JSON {op class: training config} for the NeuSight MLPs")
    ap.add_argument("--dtype", default="fp32", choices=("fp32", "fp16"),
                    help="fp16: GEMMs on tensor cores, by the fp32 predictors on an equivalent device (lib.precision)")
    args = ap.parse_args(argv)
    if args.output != "-" and (problem := paths.output_problem(args.output, (args.input, args.device, args.config))):
        print(f"error: --output {args.output}: {problem}", file=sys.stderr)
        return 2
    try:
        spec = device = load_device(args.device)
        cfg_by_class = read_config(args.config) if args.config else vendor_models(device, args.method)
        table, as_read = read_kernels(args.input)
        kernels = table.rename(columns=INPUT_NAMES)
        try:
            predict = lambda rows, dev: predict_kernels(rows, dev, args.method, args.tiles, cfg_by_class)
            with np.errstate(over="ignore", invalid="ignore"):   # overflow is reported just below
                if args.dtype == "fp16":
                    kernels, peak = as_fp16(kernels, spec, args.device, args.method)
                    device = fp16_device(spec, peak)
                    pred = predict_fp16(kernels, spec, peak, predict)
                else:
                    pred = predict(kernels, device)
        except KernelInputError as e:
            raise KernelInputError(f"{args.input}: {e}") from None
        # NaN is Li et al.'s "no measurements to fit"; any other non-finite latency is an overflow
        overflow = np.isinf(pred) if args.method == "li" else ~np.isfinite(pred)
        if overflow.any():
            raise KernelInputError(f"{args.input}: row {int(np.flatnonzero(overflow)[0])}: dimensions too "
                                   f"large, the predicted latency overflows")
        if args.method == "habitat":
            _check_habitat_cap(pred, kernels, args.input, args.device)
        if args.method == "li" and np.isnan(pred).any():
            from .baselines import li_missing
            missing = kernels["op"][np.isnan(pred)].astype(str).map(OP_CLASS)
            print(f"note: {li_missing(device.name, missing)}; pred_ms is NaN for {int(np.isnan(pred).sum())} of "
                  f"{len(pred)} rows", file=sys.stderr)
        if "pred_ms" in table.columns:
            print(f"note: {args.input} has a pred_ms column; the output replaces it", file=sys.stderr)
        if other := other_gpus(table, spec):
            print(f"note: {args.input}'s {other[0]} column names other GPUs ({', '.join(other[1][:3])}"
                  f"{', ...' if len(other[1]) > 3 else ''}); every row is forecast for {spec.name} (--device)",
                  file=sys.stderr)
    except (KernelInputError, DeviceError, DataError, PrecisionError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        if args.output == "-":
            as_read.assign(pred_ms=pred).to_csv(sys.stdout, index=False)
        else:
            paths.write_atomic(args.output, lambda tmp: as_read.assign(pred_ms=pred).to_csv(tmp, index=False))
    except OSError as e:
        print(f"error: --output {args.output}: cannot write ({e.strerror or e})", file=sys.stderr)
        return 2
    fp16_notes = (fp16_note(device), unaligned_note(kernels)) if args.dtype == "fp16" else ()
    memory = kernel_memory_note(kernels, spec, 2 if args.dtype == "fp16" else 4)
    for note in (extrapolation_note(spec), *spec_notes(spec), *fp16_notes, memory):
        if note:
            print(f"warning: {note}", file=sys.stderr)
    print(f"wrote {len(table)} prediction{'' if len(table) == 1 else 's'} to "
          f"{'standard output' if args.output == '-' else args.output}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
