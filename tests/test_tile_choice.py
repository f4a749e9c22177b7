"""lib.tile_choice: the spec-only autotuner picks each kernel's own fastest tile, the classifier the narrow ones'."""
import numpy as np
import pandas as pd
import pytest

from lib import paths
from lib.devices import device_by_name
from lib.features import add_features
from lib.kernels import predict_kernels
from lib.predictors import predict_featured
from lib.tile_choice import (CANDIDATES, NARROW_SIDE, SPEC_COLS, autotune_tiles, classifier_gpus, classify_tiles,
                             fit_tile_classifier, narrow_gemms, oracle_tile_labels, spec_range, tile_forest,
                             within_range)


def test_autotune_picks_each_rows_own_best_tile():
    spec = device_by_name("Tesla T4").spec_columns()
    df = pd.DataFrame([{"op": "bmm", "B": 1.0, "M": 64.0, "N": 32.0, "K": 128.0, "H": np.nan, **spec},
                       {"op": "bmm", "B": 1.0, "M": 128.0, "N": 32.0, "K": 32.0, "H": np.nan, **spec}])
    # a fake predictor, fastest (1 ms) for the tile that matches the kernel's own output M x K
    fake_ms = lambda f: (1 + (f["tile_m"] - f["M"]).abs() + (f["tile_n"] - f["K"]).abs()).to_numpy(float)
    tile_m, tile_n, pred_ms = autotune_tiles(df, fake_ms)
    assert tile_m.tolist() == [64, 128] and tile_n.tolist() == [128, 32] and pred_ms.tolist() == [1, 1]


def test_spec_tiles_are_the_autotuner_for_wide_gemms_and_the_classifier_for_narrow_ones():
    # tiles='spec' (amendment 9: 'ranged', on a training GPU amendment 8's 'hybrid') with the deployed models: a GEMM
    # whose smaller output side min(M, K) is 128 or more is forecast at the least of its forecasts with each candidate tile given (T4, a training GPU: no spec
    # envelope); one below 128 (the third and fourth rows: K = 64, M = 96) at the tile the classifier picks
    t4 = device_by_name("Tesla T4")
    df = pd.DataFrame({"op": ["bmm", "linear", "bmm", "bmm"], "B": [8, 1, 16, 64], "M": [512, 2048, 1024, 96],
                       "N": [64, 1024, 1024, 64], "K": [512, 4096, 64, 128]})
    assert narrow_gemms(df).tolist() == [False, False, True, True]
    spec = predict_kernels(df, t4, tiles="spec")
    feat = df.assign(H=np.nan, **t4.spec_columns())
    per_tile = np.stack([predict_featured(add_features(feat.assign(tile_m=m, tile_n=n), tiles="given"))
                         for m, n in CANDIDATES], axis=1)
    np.testing.assert_allclose(spec[:2], per_tile[:2].min(axis=1), rtol=1e-6)
    np.testing.assert_allclose(spec, predict_kernels(df, t4, tiles="hybrid"), rtol=1e-6)
    np.testing.assert_allclose(spec, predict_kernels(df, t4, tiles="ranged"), rtol=1e-6)
    classified = predict_kernels(df, t4, tiles="classifier")
    np.testing.assert_allclose(spec[2:], classified[2:], rtol=1e-6)
    assert not np.allclose(spec[:2], classified[:2], rtol=1e-6)
    assert not np.allclose(spec[2:], per_tile[2:].min(axis=1), rtol=1e-6)   # the narrow rows' fastest tile is not it


