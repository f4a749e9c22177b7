"""What lib.kernels reads, checked: a kernel table (known ops, whole positive dimensions, fp32 or --dtype fp16), the
input CSV (a pipe too, read once) and a --config JSON, each failing with a KernelInputError that names the file,
column or row (notebook 04).
"""
from __future__ import annotations

import io
import json
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from .data import OP_CLASS, RENAME
from .devices import Device
from .ops import GEMM_DIMS, GEMM_OPS, VEC_DIMS
from .precision import FP16_NAMES, FP16_OPS, tensor_gflops

MEM_OP = "mem"                   # a memory-bound kernel, given by its bytes (lib.kernels)
KNOWN_OPS = (*OP_CLASS, MEM_OP)
# tiles='oracle' reads a GEMM's tile from its kernel name (lib.tiles); a name without one falls back to the launch grid,
#     tile_n = ceil(K / grid_x),  tile_m = ceil(M / grid_y)     (AMD: grid_x counts work-items, so grid_x / block_x)
ORACLE_COLUMNS = ("kernel_name", "grid_x", "grid_y", "block_x")
# The columns a prediction reads, under their dataset CSV names too (lib.data.RENAME): a dataset file is an input as it is
INPUT_NAMES = {theirs: ours for theirs, ours in RENAME.items() if ours in ("op", *ORACLE_COLUMNS)}


class KernelInputError(ValueError):
    """A kernel table that cannot be predicted; the message names the column or op."""


def check_kernels(df: pd.DataFrame) -> pd.DataFrame:
    """Validated copy of a kernel table: known ops, required positive dims per op kind."""
    if "op" not in df.columns:
        raise KernelInputError("missing column 'op' (or 'OPName')" + _near_names(("op", "OPName"), df.columns))
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
                raise KernelInputError(f"missing column '{col}' (needed by {what})" + _near_names((col,), out.columns))
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


def _near_names(wanted: tuple, columns) -> str:
    """'; the header has ' B' ...' where a column is one of `wanted` but for case or surrounding spaces, else ''."""
    key = lambda name: str(name).strip().lower()
    near = [str(c) for c in columns if key(c) in {key(w) for w in wanted}]
    if not near:
        return ""
    return f"; the header has {', '.join(map(repr, near))} (names are matched exactly: case and spaces count)"


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


def as_fp16(kernels: pd.DataFrame, device: Device, device_path: str, method: str) -> tuple[pd.DataFrame, float]:
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


def read_config(path: str) -> dict:
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


def read_kernels(path: str) -> tuple[pd.DataFrame, pd.DataFrame]:
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


def other_gpus(table: pd.DataFrame, device: Device) -> tuple[str, list[str]] | None:
    """(column, names) where an input column named Device or device (a dataset CSV's) names GPUs other than `device`."""
    for col in ("Device", "device"):
        if col in table.columns:
            names = sorted({str(n) for n in table[col].dropna()} - {device.name})
            if names:
                return col, names
    return None
