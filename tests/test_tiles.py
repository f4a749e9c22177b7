"""Tile parsing, tile counts and launch rules, by hand and against the dataset's launch grids."""
import numpy as np
import pandas as pd
import pytest

from lib import tiles
from lib.tiles import add_tiles, gemm_tile_from_name, vec_tile

# One sample name per family -> (tile_m over M, tile_n over K).
SAMPLES = {
    "maxwell_sgemm_128x64_nn": (64, 128),
    "volta_sgemm_32x128_tn": (128, 32),
    "ampere_sgemm_32x32_sliced1x4_tn": (32, 32),
    "volta_sgemm_64x32_sliced1x4_nn": (32, 64),
    "sgemm_128x128x8_NT_vec": (128, 128),
    "sgemm_32x32x32_NN": (32, 32),
    "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x128x8_stage3_warpsize1x4x1_ffma_aligna4_"
    "alignc4_execute_kernel__5x_cublas": (64, 128),
    "void cutlass::Kernel<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>"
    "(cutlass_80_simt_sgemm_256x128_8x4_nn_align1::Params)": (128, 256),
    "Cijk_Ailk_Bljk_SB_MT64x32x32_MI16x16x4x1_SE_1LDSB0_APM1_GSU1_WG32_8_1_WGM5": (32, 64),
}


@pytest.mark.parametrize("name,tile", SAMPLES.items())
def test_parse_each_family(name, tile):
    assert gemm_tile_from_name(name) == tile


def test_untiled_names_give_none():
    assert gemm_tile_from_name("gemv2T_kernel_val<int, int, float, float, float, 128, 16, 4, 4>") is None
    assert gemm_tile_from_name("maxwell_sgemm_largek_lds64") is None
    assert gemm_tile_from_name(float("nan")) is None


def test_gemm_tiles_by_hand():
    # 1024^3 GEMM, tile 128 (over M) x 64 (over K): 8 * 16 = 128 tiles; B=3 -> 384
    df = pd.DataFrame({"op": ["bmm", "bmm"], "B": [1.0, 3.0], "M": [1024.0, 1000.0], "N": [1024.0] * 2,
                       "K": [1024.0, 1000.0], "H": [np.nan] * 2, "kernel_name": ["x", "x"],
                       "tile_m": [128, 128], "tile_n": [64, 64]})
    out = add_tiles(df, tiles="given")
    assert out["num_tiles"].tolist() == [128.0, 3 * 8 * 16]
    assert out["tile_elems"].tolist() == [128 * 64] * 2


def test_oracle_tiles_from_name_and_grid_fallback():
    df = pd.DataFrame({"op": ["linear", "linear"], "B": [1.0, 1.0], "M": [100.0, 100.0],
                       "N": [64.0, 64.0], "K": [300.0, 300.0], "H": [np.nan] * 2,
                       "kernel_name": ["volta_sgemm_128x64_tn", "gemv2N_kernel"],
                       "grid_x": [3, 10], "grid_y": [2, 4], "grid_z": [1, 1], "block_x": [128, 128]})
    out = add_tiles(df)
    # volta 128x64: 64 over M -> ceil(100/64)=2, 128 over K -> ceil(300/128)=3
    assert out.loc[0, ["tile_m", "tile_n", "num_tiles"]].tolist() == [64, 128, 6]
    # fallback: tile_n = ceil(300/10) = 30, tile_m = ceil(100/4) = 25 -> 10 * 4 = 40 tiles
    assert out.loc[1, ["tile_m", "tile_n", "num_tiles"]].tolist() == [25, 30, 40]


def test_amd_grids_count_work_items():
    # AMD's grid_x counts work-items: blocks = ceil(grid_x / block_x), so 1,000 work-items of 256 are 4 blocks
    amd = pd.DataFrame({"vendor": ["amd", "nvidia"], "grid_x": [1000, 1000], "grid_y": [1, 1], "grid_z": [2, 2],
                        "block_x": [256, 256]})
    assert tiles.grid_blocks(amd).tolist() == [8, 2000]
    # the fallback tile too: 1,024 work-items of 256 are 4 blocks over K = 300 -> tile_n = 75
    fallback = pd.DataFrame({"vendor": ["amd"], "grid_x": [1024], "grid_y": [1], "block_x": [256], "M": [64.0],
                             "K": [300.0]})
    assert [t.tolist() for t in tiles._tiles_from_grid(fallback)] == [[64.0], [75.0]]


def test_given_tiles_must_exist():
    df = pd.DataFrame({"op": ["bmm"], "B": [1.0], "M": [8.0], "N": [8.0], "K": [8.0]})
    with pytest.raises(KeyError, match="tile_m"):
        add_tiles(df, tiles="given")
    with pytest.raises(ValueError, match="oracle"):
        add_tiles(df, tiles="guess")


