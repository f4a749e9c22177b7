"""lib.amd, lib.rocm_softmax and lib.amd_eval: the AMD models' rows and splits, ROCm's softmax rules, the paper's AMD
tables, and forecasts through lib.kernels (tiny configs)."""
import numpy as np
import pandas as pd
import pytest

from lib import amd, amd_eval, paths, rocm_softmax
from lib import predictors as P
from lib.devices import TRAIN_GPUS_AMD, device_by_name
from lib.kernels import predict_kernels
from lib.tile_choice import CANDIDATES, tile_candidates
from lib.tiles import GEMM_TILE_CANDIDATES_AMD, gemm_tile_candidates

TINY = {"layers": 1, "width": 8, "epochs": 1, "batch_size": 4096, "max_rows": 500, "validation": "none"}
TINY_SOFTMAX = {**TINY, "features": amd.AMD_CONFIGS["SOFTMAX"]["features"]}   # with f_vec, as the AMD softmax models


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
    p = amd.train_amd("BMM", TRAIN_GPUS_AMD[1], TINY, spec_tiles="autotune")
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
    inf = amd_eval.paper_amd_table("inference")
    assert len(inf) == 3 * 10 and set(inf["gpu"]) == {"AMD_Instinct_MI100", "AMD_Instinct_MI210", "AMD_Instinct_MI250"}
    cell = lambda t, gpu, model, batch: t.query("gpu == @gpu and model == @model and batch == @batch")["paper_ape_pct"].item()
    # summary/amd_inf.csv: MI100, BERT-Large batch 8: 17.0%; MI250, GPT3-2.7B batch 8: 0.0%; MI100 GPT3-XL batch 8 blank
    assert cell(inf, "AMD_Instinct_MI100", "bert_large", 8) == 17.0
    assert cell(inf, "AMD_Instinct_MI250", "gpt3_27", 8) == 0.0
    assert np.isnan(cell(inf, "AMD_Instinct_MI100", "gpt3_xl", 8))
    train = amd_eval.paper_amd_table("training")
    # summary/amd_train.csv: MI210, GPT2-Large batch 4: 33.0%
    assert cell(train, "AMD_Instinct_MI210", "gpt2_large", 4) == 33.0
    assert train["device"].str.startswith("AMD Instinct").all() and (train["seq"] > 0).all()


def test_paper_amd_table_errors_name_the_file(tmp_path):
    bad = tmp_path / "amd_inf.csv"
    bad.write_text(",BERT-Large,\nMI100,17.0%,\n")
    with pytest.raises(ValueError, match="amd_inf.csv"):
        amd_eval.paper_amd_table("inference", bad)
    with pytest.raises(ValueError, match="mode"):
        amd_eval.paper_amd_table("decoding")


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
    t = amd_eval.vector_launch_agreement().set_index(["op", "long_rows", "device"]).sort_index()
    # a layernorm launches one block per row on ROCm as on CUDA (grid_x = B): the rule holds on every row
    assert (t.loc[("ln", False), "rule_share"] == 1).all()
    # an element-wise block takes 1,024 elements on ROCm, 512 by CUDA's rule: half the blocks
    assert t.loc[("add", False), "median_ratio"].to_numpy() == pytest.approx([0.5, 0.5], abs=1e-3)
    assert set(t.index.get_level_values("device")) == set(TRAIN_GPUS_AMD)


def test_steps_matched_takes_nvidias_optimizer_steps_by_hand():
    from lib.train import TrainConfig
    # the softmax default: 8 epochs of 10 batches (9,465 NVIDIA rows) are 80 steps; 3,830 AMD rows are 4 batches, so
    # 20 epochs (80 steps), on the 40-epoch schedule stretched alike to 100
    out = amd.steps_matched(TrainConfig(epochs=8, patience=8, batch_size=1024, schedule_epochs=40), 9465, 3830)
    assert (out.epochs, out.patience, out.schedule_epochs) == (20, 20, 100)
    # FC: 38 x 32 / 3 batches = 405.3 -> 405 epochs; the schedule 40 x 32 / 3 = 426.7 -> 427
    out = amd.steps_matched(TrainConfig(epochs=38, patience=38, batch_size=1024, schedule_epochs=40), 32224, 2080)
    assert (out.epochs, out.schedule_epochs, out.lr, out.layers) == (405, 427, TrainConfig().lr, TrainConfig().layers)
    # as many batches on both sides: unchanged (no schedule: the epochs'); never below one epoch
    assert amd.steps_matched(TrainConfig(epochs=3, patience=3, batch_size=100), 1000, 901).schedule_epochs == 3
    assert amd.steps_matched(TrainConfig(epochs=1, patience=1, batch_size=10), 10, 1000).epochs == 1
    with pytest.raises(P.PredictorError, match="rows"):
        amd.steps_matched(TrainConfig(), 0, 10)


