"""lib.amd: the AMD models' rows and splits, the paper's AMD tables, and forecasts through lib.kernels (tiny configs)."""
import numpy as np
import pandas as pd
import pytest

from lib import amd, paths
from lib import predictors as P
from lib.devices import TRAIN_GPUS_AMD, device_by_name
from lib.kernels import predict_kernels
from lib.tile_choice import CANDIDATES, tile_candidates
from lib.tiles import GEMM_TILE_CANDIDATES_AMD, gemm_tile_candidates

TINY = {"layers": 1, "width": 8, "epochs": 1, "batch_size": 4096, "max_rows": 500, "validation": "none"}


def test_amd_configs_are_nvidias_unseen_gpu_configs_without_the_nvidia_amendments():
    for c, cfg in amd.AMD_CONFIGS.items():
        assert not {"hold_mem", "envelope"} & cfg.keys()
        assert cfg == {k: v for k, v in P.DEFAULT_CONFIGS[c].items() if k not in ("hold_mem", "envelope")}


def test_amd_rows_are_both_training_gpus_and_never_the_mi250():
    rows = amd.amd_rows("FC")
    assert set(rows["device"]) == set(TRAIN_GPUS_AMD)
    assert (rows["latency_ms"] > 0).all() and rows["tile_m"].notna().all()


def test_held_out_shapes_take_a_share_of_shapes_on_both_gpus():
    rows = amd.amd_rows("FC")
    held = amd.held_out_shapes(rows)
    shapes = rows.assign(held=held).groupby(["M", "N", "K"])["held"]
    assert (shapes.nunique() == 1).all()          # a shape is held out on every GPU or on none
    n_shapes = shapes.ngroups
    assert shapes.first().sum() == round(amd.HELD_OUT_SHAPE_SHARE * n_shapes)
    assert np.array_equal(held, amd.held_out_shapes(rows))   # seeded
    assert not np.array_equal(held, amd.held_out_shapes(rows, seed=1))


def test_variant_rows():
    every = amd.amd_rows("LN")
    assert len(amd.variant_rows("LN", "all")) == len(every)
    assert len(amd.variant_rows("LN", "shapes")) == (~amd.held_out_shapes(every)).sum()
    only = amd.variant_rows("LN", TRAIN_GPUS_AMD[0])
    assert set(only["device"]) == {TRAIN_GPUS_AMD[0]}
    with pytest.raises(P.PredictorError, match="variant"):
        amd.variant_rows("LN", "AMD Instinct MI250")


def test_train_amd_refuses_a_config_it_cannot_honour():
    with pytest.raises(P.PredictorError, match="validation 'none'"):
        amd.train_amd("LN", "all", {**TINY, "validation": "shapes"})