def test_spec_tiles_beyond_the_classifiers_range_are_the_autotuners():
    # amendment 9: on the H100 (132 SMs, 67 TFLOP/s: beyond every training GPU) the narrow batched matmul too takes the
    # autotuner's tile, which amendment 8's hybrid gives the classifier's; the narrow linear layer takes both tiles'
    # geometric mean since amendment 10
    h100 = device_by_name("NVIDIA H100 80GB HBM3")
    df = pd.DataFrame({"op": ["bmm", "bmm", "linear"], "B": [8, 16, 1], "M": [512, 1024, 32], "N": [64, 1024, 4096],
                       "K": [512, 64, 1024]})
    assert narrow_gemms(df).tolist() == [False, True, True]
    spec, auto = predict_kernels(df, h100), predict_kernels(df, h100, tiles="autotune")
    np.testing.assert_allclose(spec[:2], auto[:2], rtol=1e-6)
    np.testing.assert_allclose(spec[2], np.sqrt(auto[2] * predict_kernels(df, h100, tiles="classifier")[2]), rtol=1e-6)
    np.testing.assert_allclose(spec[:1], predict_kernels(df, h100, tiles="hybrid")[:1], rtol=1e-6)
    assert not np.allclose(spec[1:], predict_kernels(df, h100, tiles="hybrid")[1:], rtol=1e-6)


def test_spec_tiles_hedge_an_fc_narrow_gemm_beyond_the_classifiers_range():
    # amendment 10 (FC only): beyond the range a narrow linear layer is forecast at the geometric mean of its forecasts
    # with the classifier's and the autotuner's tile; a narrow batched matmul keeps the autotuner's (amendment 9), and
    # within the range (T4) both keep the classifier's
    from lib.kernels import SPEC_TILES
    assert SPEC_TILES == {"BMM": "ranged", "FC": "hedged"}
    df = pd.DataFrame({"op": ["linear", "bmm", "linear"], "B": [1, 16, 1], "M": [64, 1024, 2048], "N": [1024, 64, 1024],
                       "K": [16384, 64, 4096]})
    assert narrow_gemms(df).tolist() == [True, True, False]
    h100, t4 = device_by_name("NVIDIA H100 80GB HBM3"), device_by_name("Tesla T4")
    spec, auto, clf = (predict_kernels(df, h100, tiles=t) for t in ("spec", "autotune", "classifier"))
    np.testing.assert_allclose(spec[0], np.sqrt(auto[0] * clf[0]), rtol=1e-6)
    assert min(auto[0], clf[0]) < spec[0] < max(auto[0], clf[0])           # the two tiles' forecasts differ
    np.testing.assert_allclose(spec[1:], auto[1:], rtol=1e-6)
    np.testing.assert_allclose(predict_kernels(df, h100, tiles="hedged"), [spec[0], np.sqrt(auto[1] * clf[1]), spec[2]],
                               rtol=1e-6)                                    # 'hedged' for every class: the bmm too
    np.testing.assert_allclose(predict_kernels(df, t4), predict_kernels(df, t4, tiles="hybrid"), rtol=1e-6)


def test_within_range_of_the_training_gpus_spec():
    train = ["Tesla P4", "Tesla P100-PCIE-16GB", "Tesla T4", "Tesla V100-PCIE-32GB", "NVIDIA A100-PCIE-40GB"]
    lo, hi = spec_range(train)
    # by hand from data/devices: SMs 40-108, peak 5,699-19,492 GFLOP/s, 192-1,555 GB/s, L2 2-40 MB, 8-40 GB
    np.testing.assert_array_equal(lo, [40, 5699, 192, 2, 8])
    np.testing.assert_array_equal(hi, [108, 19492, 1555, 40, 40])
    assert SPEC_COLS == ("num_sm", "peak_gflops", "mem_bw_gbps", "l2_mb", "mem_gb")
    rows = lambda names: pd.DataFrame([device_by_name(g).spec_columns() for g in names])
    assert within_range(rows(train)).all()                                  # ends included
    beyond = ["NVIDIA H100 80GB HBM3", "NVIDIA A100 80GB PCIe", "NVIDIA H200", "NVIDIA L4"]
    assert not within_range(rows(beyond)).any()                             # A100-80GB: 1,935 GB/s, 80 GB
    # a LOGO fold's range is its four GPUs': the P4 (5.7 TFLOP/s) and the A100 lie outside, the others inside
    fold = [within_range(rows([g]), [o for o in train if o != g])[0] for g in train]
    assert fold == [False, True, True, True, False]
    # one field beyond the range is enough: the T4 with twice the V100's bandwidth
    assert not within_range(rows(["Tesla T4"]).assign(mem_bw_gbps=1800.0))[0]
    assert classifier_gpus(None) is None and classifier_gpus({"BMM": object()}) is None


