"""Kernel latency on any GPU from its spec: NeuSight and the baselines, API and CLI (notebook 04).

    python -m lib.kernels --device DEVICE.json --input KERNELS.csv --output PRED.csv \
        [--method neusight|roofline|habitat|li] [--tiles spec|oracle|autotune|classifier] [--config CONFIGS.json]
        [--dtype fp32|fp16]

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
(`--output -`: to standard output); progress to stderr; bad input exits non-zero with one line. A GPU whose machine
balance lies outside the training GPUs' gets a one-line warning on stderr (lib.caveats.extrapolation_note), and so
does a spec field that looks like other units (lib.caveats.spec_notes).
Kernels of kind 'mem' (copies, views, anything without a predictor) are memory-bound:
    latency_ms = bytes / (mem_bw_gbps * 1e9) * 1e3
"""
from __future__ import annotations

import io
import json
import sys
import warnings
from dataclasses import fields
from pathlib import Path

import numpy as np
import pandas as pd

from . import paths
from .caveats import extrapolation_note, spec_notes
from .cli import Parser, file_path
from .data import OP_CLASS, RENAME, DataError
from .devices import Device, DeviceError, device_by_name, load_device
from .envelope import cap
from .features import add_features
from .roofline import add_roofline
from .ops import GEMM_DIMS, GEMM_OPS, VEC_DIMS
from .precision import (FP16_NAMES, FP16_OPS, PrecisionError, fp16_device, fp16_note, predict_fp16, tensor_gflops,
                        unaligned_note)
from .tiles import gemm_tile_from_name

METHODS = ("neusight", "roofline", "habitat", "li")
TILES = ("spec", "oracle", "autotune", "classifier")
SPEC_TILES = "autotune"          # what tiles='spec' means (chosen in notebook 04 on ID validation)
MEM_OP = "mem"
KNOWN_OPS = (*OP_CLASS, MEM_OP)
# tiles='oracle' reads a GEMM's tile from its kernel name (lib.tiles); a name without one falls back to the launch grid,
#     tile_n = ceil(K / grid_x),  tile_m = ceil(M / grid_y)     (AMD: grid_x counts work-items, so grid_x / block_x)
ORACLE_COLUMNS = ("kernel_name", "grid_x", "grid_y", "block_x")
# The columns a prediction reads, under their dataset CSV names too (lib.data.RENAME): a dataset file is an input as it is
INPUT_NAMES = {theirs: ours for theirs, ours in RENAME.items() if ours in ("op", *ORACLE_COLUMNS)}
# The columns a device's spec adds to a kernel table (Device.spec_columns): equal in two rows, the same GPU
SPEC_KEY = ["device" if f.name == "name" else f.name for f in fields(Device) if f.name != "path"]


class KernelInputError(ValueError):
    """A kernel table that cannot be predicted; the message names the column or op."""


def check_kernels(df: pd.DataFrame) -> pd.DataFrame:
    """Validated copy of a kernel table: known ops, required positive dims per op kind."""
    if "op" not in df.columns:
        raise KernelInputError("missing column 'op' (or 'OPName')")
    if df["op"].isna().any():
        raise KernelInputError(f"row {int(np.flatnonzero(df['op'].isna())[0])}: no op name in column 'op' (or 'OPName')")
    ops = df["op"].astype(str)
    unknown = sorted(set(ops.unique()) - set(KNOWN_OPS))
    if unknown:
        raise KernelInputError(f"unknown op(s) {unknown[:5]}; known: {', '.join(KNOWN_OPS)}")
    _check_precision(df)
    out = df.copy()
    out["op"] = ops
    gemm = ops.isin(GEMM_OPS).to_numpy()
    mem = (ops == MEM_OP).to_numpy()
    for rows, dims, what in ((gemm, GEMM_DIMS, "bmm/linear"), (~gemm & ~mem, VEC_DIMS, "vector ops"),
                             (mem, ("bytes",), "op 'mem'")):
        if not rows.any():
            continue
        for col in dims:
            if col not in out.columns:
                raise KernelInputError(f"missing column '{col}' (needed by {what})")
            x = pd.to_numeric(out[col], errors="coerce").to_numpy(float, copy=True)
            x[_booleans(out[col])] = np.nan   # True is not the dimension 1
            # bytes: any number >= 0; a tensor dimension: a whole number >= 1
            ok = np.isfinite(x) & ((x >= 0) if col == "bytes" else (x >= 1) & (x == np.round(x)))
            bad = rows & ~ok
            if bad.any():
                kind = "a number >= 0" if col == "bytes" else "a positive integer"
                raise KernelInputError(f"column '{col}' must be {kind} for {what} "
                                       f"(row {int(np.flatnonzero(bad)[0])})")
    for col in ("B", "M", "N", "K", "H", "bytes"):
        out[col] = pd.to_numeric(out[col], errors="coerce") if col in out.columns else np.nan
    return out


# Every kernel the predictors learned from ran in fp32 (TF32 off), so a column asking for another precision cannot be
# honoured: it is an error, not a column carried through while the forecast stays fp32.
PRECISION_COLUMNS = ("dtype", "precision", "data_type")
FP32_NAMES = ("fp32", "float32", "torch.float32", "float", "f32", "single")