def test_the_default_amd_models_take_nvidias_steps_within_half_an_epoch():
    t = amd.steps_table()
    assert len(t) == len(amd.OP_CLASSES) * len(amd.VARIANTS)
    batches = t["steps_after"] / t["epochs_after"]
    assert ((t["steps_after"] - t["nvidia_steps"]).abs() <= batches / 2).all()
    assert (t["steps_before"] < t["nvidia_steps"]).all()   # before amendment A1 every AMD model took fewer


def test_train_amd_trains_the_steps_matched_epochs(tmp_path, monkeypatch):
    import math
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    cfg = {**TINY, "batch_size": 512, "max_rows": None}
    gpu = TRAIN_GPUS_AMD[0]
    epochs = round(math.ceil(amd._nvidia_rows("LN", None, 0) / 512) / math.ceil(len(amd.variant_rows("LN", gpu)) / 512))
    assert epochs > 1
    assert amd.train_amd("LN", gpu, cfg).info["epochs"] == epochs
    assert amd.train_amd("LN", gpu, cfg, match_steps=False).info["epochs"] == 1


def test_spec_tiles_come_from_the_variants_classifier(tmp_path, monkeypatch):
    from lib.features import add_features
    from lib.kernels import _with_spec
    from lib.tile_choice import classify_tiles
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    gpu = TRAIN_GPUS_AMD[1]
    p = amd.train_amd("BMM", gpu, TINY, spec_tiles="classifier")
    assert p.tile_forest is amd.amd_tile_forest(gpu)
    assert amd.train_amd("BMM", gpu, TINY, spec_tiles="autotune").tile_forest is None
    assert amd.train_amd("LN", gpu, TINY, spec_tiles="classifier").tile_forest is None   # vector ops need no tile
    with pytest.raises(P.PredictorError, match="spec_tiles"):
        amd.train_amd("BMM", gpu, TINY, spec_tiles="oracle")
    # lib.kernels' spec-only forecast is the model's at the tiles the classifier gives, among the AMD tiles
    shapes = pd.DataFrame({"op": ["bmm", "bmm"], "B": [16, 64], "M": [512, 1024], "N": [64, 64], "K": [512, 1024]})
    feat = _with_spec(shapes, device_by_name("AMD Instinct MI250"))
    tm, tn = classify_tiles(feat, p.tile_forest, amd.AMD_TILES)
    assert {(a, b) for a, b in zip(tm.astype(int), tn.astype(int))} <= GEMM_TILE_CANDIDATES_AMD
    given = p.predict(add_features(feat.assign(tile_m=tm, tile_n=tn), tiles="given"))
    assert predict_kernels(shapes, device_by_name("AMD Instinct MI250"), cfg_by_class={"BMM": p}) == \
        pytest.approx(given, rel=1e-6)


def test_spec_tile_choice_by_hand():
    f = pd.DataFrame({"setting": ["held-out shapes"] * 4 + ["GPU never trained on"],
                      "op_class": ["BMM", "BMM", "FC", "EW", "BMM"], "latency_ms": [1.0, 2.0, 1.0, 1.0, 1.0],
                      "amd_autotune": [1.1, 2.0, 0.5, 9.0, 9.0], "amd_classifier": [1.0, 2.4, 0.9, 9.0, 1.0]})
    # autotune: BMM (10 + 0) / 2 = 5%, FC 50% -> 27.5; classifier: BMM (0 + 20) / 2 = 10%, FC 10% -> 10, chosen.
    # Neither the element-wise row nor the GPU never trained on counts.
    t = amd_eval.spec_tile_choice(f).set_index("rule")
    assert t.loc["autotune", ["BMM", "FC", "mean"]].astype(float).tolist() == pytest.approx([5, 50, 27.5])
    assert t.loc["classifier", ["BMM", "FC", "mean"]].astype(float).tolist() == pytest.approx([10, 10, 10])
    assert t["chosen"].tolist() == [False, True]