def test_narrow_gemms_by_the_smaller_output_side():
    df = pd.DataFrame({"M": [127, 128, 4096, 1], "N": [1, 1, 1, 1], "K": [4096, 128, 127, 1]})
    assert narrow_gemms(df).tolist() == [True, False, True, True]        # N, the reduction, plays no part
    assert NARROW_SIDE == CANDIDATES.max()                                 # the candidates' largest tile side


def test_autotune_skips_missing_and_nonpositive_forecasts():
    # NaN, 0, negative and inf forecasts are no latency: the least positive finite one (3 ms at 64 x 128) wins
    spec = device_by_name("Tesla T4").spec_columns()
    df = pd.DataFrame([{"op": "bmm", "B": 1.0, "M": 64.0, "N": 32.0, "K": 128.0, "H": np.nan, **spec}])
    ms = {(32, 32): np.nan, (32, 64): 0.0, (32, 128): -1.0, (64, 64): 5.0, (64, 128): 3.0, (128, 32): np.inf,
          (128, 128): 4.0}
    fake_ms = lambda f: np.array([ms[(int(m), int(n))] for m, n in zip(f["tile_m"], f["tile_n"])])
    tile_m, tile_n, pred_ms = autotune_tiles(df, fake_ms)
    assert (tile_m.tolist(), tile_n.tolist(), pred_ms.tolist()) == ([64], [128], [3.0])


def test_autotune_gives_nan_where_no_candidate_has_a_forecast():
    # a row whose every candidate forecast is missing or not positive has no forecast (NaN), not an infinite one;
    # the other row keeps its least positive forecast
    spec = device_by_name("Tesla T4").spec_columns()
    df = pd.DataFrame([{"op": "bmm", "B": 1.0, "M": m, "N": 32.0, "K": 128.0, "H": np.nan, **spec} for m in (64.0, 96.0)])
    fake_ms = lambda f: np.where(f["M"] == 64, f["tile_m"].to_numpy(float), np.where(f["tile_m"] > 32, np.nan, -1.0))
    tile_m, tile_n, pred_ms = autotune_tiles(df, fake_ms)
    assert tile_m[0] == 32 and pred_ms[0] == 32
    assert np.isnan(tile_m[1]) and np.isnan(tile_n[1]) and np.isnan(pred_ms[1])


def test_oracle_tile_labels_by_hand():
    # index into CANDIDATES of the tile in the name (volta names: first number over K, second over M);
    # a tile that is no candidate, or a name without one, is -1 (left out of the classifier), not candidate 0
    assert CANDIDATES.tolist()[0] == [32, 32] and CANDIDATES.tolist()[4] == [64, 128]
    names = ["volta_sgemm_32x32_nn", "volta_sgemm_128x64_nn", "ampere_sgemm_128x256_nn", "gemv2T_kernel_val", None]
    assert oracle_tile_labels(pd.DataFrame({"kernel_name": names})).tolist() == [0, 4, -1, -1, -1]


def test_tile_classifier_learns_every_oracle_tile_including_the_first():
    # small GEMMs ran 32 x 32 tiles (candidate 0), large ones 128 x 128 (candidate 6); a row without a tile is dropped
    spec = device_by_name("Tesla T4").spec_columns()
    small = [{"op": "bmm", "B": 1.0, "M": 32.0, "N": 32.0, "K": 32.0, "kernel_name": "volta_sgemm_32x32_nn", **spec}]
    large = [{"op": "bmm", "B": 8.0, "M": 4096.0, "N": 4096.0, "K": 4096.0, "kernel_name": "volta_sgemm_128x128_nn",
              **spec}]
    df = pd.DataFrame(small * 20 + large * 20 + [{**small[0], "kernel_name": "gemv2T_kernel_val"}])
    forest = fit_tile_classifier(df)
    assert forest.classes_.tolist() == [0, 6]
    assert [t.tolist() for t in classify_tiles(df.iloc[[0, 20]], forest)] == [[32, 128], [32, 128]]