def _check_precision(df: pd.DataFrame, names: tuple = FP32_NAMES) -> None:
    """KernelInputError naming the first row whose dtype/precision column (any case) names anything but `names`
    (fp32's, or lib.precision.FP16_NAMES under --dtype fp16)."""
    for col in _precision_columns(df):
        text = df[col].astype(str).str.strip().str.lower()
        bad = df[col].notna().to_numpy() & (text != "").to_numpy() & ~text.isin(names).to_numpy()
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise KernelInputError(
                f"column {col!r} asks for {df[col].iloc[i]!r} (row {i}): " +
                ("the predictors learned fp32 kernels only (TF32 off); drop the column or give fp32 (--dtype fp16: "
                 "GEMMs on tensor cores)" if names == FP32_NAMES else f"--dtype says {names[0]}"))


def _precision_columns(df: pd.DataFrame) -> list:
    """The columns of df named as PRECISION_COLUMNS, in any case."""
    return [c for c in df.columns if str(c).strip().lower() in PRECISION_COLUMNS]


def _as_fp16(kernels: pd.DataFrame, device: Device, device_path: str, method: str) -> tuple[pd.DataFrame, float]:
    """(kernels, fp16 tensor peak in GFLOP/s) for --dtype fp16: GEMM rows only, any precision column saying fp16
    (then dropped), and the peak from the device JSON or lib.precision's table."""
    if method not in ("neusight", "roofline"):
        raise KernelInputError(f"--dtype fp16 forecasts with neusight or roofline, not {method}")
    _check_precision(kernels, FP16_NAMES)
    if "op" in kernels.columns:
        other = ~kernels["op"].astype(str).str.strip().isin(FP16_OPS).to_numpy()
        if other.any():
            i = int(np.flatnonzero(other)[0])
            raise KernelInputError(f"row {i}: op {kernels['op'].iloc[i]!r}: --dtype fp16 forecasts GEMMs "
                                   f"({', '.join(FP16_OPS)}) on tensor cores only")
    return kernels.drop(columns=_precision_columns(kernels)), tensor_gflops(device, device_path)


def _booleans(col: pd.Series) -> np.ndarray:
    """Which entries are booleans (a bool column, or bools inside an object column)."""
    if pd.api.types.is_bool_dtype(col):
        return np.ones(len(col), bool)
    if col.dtype == object:
        return col.map(lambda v: isinstance(v, (bool, np.bool_))).to_numpy(bool)
    return np.zeros(len(col), bool)


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