def test_amd_models_learn_amd_rows_only_and_choose_among_amd_tiles(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    p = amd.train_amd("BMM", TRAIN_GPUS_AMD[1], TINY)
    assert p.info["train_rows"] == TINY["max_rows"] and not p.info["cached"]
    assert amd.train_amd("BMM", TRAIN_GPUS_AMD[1], TINY).info["cached"]   # the second call loads
    assert set(p.tile_candidates) == GEMM_TILE_CANDIDATES_AMD == gemm_tile_candidates("amd")
    assert {tuple(t) for t in tile_candidates({"BMM": p}).astype(int)} == GEMM_TILE_CANDIDATES_AMD
    assert tile_candidates(None) is CANDIDATES and tile_candidates({"BMM": {"layers": 1}}) is CANDIDATES
    assert P.get_predictor("BMM", p) is p   # a predictor given as the config is used as it is
    shapes = pd.DataFrame({"op": ["bmm", "bmm"], "B": [16, 64], "M": [512, 1024], "N": [64, 64], "K": [512, 1024]})
    mi250 = device_by_name("AMD Instinct MI250")
    pred = predict_kernels(shapes, mi250, cfg_by_class={"BMM": p})
    # the forecast is the fastest of the AMD tile candidates, each forecast with its tile given
    from lib.tile_choice import autotune_tiles
    from lib.kernels import _with_spec
    tm, tn, best = autotune_tiles(_with_spec(shapes, mi250), lambda f: p.predict(f), tile_candidates({"BMM": p}))
    assert pred == pytest.approx(best, rel=1e-6)
    assert all((a, b) in GEMM_TILE_CANDIDATES_AMD for a, b in zip(tm.astype(int), tn.astype(int)))


def test_paper_amd_tables_by_hand():
    inf = amd.paper_amd_table("inference")
    assert len(inf) == 3 * 10 and set(inf["gpu"]) == {"AMD_Instinct_MI100", "AMD_Instinct_MI210", "AMD_Instinct_MI250"}
    cell = lambda t, gpu, model, batch: t.query("gpu == @gpu and model == @model and batch == @batch")["paper_ape_pct"].item()
    # summary/amd_inf.csv: MI100, BERT-Large batch 8: 17.0%; MI250, GPT3-2.7B batch 8: 0.0%; MI100 GPT3-XL batch 8 blank
    assert cell(inf, "AMD_Instinct_MI100", "bert_large", 8) == 17.0
    assert cell(inf, "AMD_Instinct_MI250", "gpt3_27", 8) == 0.0
    assert np.isnan(cell(inf, "AMD_Instinct_MI100", "gpt3_xl", 8))
    train = amd.paper_amd_table("training")
    # summary/amd_train.csv: MI210, GPT2-Large batch 4: 33.0%
    assert cell(train, "AMD_Instinct_MI210", "gpt2_large", 4) == 33.0
    assert train["device"].str.startswith("AMD Instinct").all() and (train["seq"] > 0).all()


def test_paper_amd_table_errors_name_the_file(tmp_path):
    bad = tmp_path / "amd_inf.csv"
    bad.write_text(",BERT-Large,\nMI100,17.0%,\n")
    with pytest.raises(ValueError, match="amd_inf.csv"):
        amd.paper_amd_table("inference", bad)
    with pytest.raises(ValueError, match="mode"):
        amd.paper_amd_table("decoding")


def test_the_clis_forecast_an_amd_gpu_with_the_amd_models(tmp_path, monkeypatch):
    from lib import kernels
    sentinel = {"BMM": "the AMD models"}
    monkeypatch.setattr(amd, "amd_predictors", lambda: sentinel)
    mi250, h100 = device_by_name("AMD Instinct MI250"), device_by_name("NVIDIA H100 80GB HBM3")
    assert kernels.vendor_models(mi250) is sentinel
    assert kernels.vendor_models(mi250, "roofline") is None and kernels.vendor_models(h100) is None
    seen = []
    monkeypatch.setattr(kernels, "predict_kernels", lambda rows, dev, method, tiles, cfg: seen.append(cfg) or
                        np.ones(len(rows)))
    csv = tmp_path / "kernels.csv"
    csv.write_text("OPName,B,M,N,K\nbmm,16,512,64,512\n")
    assert kernels.main(["--device", mi250.path, "--input", str(csv), "--output", "-"]) == 0
    assert seen == [sentinel]


def test_vector_launch_agreement_reads_rocm_blocks_by_hand():
    t = amd.vector_launch_agreement().set_index(["op", "long_rows", "device"]).sort_index()
    # a layernorm launches one block per row on ROCm as on CUDA (grid_x = B): the rule holds on every row
    assert (t.loc[("ln", False), "rule_share"] == 1).all()
    # an element-wise block takes 1,024 elements on ROCm, 512 by CUDA's rule: half the blocks
    assert t.loc[("add", False), "median_ratio"].to_numpy() == pytest.approx([0.5, 0.5], abs=1e-3)
    assert set(t.index.get_level_values("device")) == set(TRAIN_GPUS_AMD)