def test_classify_tiles_reads_tile_m_and_tile_n_from_the_candidates():
    # a stand-in forest that picks candidates 0, 4 and 5: (32, 32), (64, 128), (128, 32) as (tile_m, tile_n)
    class Forest:
        def predict(self, x):
            assert x.shape == (3, 10)    # log B, M, N, K, is_linear and the five log spec numbers
            return np.array([0, 4, 5])
    spec = device_by_name("Tesla T4").spec_columns()
    df = pd.DataFrame([{"op": "linear", "B": 1.0, "M": 8.0, "N": 16.0, "K": 32.0, **spec}] * 3)
    tile_m, tile_n = classify_tiles(df, Forest())
    assert tile_m.tolist() == [32, 64, 128] and tile_n.tolist() == [32, 128, 32]


def test_tile_classifier_samples_max_rows_with_its_seed_and_caches_per_seed_and_size(monkeypatch, tmp_path):
    # each (seed, max_rows) fits once, on max_rows rows drawn with that seed (all rows when max_rows is None or more)
    import lib.tile_choice as TC
    fits = []
    monkeypatch.setattr(TC, "_FOREST", {})
    monkeypatch.setattr(TC, "forest_path", lambda seed, max_rows: tmp_path / f"forest-{seed}-{max_rows}.pkl")
    monkeypatch.setattr(TC, "load_kernels", lambda ops, splits: pd.DataFrame({"x": range(10)}))
    monkeypatch.setattr(TC, "fit_tile_classifier", lambda df, seed: fits.append((len(df), seed)) or len(fits))
    got = [TC.tile_classifier(0, 3), TC.tile_classifier(0, None), TC.tile_classifier(1, 50), TC.tile_classifier(0, 3)]
    assert got == [1, 2, 3, 1]
    assert fits == [(3, 0), (10, 0), (10, 1)]
    # a new process (no forest in memory) loads each from build/cache and fits nothing
    monkeypatch.setattr(TC, "_FOREST", {})
    assert [TC.tile_classifier(0, 3), TC.tile_classifier(1, 50)] == [1, 3] and len(fits) == 3
    # a file that is no saved forest fails with its path, and is not fitted over
    TC._FOREST.clear()
    (tmp_path / "forest-0-3.pkl").write_bytes(b"not a pickle")
    with pytest.raises(RuntimeError, match="forest-0-3.pkl: not a saved tile classifier"):
        TC.tile_classifier(0, 3)
    assert len(fits) == 3 and (tmp_path / "forest-0-3.pkl").read_bytes() == b"not a pickle"


def test_saved_tile_classifier_is_keyed_by_seed_rows_and_code_and_chooses_the_fitted_tiles(monkeypatch, tmp_path):
    # the key moves with the seed, the rows and the constants of the fitting code, and the forest loaded from the
    # file picks every tile the fitted one picks
    import pickle
    import lib.tile_choice as TC
    base = TC.forest_path(0, 2000)
    assert base.parent == paths.CACHE and base.suffix == ".pkl"
    assert len({base, TC.forest_path(1, 2000), TC.forest_path(0, 3000)}) == 3
    monkeypatch.setattr(TC, "FOREST_MIN_LEAF", TC.FOREST_MIN_LEAF + 1)
    assert TC.forest_path(0, 2000) != base
    monkeypatch.undo()
    real_path = TC.forest_path
    monkeypatch.setattr(TC, "forest_path", lambda seed, max_rows: tmp_path / real_path(seed, max_rows).name)
    monkeypatch.setattr(TC, "_FOREST", {})
    fitted = TC.tile_classifier(0, 2000)
    assert TC.forest_path(0, 2000).is_file()
    loaded = pickle.loads(TC.forest_path(0, 2000).read_bytes())
    from lib.data import load_kernels
    rows = load_kernels(ops=["bmm", "linear"], devices="NVIDIA H100 80GB HBM3").sample(500, random_state=0)
    assert np.array_equal(np.stack(classify_tiles(rows, fitted)), np.stack(classify_tiles(rows, loaded)))