def _neusight(df: pd.DataFrame, tiles: str, cfg_by_class: dict | None, seed: int = 0) -> np.ndarray:
    from .predictors import predict_featured
    from .tile_choice import autotune_tiles, classify_tiles, tile_candidates, tile_forest
    predict = lambda feat: predict_featured(feat, cfg_by_class, seed)
    if tiles == "oracle":
        return predict(add_features(df, tiles="oracle"))
    forest = tile_forest(cfg_by_class)     # GEMM predictors with their own classifier (lib.amd): 'spec' is it
    tiles = ("classifier" if forest is not None else SPEC_TILES) if tiles == "spec" else tiles
    gemm = df["op"].isin(GEMM_OPS).to_numpy()
    out = np.full(len(df), np.nan)
    g = df[gemm].assign(tile_m=np.nan, tile_n=np.nan)
    if gemm.any() and tiles == "autotune":
        g["tile_m"], g["tile_n"], out[gemm] = autotune_tiles(g, predict, tile_candidates(cfg_by_class))
    elif gemm.any():
        g["tile_m"], g["tile_n"] = classify_tiles(g) if forest is None else \
            classify_tiles(g, forest, tile_candidates(cfg_by_class))
        out[gemm] = predict(add_features(g, tiles="given"))
    if (~gemm).any():
        out[~gemm] = predict(add_features(df[~gemm].assign(tile_m=np.nan, tile_n=np.nan), tiles="given"))
    return out


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
        oracle (target's kernel names).
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


def _read_config(path: str) -> dict:
    """{op class: config dict} from a JSON file, checked against lib.predictors' config fields."""
    from .predictors import OP_CLASSES, PredictorError, make_config
    try:
        raw = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise KernelInputError(f"{path}: config file not found") from None
    except json.JSONDecodeError as e:
        raise KernelInputError(f"{path}: not valid JSON ({e.msg}, line {e.lineno})") from None
    except UnicodeDecodeError:
        raise KernelInputError(f"{path}: not valid JSON (not UTF-8 text)") from None
    except OSError as e:
        raise KernelInputError(f"{path}: cannot read the config file ({e.strerror or e})") from None
    if not isinstance(raw, dict) or not set(raw) <= set(OP_CLASSES):
        raise KernelInputError(f"{path}: expected an object keyed by op class ({', '.join(OP_CLASSES)})")
    for op_class, cfg in raw.items():
        if not isinstance(cfg, dict):
            raise KernelInputError(f"{path}: {op_class}: expected an object of predictor config fields, got {cfg!r}")
        try:
            make_config(cfg)
        except PredictorError as e:
            raise KernelInputError(f"{path}: {op_class}: {e}") from None
    return raw


def _read_kernels(path: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the input CSV as a table, its cells as text) from one read of the file, so a pipe works too ('-' or
    /dev/stdin, <(...)); or a KernelInputError naming the file."""
    try:
        data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except FileNotFoundError:
        raise KernelInputError(f"{path}: input file not found") from None
    except IsADirectoryError:
        raise KernelInputError(f"{path}: names a folder, not a CSV file") from None
    except OSError as e:
        raise KernelInputError(f"{path}: cannot read the input file ({e.strerror or e})") from None
    # compressed as its name says (k.csv.gz), as pandas reads a path
    compression = pd.io.common.infer_compression(path, "infer")
    read = lambda **kw: pd.read_csv(io.BytesIO(data), index_col=False, compression=compression, **kw)
    try:
        with warnings.catch_warnings():   # a row longer than the header is an error, not a dropped field
            warnings.simplefilter("error", pd.errors.ParserWarning)
            table = read()
    except pd.errors.ParserWarning:
        raise KernelInputError(f"{path}: a row has more fields than the header") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise KernelInputError(f"{path}: not a readable CSV ({str(e).splitlines()[0]})") from None
    except OSError as e:   # a damaged compressed file
        raise KernelInputError(f"{path}: cannot read the input file ({e.strerror or e})") from None
    both = [(ours, theirs) for theirs, ours in INPUT_NAMES.items() if {ours, theirs} <= set(table.columns)]
    if both:
        raise KernelInputError(f"{path}: both {both[0][0]!r} and {both[0][1]!r} columns; give that column once")
    # pandas renames a repeated header name ('B', 'B.1'), so the output would not be the input plus pred_ms
    header = list(read(header=None, nrows=1, dtype=str, keep_default_na=False).iloc[0])
    names = [h for h in header if h != ""]     # blank names are not names
    if repeated := sorted({h for h in names if names.count(h) > 1}):
        raise KernelInputError(f"{path}: column {repeated[0]!r} appears more than once in the header")
    # the input's cells go out as they were read: a blank cell must not turn a column of integers into floats, and a
    # blank column name stays blank (pandas names it 'Unnamed: 5')
    as_read = read(dtype=str, keep_default_na=False)
    as_read.columns = ["" if h == "" else c for c, h in zip(as_read.columns, header)]
    return table, as_read


def _other_gpus(table: pd.DataFrame, device: Device) -> tuple[str, list[str]] | None:
    """(column, names) where an input column named Device or device (a dataset CSV's) names GPUs other than `device`."""
    for col in ("Device", "device"):
        if col in table.columns:
            names = sorted({str(n) for n in table[col].dropna()} - {device.name})
            if names:
                return col, names
    return None


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
    ap.add_argument("--device", required=True, type=file_path, help="device JSON (dataset format)")
    ap.add_argument("--input", required=True, help="kernel CSV: OPName + B,M,N,K (bmm/linear), B,H (others) or bytes (mem) ('-': standard input)")
    ap.add_argument("--output", required=True, help="where to write the input + pred_ms ('-': standard output)")
    ap.add_argument("--method", default="neusight", choices=METHODS,
                    help="NeuSight (default) or a baseline; li needs training-split measurements of the target")
    ap.add_argument("--tiles", default="spec", choices=TILES,
                    help="GEMM tile rule: spec (default, from the spec only); oracle needs kernel_name")
    ap.add_argument("--config", help="JSON {op class: training config} for the NeuSight MLPs")
    ap.add_argument("--dtype", default="fp32", choices=("fp32", "fp16"),
                    help="fp16: GEMMs on tensor cores, by the fp32 predictors on an equivalent device (lib.precision)")
    args = ap.parse_args(argv)
    if args.output != "-" and (problem := paths.output_problem(args.output, (args.input, args.device, args.config))):
        print(f"error: --output {args.output}: {problem}", file=sys.stderr)
        return 2
    try:
        spec = device = load_device(args.device)
        cfg_by_class = _read_config(args.config) if args.config else vendor_models(device, args.method)
        table, as_read = _read_kernels(args.input)
        kernels = table.rename(columns=INPUT_NAMES)
        try:
            predict = lambda rows, dev: predict_kernels(rows, dev, args.method, args.tiles, cfg_by_class)
            with np.errstate(over="ignore", invalid="ignore"):   # overflow is reported just below
                if args.dtype == "fp16":
                    kernels, peak = _as_fp16(kernels, spec, args.device, args.method)
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
        if other := _other_gpus(table, spec):
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
    for note in (extrapolation_note(spec), *spec_notes(spec), *fp16_notes):
        if note:
            print(f"warning: {note}", file=sys.stderr)
    print(f"wrote {len(table)} prediction{'' if len(table) == 1 else 's'} to "
          f"{'standard output' if args.output == '-' else args.output}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