def test_smem_softmax_by_hand():
    # H <= 1024: the warp kernel; else H a multiple of 4 that fits 65,536 bytes of shared memory less one float per
    # 64-lane wavefront: H = 16,372 and 16,376 take 512 threads (floor(min(H / 4, 1024) / 2) = 512), so 8 floats of
    # reduction and (65,536 - 32) / 4 = 16,376 elements at most (strictly fewer)
    H = [4, 1024, 1025, 1028, 2048, 2050, 16372, 16376]
    assert rocm_softmax.smem_softmax(H).tolist() == [False, False, False, True, True, False, True, False]
    assert rocm_softmax.rocm_softmax_kernel(H).tolist() == ["warp", "warp", "block", "smem", "smem", "block", "smem", "block"]


def test_rocm_softmax_vec_sets_the_shared_memory_rows_only():
    feat = pd.DataFrame({"op": ["softmax", "softmax", "softmax", "ln"], "H": [2048.0, 2050.0, 512.0, 2048.0],
                         "f_vec": [0.3, 0.4, 0.0, 1.0]})
    out = rocm_softmax.rocm_softmax_vec(feat)
    assert out["f_vec"].tolist() == [1.0, 0.4, 0.0, 1.0]
    assert feat["f_vec"].tolist() == [0.3, 0.4, 0.0, 1.0]       # the caller's table is left as it was
    no_h = pd.DataFrame({"op": ["bmm"], "f_vec": [1.0]})
    assert rocm_softmax.rocm_softmax_vec(no_h) is no_h


def test_softmax_kernels_the_rule_names_every_amd_rows_kernel():
    rows = rocm_softmax.softmax_rows()
    r = rows.iloc[0]
    assert r["elements"] == r["B"] * r["H"] and r["ns_per_element"] == pytest.approx(r["latency_ms"] * 1e6 / r["elements"])
    t = rocm_softmax.softmax_kernels(rows)
    assert t.equals(rocm_softmax.softmax_kernels())
    assert set(t["kernel"]) == {"warp", "block", "smem"} and (t["rule_share"] == 1).all()
    assert t["rows"].sum() == len(amd.amd_rows("SOFTMAX"))
    smem = t[t["kernel"] == "smem"]
    assert (smem["f_vec_a3_min"] == 1).all() and (smem["f_vec_cuda_min"] < 1).all()
    block = t[t["kernel"] == "block"].set_index("device")
    assert (block["f_vec_a3_max"] < 1).all() and (block["f_vec_a3_max"] == block["f_vec_cuda_max"]).all()


