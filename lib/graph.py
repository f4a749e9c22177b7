"""Aten-level kernel graph of a Hugging Face model, captured on the meta device (notebook 05).

`capture(config_path, batch, seq, mode)` builds the model the labels measured (BERT-Large: sequence
classification for inference, pre-training heads for training; GPT-2/OPT: LM heads; Switch: seq2seq
with decoder input as long as the encoder input; beyond the labels, decoders with their LM heads: Llama, Mistral,
Qwen2, Gemma, Phi-3, GPT-NeoX and Mixtral, its experts routed evenly) on the meta device (no weights, no GPU), runs one
forward (eval mode) or forward + backward (train mode, backward seeded with ones on every output
logit tensor, no loss kernels, as the labels' fx graphs end at the logits), and records every aten
kernel through a TorchDispatchMode. Only a reduced depth is run: 3 periods of each layer stack (a
period is 1 block; for Switch, a stack's sparse step: one sparse block per step, e.g. 2 when dense and
sparse blocks alternate, `lib.model_config.stack_periods`); the middle period stands for all
middle ones through `count` (`_to_table`), so the table of a 32-layer model is as short as a 3-layer one.
Module hooks (forward) and tensor hooks (backward) tell which block an op belongs to.
Tables are cached in build/cache/graphs/ (a cache hit imports neither torch nor transformers). lib.model_config reads
and checks the config first.
"""
from __future__ import annotations

import hashlib
import json
import re
import sys
from importlib.metadata import version
from pathlib import Path

import pandas as pd

from . import paths
from .graph_ops import COLUMNS, kernel_rows
from .model_config import GraphError, ModelConfig, check_args, load_config

GRAPH_CACHE = paths.CACHE / "graphs"
# The cache is keyed by the source of the capture and op-mapping code, so an edit invalidates it.
CODE_FILES = ("graph.py", "graph_ops.py", "graph_capture.py", "model_config.py")


def _code_hash() -> str:
    here = Path(__file__).parent
    return hashlib.sha256(b"".join((here / f).read_bytes() for f in CODE_FILES)).hexdigest()[:16]


def parameter_count(config_path, use_cache: bool = True) -> int:
    """Parameters of the full-depth inference model (lib.model_config.ARCHS), built on meta (no weights); cached beside the graphs."""
    cfg = load_config(config_path)
    cache = GRAPH_CACHE / f"{cfg.name}-parameters-{cache_key(cfg, 1, 1, 'parameters')}.json"
    if use_cache and cache.exists():
        return int(json.loads(cache.read_text()))
    from .graph_capture import build_model  # imports torch + transformers (seconds)
    model = build_model(cfg, "inference", cfg.num_layers, batch=1)
    count = int(sum(p.numel() for p in model.parameters()))
    if use_cache:
        cache.parent.mkdir(parents=True, exist_ok=True)
        paths.write_atomic(cache, lambda tmp: tmp.write_text(json.dumps(count)))
    return count


def _reduced_depths(cfg: ModelConfig) -> tuple:
    """Blocks to build per stack: 3 periods (first, steady, last), or the full depth if not longer (or not a
    whole number of periods)."""
    return tuple(3 * p if (n > 3 * p and n % p == 0) else n for n, p in zip(cfg.num_layers, cfg.periods))


