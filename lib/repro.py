"""Does this machine train the committed weights? A one-minute check (on an idle machine) before a cold, hours-long
training run (docs/reproducibility.md; the check scores as notebook 03 does).

`python -m lib.repro` trains notebook 03's tile-based batched-matmul predictor (lib.predictors' defaults: the model for
GPUs never trained on and the one for the training GPUs) in a scratch folder, never the project's cache, and scores it
as notebook 03 does: MAPE % on the training GPUs' held-out shapes (in_dist) and on the GPUs never trained on (ood),
spec-only tiles. The last full run wrote the same two numbers to figures/tables/predictor_scaling.csv, as 4
significant digits (lib.plotting.save_table). Equal there: this machine trains as the reference machine did (for this
model), and `make figures` should rebuild the committed figures; different: it trains other weights, and every table
that a trained model feeds will move within the spread over training seeds (notebooks 04, 05). Exit status 0 when
both numbers match, 1 when not, 2 on an error.
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import pandas as pd

from . import paths
from .cli import Parser

REFERENCE_ROW = "NeuSight (spec tiles)"   # predictor_scaling.csv's row of this model
SCORES = ("in_dist_mape", "ood_mape")


def score_bmm_predictor(cfg_by_class: dict | None = None) -> dict:
    """{in_dist_mape, ood_mape} (%) of the batched-matmul predictor trained now, spec-only tiles (notebook 03)."""
    from .data import load_kernels
    from .kernels import predict_by_device
    from .metrics import mape
    test = load_kernels(ops="BMM", splits=["test_id", "test_ood"])
    pred = predict_by_device(test, method="neusight", tiles="spec", cfg_by_class=cfg_by_class)
    in_dist = (test["split"] == "test_id").to_numpy()
    return {"in_dist_mape": mape(pred[in_dist], test["latency_ms"][in_dist]),
            "ood_mape": mape(pred[~in_dist], test["latency_ms"][~in_dist])}


def reference_scores(tables: Path | None = None) -> dict:
    """The committed run's {in_dist_mape, ood_mape} of REFERENCE_ROW, from figures/tables/predictor_scaling.csv."""
    path = (tables or paths.ROOT / "figures" / "tables") / "predictor_scaling.csv"
    table = pd.read_csv(path)
    row = table[table["predictor"] == REFERENCE_ROW]
    if len(row) != 1:
        raise ValueError(f"{path}: expected one row '{REFERENCE_ROW}', found {len(row)}")
    return {k: float(row[k].iloc[0]) for k in SCORES}


# Two scores agree when they print alike as the table stores them: format(x, '.4g') (lib.plotting.save_table).
def same_as_table(now: float, committed: float) -> bool:
    """Does a score computed now print as the committed table's value (4 significant digits)?"""
    return format(now, ".4g") == format(committed, ".4g")


def check(cfg_by_class: dict | None = None) -> tuple[bool, pd.DataFrame]:
    """(all equal, table of committed vs now) for the predictor trained in a scratch folder (lib.repro)."""
    from . import predictors, reference_weights
    committed = reference_scores()
    build, loaded = paths.BUILD, dict(predictors._LOADED)
    with tempfile.TemporaryDirectory(prefix="neusight-repro-") as scratch, reference_weights.disabled():
        # trained models go to the scratch folder (the kernel table stays in paths.CACHE), and none is taken from
        # the committed weights (lib.reference_weights) or this process's memo of loaded predictors
        # (lib.predictors.get_predictor), which may hold cached weights
        paths.BUILD = Path(scratch)
        predictors._LOADED.clear()
        try:
            now = score_bmm_predictor(cfg_by_class)
        finally:
            paths.BUILD = build
            predictors._LOADED.clear()
            predictors._LOADED.update(loaded)
    table = pd.DataFrame({"committed": committed, "this machine": now})
    table["same"] = [same_as_table(now[k], committed[k]) for k in table.index]
    return bool(table["same"].all()), table


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="python -m lib.repro", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", help="JSON {op_class: TrainConfig fields} to train instead of the defaults "
                                         "(for tests: a model other than the committed one never matches)")
    args = parser.parse_args(argv)
    from .numerics import blas_fingerprint, cpu_model
    try:
        cfg = json.loads(Path(args.config).read_text()) if args.config else None
    except (OSError, ValueError) as e:
        print(f"error: --config {args.config}: {e}", file=sys.stderr)
        return 2
    try:
        same, table = check(cfg)
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    # the machine that trained the committed weights: the last full run's record of them (reference_weights), whose
    # own machine may have loaded them instead; that run's machine where no weights are committed
    prov_path = paths.ROOT / "figures" / "PROVENANCE.json"
    prov = json.loads(prov_path.read_text()) if prov_path.is_file() else {}
    trained_on = prov.get("reference_weights", {}).get("trained_on") or {prov.get("machine", {}).get("cpu_model", "?"): 0}
    print("reference machine (figures/PROVENANCE.json), which trained the committed weights: "
          + ", ".join(f"{cpu} ({n} models)" if n else cpu for cpu, n in trained_on.items()))
    print(f"this machine: {cpu_model()}, BLAS fingerprint {blas_fingerprint()}")
    print(f"{REFERENCE_ROW}, batched matmul, MAPE %:")
    print(table.to_string(float_format=lambda x: format(x, ".4g")))
    from .reference_weights import committed_files
    print("this machine trains the committed weights (for this model)" if same else
          "this machine trains other weights: `make figures` here loads the committed ones (figures/predictors/), "
          "but a model it trains (new code, config or data) differs from what the reference machine would train"
          if committed_files() else
          "this machine trains other weights: `make figures` here will not rebuild the committed figures bit for bit")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
