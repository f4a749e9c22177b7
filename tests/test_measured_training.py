"""lib.measured_training: the unseen-GPU models with our H200's kernels as a sixth training GPU (tiny configs)."""
import numpy as np
import pandas as pd
import pytest

from lib import paths, predictors as P
from lib import measured_training as MT
from lib.data import load_kernels
from lib.devices import TRAIN_GPUS_NVIDIA, device_by_name
from lib.envelope import envelope_rows
from lib.measured import MeasuredError, measured_kernels

TINY = {"layers": 1, "width": 8, "epochs": 1, "batch_size": 4096, "max_rows": 1500, "validation": "none"}


def test_measured_rows_are_the_runs_kernels_with_the_spec_json_and_the_training_tables_columns():
    rows = MT.measured_rows()
    own = measured_kernels()
    assert len(rows) == (own["run"] == MT.RUN).sum() > 2000
    assert list(rows.columns) == list(load_kernels(ops="BMM", splits="train").columns)
    assert set(rows["device"]) == {"NVIDIA H200"} and set(rows["split"]) == {"train"}
    # the spec JSON of data/devices/ (141 GB, 4,800 GB/s), not the collector's device.json (139.8 GiB, 4,814)
    assert set(rows["mem_gb"]) == {141.0} and set(rows["mem_bw_gbps"]) == {4800.0} and set(rows["num_sm"]) == {132}
    assert rows.groupby("op_class").size().to_dict() == own[own["run"] == MT.RUN].groupby("op_class").size().to_dict()


def test_a_run_without_kernels_is_an_error_naming_its_folder():
    with pytest.raises(MeasuredError, match="NVIDIA_X_torch0_cuda0: no kernel CSVs"):
        MT.measured_rows("NVIDIA_X_torch0_cuda0")


def test_memory_per_sm_range_takes_the_h200_in_by_hand():
    five = [device_by_name(g) for g in TRAIN_GPUS_NVIDIA]
    per_sm = [d.mem_gb / d.num_sm for d in five]
    # H200: 141 GB over 132 SMs = 1.068 GB per SM, beyond every training GPU's (V100: 32 / 80 = 0.4 at most)
    assert max(per_sm) < 141 / 132
    assert MT.mem_per_sm_gb() == pytest.approx((min(per_sm), 141 / 132))


def test_the_stand_in_loader_adds_the_runs_rows_of_the_class_asked_for_only():
    loader = MT._with_run(MT.RUN)
    base = load_kernels(ops="LN", splits="train")
    got = loader(ops="LN", splits="train")
    assert len(got) == len(base) + (MT.measured_rows()["op_class"] == "LN").sum()
    assert set(got["device"]) == set(base["device"]) | {"NVIDIA H200"} and set(got["op_class"]) == {"LN"}


def test_shapes_measured_by_hand():
    own = MT.measured_rows().iloc[[0]]
    other = own.assign(B=own["B"] + 0.5)
    assert MT.shapes_measured(pd.concat([own, other]), MT.RUN).tolist() == [True, False]


def test_kernel_comparison_by_hand():
    rows = pd.DataFrame({"op": ["bmm"] * 3, "op_class": ["BMM"] * 3, "device": ["a", "a", "b"],
                         "B": [1e9] * 3, "M": [1.0] * 3, "N": [1.0] * 3, "K": [1.0] * 3, "H": [np.nan] * 3,
                         "latency_ms": [1.0, 2.0, 4.0]})
    t = MT.kernel_comparison(rows, np.array([1.1, 2.0, 2.0]), np.array([1.0, 2.2, 4.0])).set_index("device")
    # default APE 10, 0, 50; variant 0, 10, 0
    assert t.loc["a", ["kernels", "default_mape", "variant_mape"]].tolist() == pytest.approx([2, 5, 5])
    assert t.loc["all GPUs", ["kernels", "default_mape", "variant_mape"]].tolist() == pytest.approx([3, 20, 10 / 3])
    assert (t["shapes_run_measured"] == 0).all()
    # no shape of these is the run's: the unmeasured columns are the same means
    assert np.allclose(t["default_mape_unmeasured"], t["default_mape"]) and np.allclose(t["variant_mape_unmeasured"],
                                                                                        t["variant_mape"])
    # one row's shape the run measured: it leaves the unmeasured means
    own = MT.measured_rows().iloc[[0]][["op", "B", "M", "N", "K", "H"]].assign(op_class="X", device="a", latency_ms=1.0)
    both = pd.concat([own, own.assign(B=own["B"] + 0.5, latency_ms=2.0)], ignore_index=True)
    u = MT.kernel_comparison(both, np.array([2.0, 2.0]), np.array([1.0, 3.0])).set_index("device").loc["a"]
    # APE: default 100, 0; variant 0, 50; the unmeasured row is the second
    assert u[["shapes_run_measured", "default_mape", "variant_mape", "default_mape_unmeasured",
              "variant_mape_unmeasured"]].tolist() == pytest.approx([0.5, 50, 25, 0, 50])