def cache_key(cfg: ModelConfig, batch: int, seq: int, mode: str, depths=None) -> str:
    """Hash of config, shapes, mode, library versions and the capture code's source."""
    blob = json.dumps({"cfg": cfg.raw, "batch": batch, "seq": seq, "mode": mode,
                       "depths": depths, "torch": version("torch"),
                       "transformers": version("transformers"), "code": _code_hash()},
                      sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def capture(config_path, batch: int, seq: int, mode: str, *, depths=None,
            use_cache: bool = True) -> pd.DataFrame:
    """Kernel table (one row per kernel, `count` = runs in the whole model) of one pass.

    depths: blocks to build per stack; None = 3 periods, multiplied out to the full depth. Any other
    depth builds and counts a model of exactly that depth (tests read one block this way).
    """
    cfg = load_config(config_path)
    check_args(cfg, batch, seq, mode)
    batch, seq = int(batch), int(seq)   # np.int64 -> int: the cache key is JSON
    if depths is None:
        depths = _reduced_depths(cfg)
    cache = GRAPH_CACHE / f"{cfg.name}-{mode}-{batch}-{seq}-{cache_key(cfg, batch, seq, mode, list(depths))}.pkl"
    if use_cache and cache.exists():
        return pd.read_pickle(cache)
    from .graph_capture import record  # imports torch + transformers (seconds)
    try:
        records = record(cfg, batch, seq, mode, depths)
    except Exception as e:   # transformers / torch rejecting a value of the config (an activation name, a size)
        # Hugging Face looks names up in its tables (activations, RoPE types): a KeyError holds only the value
        named = fields_with_value(cfg.raw, e.args[0]) if isinstance(e, KeyError) and e.args else []
        if named:
            raise GraphError(f"{cfg.path}: Hugging Face does not know the value {e.args[0]!r} of field "
                             f"{' / '.join(repr(n) for n in named)}; check its spelling against Hugging Face's "
                             f"documentation for this model_type ({cfg.model_type!r})") from None
        first = (str(e).strip().splitlines() or [""])[0][:200]
        raise GraphError(f"{cfg.path}: cannot build the model from this config at batch {batch}, "
                         f"sequence {seq} ({type(e).__name__}: {first})") from None
    df = _to_table(records, cfg, depths)
    if use_cache:
        cache.parent.mkdir(parents=True, exist_ok=True)
        paths.write_atomic(cache, df.to_pickle)
    return df


def fields_with_value(raw: dict, value, prefix: str = "") -> list:
    """Dotted names of the fields of a config (nested objects too) whose value is the string `value` (notebook 05)."""
    if not isinstance(value, str):
        return []
    names = []
    for k, v in raw.items():
        if isinstance(v, dict):
            names += fields_with_value(v, value, f"{prefix}{k}.")
        elif v == value:
            names.append(f"{prefix}{k}")
    return names


def _to_table(records: list, cfg: ModelConfig, depths) -> pd.DataFrame:
    """Records -> table; the middle captured period of a stack counts for all middle periods.

    The first period can differ (Switch: relative position bias lives in block 0) and so can the
    last one (backward: gradients of tensors shared by all blocks, e.g. Switch's position bias or
    the encoder output, are accumulated in every block but the last), hence 3 periods captured.
    count(middle) = n_full / p - 2, plus 1 for the first and/or last when they ran the same kernels.
    """
    rows = [row for r in records for row in kernel_rows(r)]
    df = pd.DataFrame(rows, columns=COLUMNS + ["stack", "block"])
    df["count"] = 1
    for s, (n_full, n_cap, p) in enumerate(zip(cfg.num_layers, depths, cfg.periods)):
        if n_cap == n_full or n_cap != _reduced_depths(cfg)[s]:
            continue      # the whole stack was built, or a depth of the caller's choosing: counted as built
        in_stack = (df["layer"] == "layer") & (df["stack"] == s)
        period = df["block"] // p
        mid = in_stack & (period == 1)
        count = n_full // p - 2
        for k in (0, 2):
            edge = in_stack & (period == k)
            if _same_ops(df[edge], df[mid]):
                count += 1
                df, in_stack, period, mid = df[~edge], in_stack[~edge], period[~edge], mid[~edge]
        df.loc[mid, "count"] = count
    return df.drop(columns=["block"]).reset_index(drop=True)


def _same_ops(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    """True if two periods ran the same kernels with the same shapes, in the same order."""
    cols = ["aten", "phase", "shapes"]
    return len(a) == len(b) and (a[cols].to_numpy() == b[cols].to_numpy()).all()


# ----------------------------------------------------------------------------- label CSVs

def label_layer_nodes(label_csv) -> pd.DataFrame:
    """Label CSV (fx nodes of prologue, one layer, epilogue) -> tidy frame with latencies in ms."""
    path = Path(label_csv)
    try:
        raw = pd.read_csv(path)
    except FileNotFoundError:
        raise GraphError(f"{path}: label CSV not found") from None
    need = ["Name", "op", "target", "input_shapes", "output_shape", "fw_latency", "bw_latency"]
    missing = [c for c in need if c not in raw.columns]
    if missing:
        raise GraphError(f"{path}: missing columns {missing}")
    # acc_latency, where a CSV has it: the parameters' gradient accumulation, timed apart from the backward
    df = raw[need + [c for c in ("acc_latency",) if c in raw.columns]].rename(
        columns={"fw_latency": "fw_latency_ms", "bw_latency": "bw_latency_ms", "acc_latency": "acc_latency_ms"})
    return df.reset_index(drop=True)


def summary(df: pd.DataFrame) -> dict:
    """Kernel counts and GEMM FLOPs of a captured table (FLOPs = 2 B M N K per GEMM)."""
    gemm = df["op"].isin(["bmm", "linear"])
    flops = (2 * df.B * df.M * df.N * df.K * df["count"])[gemm].sum()
    return {"rows": len(df), "kernels": int(df["count"].sum()), "gemm_flops": float(flops)}


LABEL_NAME = re.compile(r"^(?P<model>[a-z0-9_]+)-(?P<mode>inf|train)-(?P<seq>\d+)-(?P<batch>\d+)")


def label_shapes() -> list:
    """(model, mode, batch, seq) of every label file name (model-inf|train-SEQ-BATCH[-suffix])."""
    found = set()
    for f in paths.LABELS.rglob("*.json"):
        m = LABEL_NAME.match(f.stem)
        if m and (paths.MODEL_CONFIGS / f"{m['model']}.json").exists():
            mode = "inference" if m["mode"] == "inf" else "training"
            found.add((m["model"], mode, int(m["batch"]), int(m["seq"])))
    return sorted(found)


def warm_cache() -> int:
    """Capture (and cache) the graph of every label's model/mode/batch/seq; returns how many."""
    from tqdm import tqdm
    shapes = label_shapes()
    for model, mode, batch, seq in tqdm(shapes, desc="graphs", file=sys.stderr):
        capture(paths.MODEL_CONFIGS / f"{model}.json", batch, seq, mode)
    return len(shapes)


def main(argv=None) -> int:
    """`python -m lib.graph CONFIG.json BATCH SEQ MODE`: print the kernel table as CSV.

    `python -m lib.graph --warm` captures every label's graph into the cache (a forecast then imports no
    transformers and captures nothing: `make bench`'s forecast_cli_cold against forecast_cli_capture).
    """
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--warm"]:
        print(warm_cache(), "graphs cached", file=sys.stderr)
        return 0
    if len(argv) != 4:
        print("usage: python -m lib.graph CONFIG.json BATCH SEQ inference|training", file=sys.stderr)
        return 2
    try:
        df = capture(argv[0], int(argv[1]), int(argv[2]), argv[3])
    except (GraphError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    df.to_csv(sys.stdout, index=False)
    print(json.dumps(summary(df)), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