def test_a_classifier_over_other_candidates_labels_and_reads_them():
    # lib.amd's indexes the AMD tiles: Tensile's MT128x64x16 is tile (64, 128) (lib.tiles), MT16x8x32 is (8, 16); a
    # tile that is no candidate is -1
    amd = np.array([[8.0, 16.0], [64.0, 128.0]])
    names = ["Cijk_Ailk_Bljk_SB_MT128x64x16_MI32x32x2x1_SE", "Cijk_Ailk_Bljk_SB_MT16x8x32_SE",
             "Cijk_Ailk_Bljk_SB_MT64x64x32_MI16x16x4x1_SE"]
    assert oracle_tile_labels(pd.DataFrame({"kernel_name": names}), amd).tolist() == [1, 0, -1]
    spec = device_by_name("AMD Instinct MI100").spec_columns()
    small = {"op": "bmm", "B": 1.0, "M": 8.0, "N": 8.0, "K": 8.0, "kernel_name": names[1], **spec}
    large = {"op": "bmm", "B": 8.0, "M": 4096.0, "N": 4096.0, "K": 4096.0, "kernel_name": names[0], **spec}
    df = pd.DataFrame([small] * 20 + [large] * 20)
    forest = fit_tile_classifier(df, 0, amd)
    assert [t.tolist() for t in classify_tiles(df.iloc[[0, 20]], forest, amd)] == [[8, 64], [16, 128]]


def test_tile_forest_is_the_gemm_predictors_own():
    class Carrying:
        tile_forest = "the forest"
    assert tile_forest(None) is None and tile_forest({"BMM": {"layers": 1}}) is None
    assert tile_forest({"LN": Carrying()}) is None and tile_forest({"FC": Carrying()}) == "the forest"


def test_a_held_out_gpus_models_choose_tiles_without_its_kernel_names():
    # a model trained as if a GPU were never trained on (lib.selection.held_out_configs) carries a classifier fitted
    # without that GPU's rows, trusted within the other four GPUs' spec range (amendment 9): the P4, below the others'
    # peak, L2, bandwidth and memory, takes the autotuner's tiles for its batched matmuls and both tiles' geometric mean
    # for its linear layer (amendment 10); the T4 the classifier's that never saw its tiles
    from lib.devices import TRAIN_GPUS_NVIDIA
    from lib.predictors import get_predictor
    from lib.selection import held_out_configs
    from lib.tile_choice import held_out_classifier, tile_classifier
    df = pd.DataFrame({"op": ["bmm", "bmm", "linear"], "B": [16, 64, 1], "M": [512, 96, 32], "N": [64, 64, 4096],
                       "K": [64, 128, 1024]})
    assert narrow_gemms(df).all()
    for gpu in ("Tesla P4", "Tesla T4"):
        cfg = held_out_configs(gpu)
        model = get_predictor("BMM", cfg["BMM"])
        assert model.tile_gpus == tuple(g for g in TRAIN_GPUS_NVIDIA if g != gpu)
        assert model.tile_forest is held_out_classifier(gpu) and model.tile_forest is not tile_classifier()
        assert get_predictor("EW", cfg["EW"]).tile_forest is None
    p4, t4 = device_by_name("Tesla P4"), device_by_name("Tesla T4")
    p4_cfg, t4_cfg = held_out_configs("Tesla P4"), held_out_configs("Tesla T4")
    spec = predict_kernels(df, p4, cfg_by_class=p4_cfg)
    auto = predict_kernels(df, p4, tiles="autotune", cfg_by_class=p4_cfg)
    np.testing.assert_array_equal(spec[:2], auto[:2])
    clf = predict_kernels(df, p4, tiles="classifier", cfg_by_class=p4_cfg)
    np.testing.assert_allclose(spec[2], np.sqrt(auto[2] * clf[2]), rtol=1e-6)
    feat = df.assign(H=np.nan, **t4.spec_columns())
    m, n = classify_tiles(feat, held_out_classifier("Tesla T4"))
    by_hand = predict_featured(add_features(feat.assign(tile_m=m, tile_n=n), tiles="given"), t4_cfg)
    np.testing.assert_allclose(predict_kernels(df, t4, cfg_by_class=t4_cfg), by_hand, rtol=1e-6)