def test_the_variant_learns_the_runs_rows_and_carries_its_range_forest_and_envelope(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    cfg = {**TINY, "max_rows": None, "hold_mem": True, "envelope": True, "features": P.DEFAULT_CONFIGS["LN"]["features"]}
    p = MT.train_with_run("LN", cfg)
    n_default = len(P.training_table("LN"))
    assert p.info["train_rows"] == n_default + (MT.measured_rows()["op_class"] == "LN").sum() and not p.info["cached"]
    assert MT.train_with_run("LN", cfg).info["cached"]   # the second call loads
    assert p.mem_per_sm_gb == MT.mem_per_sm_gb() and p.envelope and p.tile_forest is None
    # the envelope reads a predictor's field as it reads a config's key
    rows = pd.DataFrame({"op": ["ln", "softmax"]})
    assert envelope_rows(rows, {"LN": p, "SOFTMAX": {"envelope": False}}).tolist() == [True, False]
    assert envelope_rows(rows, {"LN": MT.train_with_run("LN", {**cfg, "envelope": False}),
                                "SOFTMAX": {"envelope": False}}).tolist() == [False, False]
    g = MT.train_with_run("FC", TINY)
    assert g.tile_forest is MT.tile_forest(MT.RUN) and g.mem_per_sm_gb is None and not g.envelope


def test_the_variants_classifier_learns_the_h200s_tiles():
    # the five GPUs' GEMM rows plus the H200's: an H200 row is classified by what the H200 ran more often than the
    # default classifier, which never saw it, classifies it so
    from lib.tile_choice import CANDIDATES, classify_tiles, oracle_tile_labels, tile_classifier
    h200 = MT.measured_rows()[lambda d: d["op"].isin(["bmm", "linear"])]
    truth = CANDIDATES[oracle_tile_labels(h200)]
    hits = lambda forest: (np.stack(classify_tiles(h200, forest), axis=1) == truth).all(axis=1).mean()
    assert hits(MT.tile_forest()) > hits(tile_classifier())


def test_train_with_run_refuses_a_config_it_cannot_honour():
    with pytest.raises(P.PredictorError, match="validation 'none'"):
        MT.train_with_run("LN", {**TINY, "validation": "shapes"})


def test_spec_tiles_of_the_variant_are_the_hybrid_with_its_classifier(tmp_path, monkeypatch):
    # GEMM predictors that carry a classifier over NVIDIA's tiles (no tile list of their own, unlike lib.amd's):
    # 'spec' is amendment 9's rule, its narrow rows classified by that forest, not the default classifier, on a GPU
    # within the range of the GPUs it was fitted on (the H100: the hybrid)
    from lib import tile_choice
    from lib.kernels import predict_kernels
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    variant = {"BMM": MT.train_with_run("BMM", TINY)}
    h100 = device_by_name("NVIDIA H100 80GB HBM3")
    shapes = pd.DataFrame({"op": ["bmm"] * 3, "B": [64, 16, 8], "M": [512, 64, 1024], "N": [64, 512, 64],
                           "K": [512, 512, 96]})
    assert tile_choice.narrow_gemms(shapes).tolist() == [False, True, True]
    spec = predict_kernels(shapes, h100, cfg_by_class=variant)
    assert np.array_equal(spec, predict_kernels(shapes, h100, tiles="hybrid", cfg_by_class=variant))
    # amendment 9: the six-GPU classifier is trusted within the six GPUs' range, which holds the H100
    assert variant["BMM"].tile_gpus == MT.trained_gpus() and MT.trained_gpus()[-1] == "NVIDIA H200"
    assert tile_choice.within_range(shapes.assign(**h100.spec_columns()), MT.trained_gpus()).all()
    assert not np.array_equal(spec, predict_kernels(shapes, h100, tiles="classifier", cfg_by_class=variant))
    used = []
    real = tile_choice.classify_tiles
    monkeypatch.setattr(tile_choice, "classify_tiles", lambda df, forest=None, *a: used.append(forest) or
                        real(df, forest, *a))
    predict_kernels(shapes, h100, cfg_by_class=variant)
    assert used == [MT.tile_forest(MT.RUN)]


def test_the_variants_classifier_is_saved_and_loaded_like_the_defaults(tmp_path, monkeypatch):
    # keyed apart from the default's (its rows include the run's); a second process loads it and fits nothing
    from lib import tile_choice
    real_path = MT.forest_path
    assert real_path(0, None, "measured") != real_path(0, None) == tile_choice.forest_path()
    monkeypatch.setattr(MT, "forest_path", lambda *a: tmp_path / real_path(*a).name)
    MT.tile_forest.cache_clear()
    fitted = MT.tile_forest(MT.RUN)
    assert len(list(tmp_path.glob("tile-forest-*.pkl"))) == 1
    MT.tile_forest.cache_clear()
    # fitting would read the training rows (the key reads fit_tile_classifier's code, so that cannot be patched)
    monkeypatch.setattr(MT, "load_kernels", lambda *a, **k: pytest.fail("fitted again"))
    loaded = MT.tile_forest(MT.RUN)
    h200 = MT.measured_rows()[lambda d: d["op"].isin(["bmm", "linear"])]
    assert np.array_equal(np.stack(tile_choice.classify_tiles(h200, fitted)),
                          np.stack(tile_choice.classify_tiles(h200, loaded)))
    MT.tile_forest.cache_clear()