def test_a3_softmax_models_learn_and_forecast_with_rocms_f_vec(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    from lib.utilization import input_names
    gpu = TRAIN_GPUS_AMD[0]
    cfg = TINY_SOFTMAX
    a3 = amd.train_amd("SOFTMAX", gpu, cfg, smem_input=False)
    old = amd.train_amd("SOFTMAX", gpu, cfg, rocm_softmax=False)
    assert a3.feature_rule is rocm_softmax.rocm_softmax_vec and old.feature_rule is None
    assert not a3.info["cached"] and not old.info["cached"]       # two keys, two models
    assert amd.train_amd("LN", gpu, TINY).feature_rule is None
    # f_vec's training range reaches 1 only with A3 (no training row is loaded wholly as 4-vectors by CUDA's rule)
    vec = input_names("SOFTMAX", a3.features).index("f_vec")
    assert a3.hi[vec] == 1 and old.hi[vec] < 1
    feat = smem_and_block_rows(gpu)
    assert feat["f_vec"].max() < 1
    assert np.array_equal(a3.inputs(feat), replace_rule(a3).inputs(rocm_softmax.rocm_softmax_vec(feat)))
    assert not np.array_equal(a3.inputs(feat)[0], replace_rule(a3).inputs(feat)[0])   # H = 3000 runs Smem
    assert np.array_equal(a3.inputs(feat)[1], replace_rule(a3).inputs(feat)[1])       # H = 3001 does not


def test_rocm_softmax_inputs_add_f_smem_to_a3s_table():
    feat = pd.DataFrame({"op": ["softmax", "softmax", "softmax", "ln"], "H": [2048.0, 2050.0, 512.0, 2048.0],
                         "f_vec": [0.3, 0.4, 0.0, 1.0]})
    out = rocm_softmax.rocm_softmax_inputs(feat)
    assert out["f_vec"].tolist() == rocm_softmax.rocm_softmax_vec(feat)["f_vec"].tolist() == [1.0, 0.4, 0.0, 1.0]
    assert out[rocm_softmax.SMEM_FEATURE].tolist() == [1.0, 0.0, 0.0, 0.0]     # the shared-memory softmax row alone
    assert rocm_softmax.SMEM_FEATURE not in feat
    no_h = pd.DataFrame({"op": ["bmm"], "f_vec": [1.0]})
    assert rocm_softmax.rocm_softmax_inputs(no_h)[rocm_softmax.SMEM_FEATURE].tolist() == [0.0]


def test_a4_softmax_models_take_f_smem_on_top_of_a3(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    gpu = TRAIN_GPUS_AMD[0]
    cfg = TINY_SOFTMAX
    a4 = amd.train_amd("SOFTMAX", gpu, cfg, smem_input=True)
    a3 = amd.train_amd("SOFTMAX", gpu, cfg, smem_input=False)
    assert a4.feature_rule is rocm_softmax.rocm_softmax_inputs and a3.feature_rule is rocm_softmax.rocm_softmax_vec
    assert a4.features == (*a3.features, rocm_softmax.SMEM_FEATURE) and len(a4.mean) == len(a3.mean) + 1
    assert not a4.info["cached"] and not a3.info["cached"]        # two keys, two models
    # the default is AMD_SMEM_INPUT; before A3 there is nothing to add to, and the other classes are left alone
    assert amd.train_amd("SOFTMAX", gpu, cfg).info["cached"] and rocm_softmax.AMD_SMEM_INPUT
    assert amd.train_amd("SOFTMAX", gpu, cfg, rocm_softmax=False, smem_input=True).feature_rule is None
    ln = amd.train_amd("LN", gpu, TINY, smem_input=True)
    assert ln.feature_rule is None and amd.train_amd("LN", gpu, TINY, smem_input=False).info["cached"]
    # f_smem's training range is [0, 1]: the MI100 rows run both block kernels
    assert (a4.lo[-1], a4.hi[-1]) == (0, 1)
    feat = smem_and_block_rows(gpu)
    x = a4.inputs(feat)
    assert np.array_equal(x, replace_rule(a4).inputs(rocm_softmax.rocm_softmax_inputs(feat)))
    assert x[0, -1] > x[1, -1]                                      # standardized f_smem: 1 for H = 3000, 0 for 3001


def test_smem_input_choice_by_hand():
    base = pd.DataFrame({"setting": ["held-out shapes"] * 3 + ["GPU never trained on"],
                         "op_class": ["SOFTMAX", "SOFTMAX", "LN", "SOFTMAX"], "B": [1, 2, 3, 4], "H": [5.0, 6.0, 7.0, 8.0],
                         "device": ["x"] * 4, "latency_ms": [1.0, 2.0, 1.0, 1.0]})
    a3 = base.assign(amd_spec=[1.1, 2.0, 9.0, 1.0])     # (10 + 0) / 2 = 5%
    a4 = base.assign(amd_spec=[1.0, 2.2, 1.0, 9.0])     # (0 + 10) / 2 = 5%: a tie; neither LN nor the unseen GPU counts
    t = amd_eval.smem_input_choice(a3, a4).set_index("models")
    assert t["mape"].tolist() == pytest.approx([5, 5]) and t["kernels"].tolist() == [2, 2]
    assert t["chosen"].tolist() == [True, False]
    assert t.loc["A4", "median_ratio"] == pytest.approx(1.05)
    t = amd_eval.smem_input_choice(a3, a4.assign(amd_spec=[1.0, 2.1, 9.0, 9.0])).set_index("models")   # 2.5% < 5%
    assert t["chosen"].tolist() == [False, True]
    with pytest.raises(P.PredictorError, match="same held-out softmax rows"):
        amd_eval.smem_input_choice(a3, a4.assign(H=[5.0, 9.0, 7.0, 8.0]))


def smem_and_block_rows(gpu: str) -> pd.DataFrame:
    """Two featured softmax rows on gpu's spec: 4,096 rows of 3,000 elements (ROCm's shared-memory kernel) and of 3,001."""
    from lib.features import add_features
    return add_features(pd.DataFrame({"op": ["softmax"] * 2, "B": [4096, 4096], "H": [3000.0, 3001.0]})
                        .assign(**device_by_name(gpu).spec_columns()), tiles="oracle")


def replace_rule(p):
    """The predictor without its feature rule."""
    from dataclasses import replace
    return replace(p, feature_rule=None)


def test_own_rows_forecast_is_the_all_models_forecast_of_every_row(tmp_path, monkeypatch):
    from lib.kernels import predict_by_device
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    f = amd.own_rows_forecast("LN", TINY)
    assert len(f) == len(amd.amd_rows("LN")) and set(f["device"]) == set(TRAIN_GPUS_AMD)
    model = amd.train_amd("LN", "all", TINY)
    assert f["pred_ms"].to_numpy() == pytest.approx(
        predict_by_device(f.drop(columns="pred_ms"), tiles="oracle", cfg_by_class={"LN": model}), rel=1e-9)
    fit = amd.training_fit(TINY).set_index("op_class")
    assert fit.loc["LN", "mape"] == pytest.approx((f["pred_ms"] / f["latency_ms"] - 1).abs().mean() * 100)


def test_softmax_twins_by_hand(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    models = {"SOFTMAX": amd.train_amd("SOFTMAX", TRAIN_GPUS_AMD[0], TINY)}
    t = rocm_softmax.softmax_twins(models)
    assert len(t) == len(rocm_softmax.TWIN_ROWS) * len(rocm_softmax.TWIN_LENGTHS) and (rocm_softmax.smem_softmax(t["H"])).all()
    assert not rocm_softmax.smem_softmax(t["H"] - 1).any()                       # each twin runs the block kernel
    r = t.iloc[-1]
    shapes = pd.DataFrame({"op": ["softmax"] * 2, "B": [r["B"]] * 2, "H": [r["H"], r["H"] - 1]})
    ms = predict_kernels(shapes, device_by_name(TRAIN_GPUS_AMD[1]), cfg_by_class=models)
    assert r["smem_over_block"] == pytest.approx((ms[0] / r["H"]) / (ms[1] / (r["H"] - 1)), rel=1e-6)


def test_f_vec_response_sets_f_vec_alone(tmp_path, monkeypatch):
    from lib.features import add_features
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    cfg = TINY_SOFTMAX
    model = amd.train_amd("SOFTMAX", TRAIN_GPUS_AMD[0], cfg)
    t = rocm_softmax.f_vec_response(model)
    assert t["f_vec"].tolist() == list(rocm_softmax.F_VEC_VALUES) and t["f_vec"].iloc[[0, -1]].tolist() == [0, 1]
    B, H = rocm_softmax.F_VEC_PROBE
    assert not rocm_softmax.smem_softmax(H)          # the rule leaves the probe's f_vec as set
    feat = add_features(pd.DataFrame({"op": ["softmax"], "B": [B], "H": [float(H)]})
                        .assign(**device_by_name(TRAIN_GPUS_AMD[1]).spec_columns()), tiles="oracle")
    assert t["ns_per_element"].iloc[-1] == pytest.approx(model.predict(feat.assign(f_vec=1.0))[0] * 1e6 / (B * H))


def test_softmax_seed_spread_run_0_is_the_models_as_given(tmp_path, monkeypatch):
    from lib.label_eval import evaluate_labels
    from lib.labels import load_labels
    from lib.metrics import mape
    from lib.selection import spread_seed
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    t = amd_eval.softmax_seed_kernels([0, 1], TINY)
    assert set(t["run"]) == {0, 1} and set(t["models"]) == set(amd_eval.SEED_MODELS)
    assert set(t["kernel"]) == {"all", "warp", "block", "smem"} and set(t["setting"]) == set(amd_eval.SETTINGS)
    f = amd_eval.kernel_forecasts(TINY, smem_input=True, op_classes=("SOFTMAX",))
    held = f[f["setting"] == "held-out shapes"]
    row = t.query("run == 0 and models == 'A4' and setting == 'held-out shapes' and kernel == 'all'").iloc[0]
    assert row["kernels"] == len(held) and row["mape"] == pytest.approx(mape(held["amd_spec"], held["latency_ms"]))
    other = t.query("run == 1 and models == 'A4' and setting == 'held-out shapes' and kernel == 'all'").iloc[0]
    assert other["mape"] != row["mape"]                                  # another seed, another model
    assert spread_seed(TINY, 1) == 1 and amd_eval._seeded_softmax(None, 2)["seed"] == 6   # ensembles of 3 share no seed
    labels = load_labels().query("vendor == 'amd' and option == '' and model == 'bert_large' and mode == 'inference'")
    labels = labels.head(2).reset_index(drop=True)
    e = amd_eval.softmax_seed_labels(labels, [0], TINY).set_index(["models", "device"])
    ev = evaluate_labels(labels, methods=["neusight"], cfg_by_class=amd.amd_predictors("all", TINY, smem_input=False))
    assert e.loc[("A3", "all AMD GPUs"), "mape"] == pytest.approx(ev["neusight_ape"].mean())
    assert e.loc[("A3", "all AMD GPUs"), "labels"] == 2
