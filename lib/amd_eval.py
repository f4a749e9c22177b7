"""Scoring the AMD models of lib.amd (notebook 06): the paper's AMD tables, every AMD kernel forecast in two settings
(held-out shapes, a GPU never trained on), the choices of amendments A2 and A4, A3 and A4 over training seeds, and how
ROCm launches the vector kernels against CUDA's rule.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from . import paths
from .amd import (AMD_CONFIGS, AMD_SPEC_TILES, GEMM_CLASSES, amd_predictors, amd_rows, amd_tile_forest, as_loaded,
                  held_out_shapes, train_amd)
from .data import OP_CLASSES, load_kernels
from .devices import TRAIN_GPUS_AMD
from .labels import PAPER_MODELS, PAPER_SEQ, LabelError, _blocks, _paper_device
from .predictors import PredictorError
from .rocm_softmax import rocm_softmax_kernel
from .selection import spread_seed

# summary/amd_*.csv names the GPUs MI100, MI210, MI250; their label folders are AMD_Instinct_<name>
PAPER_GPU_FOLDER = "AMD_Instinct_{}"


def paper_amd_table(mode: str, path: Path | None = None) -> pd.DataFrame:
    """The paper's AMD table (summary/amd_inf.csv or amd_train.csv: NeuSight's APE % per GPU, model and batch) as
    rows gpu (label folder), device, mode, model, batch, seq (PAPER_SEQ), paper_ape_pct; empty cells NaN."""
    if mode not in ("inference", "training"):
        raise LabelError(f"mode must be 'inference' or 'training' (got {mode!r})")
    path = Path(path) if path else paths.SUMMARY / ("amd_inf.csv" if mode == "inference" else "amd_train.csv")
    lines = [ln.split(",") for block in _blocks(path) for ln in block]
    if len(lines) < 3 or not lines[1][0].strip().startswith("Batch"):
        raise LabelError(f"{path}: expected a row of models, a 'Batch Size' row, then one row per GPU")
    models, cur = [], None
    for c in lines[0][1:]:
        cur = c.strip() or cur
        models.append(cur)
    rows = []
    for cells in lines[2:]:
        gpu = PAPER_GPU_FOLDER.format(cells[0].strip())
        device = _paper_device(gpu, cells[0].strip())
        for model, batch, val in zip(models, lines[1][1:], cells[1:]):
            if model not in PAPER_MODELS:
                raise LabelError(f"{path}: unknown model {model!r}")
            val = val.strip().rstrip("%")
            rows.append(dict(gpu=gpu, device=device, mode=mode, model=PAPER_MODELS[model], batch=int(batch),
                             seq=PAPER_SEQ[PAPER_MODELS[model]], paper_ape_pct=float(val) if val else np.nan))
    return pd.DataFrame(rows)


# The per-op comparison of notebook 06, one row per kernel and setting:
#   'held-out shapes'        both GPUs' rows of the shapes 'shapes' left out, forecast by the 'shapes' models
#   'GPU never trained on'   each GPU's rows, forecast by the models of the other GPU's rows alone
# with one column per forecast: the AMD models with spec-only and oracle tiles, NVIDIA's defaults (trained on the
# NVIDIA training GPUs, to which both AMD GPUs are unseen: what lib.kernels gives an AMD device JSON) and roofline.
AMD_METHODS = {"amd_spec": "NeuSight, AMD-trained (spec-only tiles)", "amd_oracle": "NeuSight, AMD-trained (oracle tiles)",
               "nvidia_spec": "NeuSight, NVIDIA-trained (spec-only tiles)", "roofline": "roofline"}
SETTINGS = ("held-out shapes", "GPU never trained on")


def kernel_forecasts(cfg: dict | None = None, nvidia_cfg: dict | None = None, match_steps: bool = True,
                     rocm_softmax: bool = True, smem_input: bool | None = None,
                     op_classes: tuple = OP_CLASSES) -> pd.DataFrame:
    """Every AMD kernel of op_classes (default all) in both settings with its forecasts (ms: AMD_METHODS columns, and
    amd_autotune and amd_classifier, amendment A2's two spec-only rules); cfg, match_steps, rocm_softmax and smem_input
    as lib.amd.amd_predictors', nvidia_cfg as lib.kernels' cfg_by_class for the NVIDIA-trained column (None: the defaults)
    (notebook 06)."""
    from .kernels import predict_by_device
    frames = []
    for op_class in op_classes:
        rows = amd_rows(op_class)
        raw = as_loaded(rows, op_class)
        held = held_out_shapes(rows)
        parts = [("held-out shapes", "shapes", held)]
        parts += [("GPU never trained on", gpu, (rows["device"] != gpu).to_numpy()) for gpu in TRAIN_GPUS_AMD]
        for setting, variant, mask in parts:
            these = raw[mask].reset_index(drop=True)
            model = train_amd(op_class, variant, cfg, match_steps, rocm_softmax=rocm_softmax, smem_input=smem_input)
            forest = amd_tile_forest(variant) if op_class in GEMM_CLASSES else None
            by_rule = {rule: predict_by_device(these, tiles=tiles,
                                               cfg_by_class={op_class: replace(model, tile_forest=f)})
                       for rule, tiles, f in (("autotune", "autotune", None), ("classifier", "spec", forest))}
            out = these[["op", "B", "M", "N", "K", "H", "device", "latency_ms"]].assign(
                op_class=op_class, setting=setting, trained_on=variant, amd_spec=by_rule[AMD_SPEC_TILES],
                amd_autotune=by_rule["autotune"], amd_classifier=by_rule["classifier"],
                amd_oracle=predict_by_device(these, tiles="oracle", cfg_by_class={op_class: model}),
                nvidia_spec=predict_by_device(these, tiles="spec", cfg_by_class=nvidia_cfg),
                roofline=predict_by_device(these, method="roofline"))
            frames.append(out)
    return pd.concat(frames, ignore_index=True)


# Amendment A2's choice, made as notebook 04 made NVIDIA's (lib.kernels.SPEC_TILES): on in-distribution rows only, the
# held-out shapes of both AMD GPUs, forecast by the 'shapes' models; the rule with the lower mean of BMM's and FC's
# MAPE is the AMD models' spec-only rule (a tie keeps autotune). No row of a GPU never trained on, no label.
def spec_tile_choice(forecasts: pd.DataFrame) -> pd.DataFrame:
    """Per spec-only tile rule (autotune, classifier): BMM's and FC's MAPE on held-out shapes, their mean, and whether
    it is the rule chosen (forecasts: kernel_forecasts') (notebook 06)."""
    from .metrics import mape
    held = forecasts[(forecasts["setting"] == "held-out shapes") & forecasts["op_class"].isin(GEMM_CLASSES)]
    t = pd.DataFrame({rule: {c: mape(g[f"amd_{rule}"], g["latency_ms"]) for c, g in held.groupby("op_class")}
                      for rule in ("autotune", "classifier")}).T[list(GEMM_CLASSES)]
    t["mean"] = t.mean(axis=1)
    t["chosen"] = t.index == ("classifier" if t.loc["classifier", "mean"] < t.loc["autotune", "mean"] else "autotune")
    return t.rename_axis("rule").reset_index()


# Amendment A4's choice (AMD_SMEM_INPUT), fixed before any A4 model was trained: on in-distribution rows only, the
# held-out softmax shapes of both AMD GPUs, forecast by the 'shapes' softmax models of A3 and of A4; A4 is the default
# if its MAPE there is the lower (a tie keeps A3). No row of a GPU never trained on, no label.
def smem_input_choice(a3: pd.DataFrame, a4: pd.DataFrame) -> pd.DataFrame:
    """Per softmax model (A3, A4): held-out softmax kernels, their MAPE and median forecast over measured, and whether
    it is the one chosen (a3, a4: kernel_forecasts' with smem_input False and True) (notebook 06)."""
    from .metrics import mape
    held = [f[(f["setting"] == "held-out shapes") & (f["op_class"] == "SOFTMAX")] for f in (a3, a4)]
    if len(held[0]) == 0 or not held[0][["B", "H", "device"]].reset_index(drop=True).equals(
            held[1][["B", "H", "device"]].reset_index(drop=True)):
        raise PredictorError("smem_input_choice: A3's and A4's forecasts must hold the same held-out softmax rows")
    t = pd.DataFrame([dict(models=name, kernels=len(h), mape=mape(h["amd_spec"], h["latency_ms"]),
                           median_ratio=float((h["amd_spec"] / h["latency_ms"]).median()))
                      for name, h in zip(("A3", "A4"), held)])
    t["chosen"] = t["models"] == ("A4" if t.loc[1, "mape"] < t.loc[0, "mape"] else "A3")
    return t


# A3 and A4 over training seeds (evaluation only, added after A4's choice; it chooses nothing): the softmax models of
# both retrained from each run of a seed spread (lib.selection.spread_seed: run 0 is the committed models, the others
# share no seed with them or with each other), scored per setting and kernel as A4's table scores them, and end to end
# beside the other classes' models as given.
SEED_MODELS = {"A3": False, "A4": True}   # name: smem_input


def _seeded_softmax(cfg: dict | None, run: int) -> dict:
    """The softmax config of run `run` of a seed spread (cfg: one config for every class, None: AMD_CONFIGS)."""
    base = AMD_CONFIGS["SOFTMAX"] if cfg is None else cfg
    return {**base, "seed": spread_seed(base, run)}


def softmax_seed_kernels(runs, cfg: dict | None = None, nvidia_cfg: dict | None = None) -> pd.DataFrame:
    """Per run of `runs`, model (SEED_MODELS), setting and kernel ('all': every one): the AMD softmax kernels' count and
    MAPE, spec-only tiles (cfg, nvidia_cfg as kernel_forecasts') (notebook 06)."""
    from .metrics import ape
    rows = []
    for run in runs:
        for name, a4 in SEED_MODELS.items():
            f = kernel_forecasts(_seeded_softmax(cfg, run), nvidia_cfg, smem_input=a4, op_classes=("SOFTMAX",))
            f = f.assign(ape=ape(f["amd_spec"], f["latency_ms"]), kernel=rocm_softmax_kernel(f["H"]))
            for kernels in (f.assign(kernel="all"), f):
                t = kernels.groupby(["setting", "kernel"], sort=False)["ape"].agg(kernels="size", mape="mean")
                rows.append(t.reset_index().assign(run=run, models=name))
    return pd.concat(rows, ignore_index=True)[["run", "models", "setting", "kernel", "kernels", "mape"]]


def softmax_seed_labels(labels: pd.DataFrame, runs, cfg: dict | None = None) -> pd.DataFrame:
    """Per run of `runs`, model (SEED_MODELS), mode and device ('all AMD GPUs' too): the labels' count and mean APE,
    forecast by the 'all' models of amd_predictors(cfg=cfg) with that run's softmax model (notebook 06)."""
    from .label_eval import evaluate_labels
    others = amd_predictors("all", cfg)
    rows = []
    for run in runs:
        for name, a4 in SEED_MODELS.items():
            models = {**others, "SOFTMAX": train_amd("SOFTMAX", "all", _seeded_softmax(cfg, run), smem_input=a4)}
            ev = evaluate_labels(labels, methods=["neusight"], cfg_by_class=models)
            ev = pd.concat([ev, ev.assign(device="all AMD GPUs")], ignore_index=True)
            t = ev.groupby(["mode", "device"])["neusight_ape"].agg(labels="size", mape="mean")
            rows.append(t.reset_index().assign(run=run, models=name))
    return pd.concat(rows, ignore_index=True)[["run", "models", "mode", "device", "labels", "mape"]]


# The features tile element-wise, softmax and layernorm kernels by PyTorch's CUDA launch rule (lib.tiles.vec_tile).
# For these kernels the AMD traces count grid_x in blocks, not in work-items as for the Tensile GEMMs (lib.tiles.
# grid_blocks): a layernorm launches one block per row, grid_x = B. Per row:
#   ratio = grid_x * grid_y * grid_z / num_tiles(CUDA rule)
# with softmax split at SOFTMAX_WARP_MAX_H, where CUDA's rule turns from its warp kernel to one block per row.
def vector_launch_agreement() -> pd.DataFrame:
    """Per op class, op, softmax row kind (long_rows: H > SOFTMAX_WARP_MAX_H; False for the other ops) and AMD GPU:
    the rows, the share whose measured blocks equal the CUDA rule's (rule_share), and the median ratio (notebook 06)."""
    from .ops import GEMM_OPS
    from .tiles import SOFTMAX_WARP_MAX_H, add_tiles
    df = load_kernels(devices=list(TRAIN_GPUS_AMD), vendor="amd")
    t = add_tiles(df[~df["op"].isin(GEMM_OPS)])
    blocks = (t["grid_x"] * t["grid_y"] * t["grid_z"]).to_numpy(float)
    t = t.assign(match=np.isclose(blocks, t["num_tiles"]), ratio=blocks / t["num_tiles"],
                 long_rows=(t["op"] == "softmax") & (t["H"] > SOFTMAX_WARP_MAX_H))
    return (t.groupby(["op_class", "op", "long_rows", "device"])
             .agg(rows=("match", "size"), rule_share=("match", "mean"), median_ratio=("ratio", "median")).reset_index())