def test_vec_tile_rules_by_hand():
    tile, num = vec_tile(np.array(["add", "softmax", "softmax", "softmax", "ln"]),
                         np.array([930, 3623, 7978, 10, 50]), np.array([3006, 920, 92, 2000, 768]))
    # EW: 512/block, ceil(930*3006/512) = 5461
    # softmax H=920 -> 4 rows/block: ceil(3623/4) = 906; H=92 -> 8 rows/block: ceil(7978/8) = 998
    # softmax H=2000 -> one block per row; ln -> one block per row
    assert num.tolist() == [5461, 906, 998, 10, 50]
    assert tile.tolist() == [512, 4 * 920, 8 * 92, 2000, 768]
    assert tiles.softmax_rows_per_block(np.array([1, 2, 32, 128, 129, 1024])).tolist() == \
        [256, 128, 8, 8, 4, 4]
    # H = 1024 is still softmax_warp_forward (4 rows a block), 1025 one block a row
    tile, num = vec_tile("softmax", np.array([100, 100]), np.array([1024, 1025]))
    assert tile.tolist() == [4096, 1025] and num.tolist() == [25, 100]


def test_softmax_block_threads_and_vector_share_by_hand():
    # threads: H=1029 -> floor(257 / 2) = 128 -> 128; H=2560 -> 320 -> 512; H=16384 -> min(4096, 1024) / 2 -> 512
    assert tiles.softmax_block_threads(np.array([1029, 2560, 16384])).tolist() == [128, 512, 512]
    share = tiles.softmax_vector_share(np.array([1000, 1025, 2048, 2560, 3000, 16384]))
    # H <= 1024: softmax_warp_forward, no vector loads -> 0
    # H=1025 (128 threads, 4 x 128 = 512 per vector sweep): row alignment s = 0 -> 1025 mod 512 = 1 scalar;
    #   s = 1, 2, 3 -> (128 - s) + (1025 + s - 128) mod 512 = 513 scalar; mean share = (1024 + 3 * 512) / (4 * 1025)
    # H=2048, 16384: whole sweeps, no scalar loads -> 1
    # H=2560 (512 threads, sweeps of 2048): every row aligned, 512 scalar -> 0.8; H=3000: 952 scalar
    expected = [0.0, (1024 + 3 * 512) / (4 * 1025), 1.0, 0.8, 1 - 952 / 3000, 1.0]
    assert np.allclose(share, expected)
    assert tiles.softmax_vector_share(np.array([1024])).tolist() == [0.0]       # the warp kernel's last size


def test_softmax_block_threads_equal_measured_block():
    from lib.data import load_kernels
    big = load_kernels(ops="SOFTMAX").query("H > 1024")
    assert len(big) > 1000
    assert (tiles.softmax_block_threads(big["H"]) == big["block_x"]).all()


def test_f_vec_is_the_softmax_vector_share():
    from lib.data import load_kernels
    from lib.features import add_features
    rows = load_kernels(ops=["SOFTMAX", "LN"], splits="test_id").reset_index(drop=True)
    feat = add_features(rows)
    soft = (feat["op"] == "softmax").to_numpy()
    assert soft.any() and (~soft).any()
    assert np.allclose(feat.loc[soft, "f_vec"], tiles.softmax_vector_share(feat.loc[soft, "H"]))
    assert (feat.loc[~soft, "f_vec"] == 1.0).all()


def test_ew_launch_split():
    # 4*B*H bytes over 2^31: 1.0 -> 1 launch, 1.25 -> 2, 2.5 -> 4
    assert tiles.ew_launches([65536, 655360, 1310720], [8192, 1024, 1024]).tolist() == [1, 2, 4]


def test_cutlass_swizzle_by_hand():
    # tiles_m = 3072/128 = 24, tiles_k = 3072/256 = 12 -> log 3: (24*8) * ceil(12/8) = 384 per batch
    assert tiles.cutlass_swizzled_blocks(1, 3072, 3072, 128, 256) == 384


# ---------------------------------------------------------------- against the dataset

def _gemm_rows():
    from lib.data import kernel_csvs, load_kernels, read_kernel_csv
    from lib.devices import all_devices
    nv = load_kernels(ops=["bmm", "linear"])
    frames = [read_kernel_csv(p) for p, _ in kernel_csvs("amd")]
    amd = pd.concat([f for f in frames if f["op"].iloc[0] in tiles.GEMM_OPS], ignore_index=True)
    amd["vendor"] = "amd"
    amd["device"] = amd["device"].astype(str)
    assert set(amd["device"]) <= set(all_devices())
    return nv, amd


@pytest.fixture(scope="module")
def gemm_rows():
    return _gemm_rows()


def test_every_gemm_row_has_a_name_tile(gemm_rows):
    for df in gemm_rows:
        parsed = df["kernel_name"].map(gemm_tile_from_name)
        missing = df.loc[parsed.isna(), "kernel_name"].value_counts()
        print(missing.to_string())
        assert len(df) > 1000 and parsed.notna().all(), f"untiled names: {missing.index.tolist()[:5]}"


def test_num_tiles_explains_launch_grid(gemm_rows):
    table = pd.concat([tiles.tile_grid_agreement(df) for df in gemm_rows])
    print(table.to_string())
    assert (table["match"] == 1.0).all()


def test_tile_candidates_match_training_data():
    assert tiles.gemm_tile_candidates("nvidia") == tiles.GEMM_TILE_CANDIDATES
    assert tiles.gemm_tile_candidates("amd") == tiles.GEMM_TILE_CANDIDATES_AMD


def test_vec_rule_equals_measured_grid_on_every_gpu():
    from lib.data import load_kernels
    table = tiles.vec_grid_agreement(load_kernels(ops=["EW", "SOFTMAX", "LN"]))
    print(table.round(4).to_string())
    assert table.shape[1] >= 5
    assert (table.fillna(1.0) == 1.0).all().all()
