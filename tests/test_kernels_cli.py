"""python -m lib.kernels (DESIGN.md contract) and lib.kernels.predict_kernels, with tiny predictors."""
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lib import paths
from lib.devices import load_device
from lib.kernel_input import KernelInputError, check_kernels
from lib.kernels import main as kernels_main, predict_kernels

from cli_run import run_main

TINY = {"layers": 1, "width": 8, "epochs": 1, "batch_size": 4096, "max_rows": 1500}
L4 = paths.DEVICE_CONFIGS / "NVIDIA_L4.json"
H200 = paths.DEVICES_ADDED / "NVIDIA_H200.json"
KERNELS = pd.DataFrame({
    "OPName": ["bmm", "linear", "add", "gelu", "softmax", "ln"],
    "B": [8, 1, 64, 64, 128, 128], "M": [512, 1024, None, None, None, None],
    "N": [64, 4096, None, None, None, None], "K": [512, 1024, None, None, None, None],
    "H": [None, None, 4096, 4096, 512, 1024], "note": list("abcdef")})


@pytest.fixture(scope="module")
def tiny_config(tmp_path_factory):
    path = tmp_path_factory.mktemp("cfg") / "tiny.json"
    path.write_text(json.dumps({c: TINY for c in ("BMM", "FC", "EW", "SOFTMAX", "LN")}))
    return path


def cli(*args):
    return run_main(kernels_main, "python -m lib.kernels", *args)


@pytest.mark.parametrize("device", [L4, H200], ids=["L4", "H200"])
def test_cli_predicts_for_a_device_without_measurements(device, tiny_config, tmp_path):
    inp, out = tmp_path / "k.csv", tmp_path / "p.csv"
    KERNELS.to_csv(inp, index=False)
    r = cli("--device", device, "--input", inp, "--output", out, "--config", tiny_config)
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    pred = pd.read_csv(out)
    assert list(pred.columns) == [*KERNELS.columns, "pred_ms"]
    assert list(pred["note"]) == list("abcdef")
    assert np.all(np.isfinite(pred["pred_ms"]) & (pred["pred_ms"] > 0))
    # each row's prediction is that kernel's own: the same as predicting it alone
    dev, cfg = load_device(device), {c: TINY for c in ("BMM", "FC", "EW", "SOFTMAX", "LN")}
    alone = [predict_kernels(KERNELS.rename(columns={"OPName": "op"}).iloc[[i]], dev, cfg_by_class=cfg)[0]
             for i in range(len(KERNELS))]
    assert pred["pred_ms"].to_numpy() == pytest.approx(alone, rel=1e-6)
    # L4's balance (31334 / 300 FLOP/byte) is outside the training GPUs'; H200's is inside
    assert ("warning: NVIDIA L4's machine balance (104.4 FLOP/byte)" in r.stderr) == (device == L4)


def test_cli_roofline_by_hand(tmp_path):
    inp, out = tmp_path / "k.csv", tmp_path / "p.csv"
    pd.DataFrame({"OPName": ["bmm"], "B": [1], "M": [4096], "N": [4096], "K": [4096]}).to_csv(inp, index=False)
    assert cli("--device", "L4", "--input", inp, "--output", out, "--method", "roofline").returncode == 0   # by name
    # 2*4096^3 FLOP; intensity = 2*4096^3 / (4*3*4096^2) = 682.7 FLOP/B -> compute bound at 31334 GFLOP/s
    expected_ms = 2 * 4096 ** 3 / 31334e9 * 1e3
    assert pd.read_csv(out)["pred_ms"].iloc[0] == pytest.approx(expected_ms, rel=1e-9)
    # a kernel whose tensors alone outgrow L4's 24 GB still gets its forecast, with a warning that names it:
    # 4 * 3 * 50000^2 B = 30 GB
    pd.DataFrame({"OPName": ["bmm", "bmm"], "B": [1, 1], "M": [4096, 50000], "N": [4096, 50000],
                  "K": [4096, 50000]}).to_csv(inp, index=False)
    r = cli("--device", L4, "--input", inp, "--output", out, "--method", "roofline")
    assert r.returncode == 0 and len(pd.read_csv(out)) == 2, r.stderr
    assert ("warning: 1 of 2 rows (the first: row 1, 30 GB) have tensors that alone need more than NVIDIA L4's 24 GB "
            "of memory: such kernels could not run on it as given") in r.stderr, r.stderr


def test_cli_li_cannot_forecast_an_ood_gpu(tmp_path):
    inp, out = tmp_path / "k.csv", tmp_path / "p.csv"
    KERNELS.to_csv(inp, index=False)
    r = cli("--device", H200, "--input", inp, "--output", out, "--method", "li")
    assert r.returncode == 0, r.stderr
    assert pd.read_csv(out)["pred_ms"].isna().all()
    assert "measurements of the target" in r.stderr


@pytest.mark.parametrize("table, message", [
    (pd.DataFrame({"OPName": ["conv2d"], "B": [1], "H": [4]}), "unknown op"),
    (pd.DataFrame({"OPName": ["bmm"], "B": [1], "M": [4], "N": [4]}), "missing column 'K'"),
    (pd.DataFrame({"OPName": ["add"], "B": [1], "H": [-4]}), "column 'H' must be a positive"),
    (pd.DataFrame({"OPName": ["bmm"], "B": [1], "M": [1.5], "N": [4], "K": [4]}), "column 'M' must be a positive integer"),
    (pd.DataFrame({"B": [1], "H": [4]}), "missing column 'op'"),
    (pd.DataFrame({"OPName": ["add"], "B": [1e300], "H": [1e300]}), "row 0: dimensions too large"),
    (pd.DataFrame({"OPName": ["add", "add"], "B": [True, False], "H": [4, 4]}), "column 'B' must be a positive integer"),
    (pd.DataFrame({"OPName": ["add", None], "B": [1, 1], "H": [4, 4]}), "row 1: no op name"),
    (pd.DataFrame({"OPName": ["add"], "B": [1], "H": [4], "dtype": ["bf16"]}), "column 'dtype' asks for 'bf16'"),
    (pd.DataFrame({"OPName": ["bmm"], "B": [1], "M": [4], "N": [4], " K": [4]}),
     "missing column 'K' (needed by bmm/linear); the header has ' K' (names are matched exactly: case and spaces count)"),
    (pd.DataFrame({"opname": ["add"], "B": [1], "H": [4]}), "missing column 'op' (or 'OPName'); the header has 'opname'"),
], ids=["unknown-op", "missing-column", "negative-dim", "fractional-dim", "no-op-column", "overflow", "boolean-dim",
        "blank-op", "bf16-dtype", "spaced-column", "lowercase-op-column"])
def test_cli_bad_input_one_line(table, message, tmp_path):
    inp = tmp_path / "k.csv"
    table.to_csv(inp, index=False)
    r = cli("--device", L4, "--input", inp, "--output", tmp_path / "p.csv", "--method", "roofline")
    assert r.returncode != 0
    assert message in r.stderr and str(inp) in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and r.stdout == ""
    assert not (tmp_path / "p.csv").exists()


def test_cli_csv_rows_longer_than_the_header_and_two_op_columns(tmp_path):
    inp = tmp_path / "k.csv"
    for text, message in (("OPName,B,H\nadd,8,4096,5\n", "more fields than the header"),
                          ("op,OPName,B,H\nadd,add,8,4096\n", "both 'op' and 'OPName'")):
        inp.write_text(text)
        r = cli("--device", L4, "--input", inp, "--output", tmp_path / "p.csv", "--method", "roofline")
        assert r.returncode == 2 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_cli_input_folder_and_repeated_header_name(tmp_path):
    inp = tmp_path / "k.csv"
    inp.write_text("OPName,B,H,B\nadd,8,4096,8\n")   # pandas would rename the second B to 'B.1'
    blanks = tmp_path / "blanks.csv"
    blanks.write_text("OPName,B,,H,\nadd,8,x,4096,y\n")   # two blank header names are not a repeated name
    r = cli("--device", L4, "--input", blanks, "--output", tmp_path / "b.csv", "--method", "roofline")
    assert r.returncode == 0, r.stderr
    for source, message in ((inp, "column 'B' appears more than once"), (tmp_path, "names a folder, not a CSV")):
        r = cli("--device", L4, "--input", source, "--output", tmp_path / "p.csv", "--method", "roofline")
        assert r.returncode == 2 and message in r.stderr and str(source) in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "p.csv").exists()


def test_cli_output_to_stdout_and_a_failed_write(tmp_path):
    inp = tmp_path / "k.csv"
    KERNELS.to_csv(inp, index=False)
    r = cli("--device", L4, "--input", inp, "--output", "-", "--method", "roofline")
    assert r.returncode == 0 and "to standard output" in r.stderr
    assert list(pd.read_csv(io.StringIO(r.stdout)).columns) == [*KERNELS.columns, "pred_ms"]
    assert not (paths.ROOT / "-").exists()
    # a folder that exists but takes no new file, even for root (Linux's /proc): the error names --output, not
    # the temporary file the write goes through
    if not Path("/proc/self").is_dir():
        pytest.skip("no /proc here")
    r = cli("--device", L4, "--input", inp, "--output", "/proc/self/p.csv", "--method", "roofline")
    assert r.returncode == 2 and r.stderr.startswith("error: --output /proc/self/p.csv: cannot write")
    assert ".tmp-" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_cli_li_fits_an_amd_training_gpu_on_its_own_rows(tmp_path):
    inp, out = tmp_path / "k.csv", tmp_path / "p.csv"
    KERNELS.to_csv(inp, index=False)
    r = cli("--device", paths.DEVICE_CONFIGS / "AMD_Instinct_MI100.json", "--input", inp, "--output", out,
            "--method", "li")
    assert r.returncode == 0, r.stderr
    # MI100's training rows are vector ops only (no GEMMs): those are fitted, the GEMMs cannot be
    pred = pd.read_csv(out).set_index("OPName")["pred_ms"]
    assert np.isfinite(pred.drop(["bmm", "linear"])).all() and pred[["bmm", "linear"]].isna().all()
    assert "2 of 6 rows" in r.stderr


def test_cli_bad_output_and_config_fail_before_any_work(tmp_path):
    inp, cfg = tmp_path / "k.csv", tmp_path / "cfg.json"
    KERNELS.to_csv(inp, index=False)
    for out, message in ((tmp_path / "no" / "p.csv", "does not exist"), (tmp_path, "names a folder"),
                         (inp, "also an input")):
        r = cli("--device", L4, "--input", inp, "--output", out, "--method", "roofline")
        assert r.returncode == 2 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1
    for body, message in (({"FC": "x"}, "FC: expected an object"), ({"FC": {"max_rows": "many"}}, "max_rows must be"),
                          ({"CONV": {}}, "expected an object keyed by op class")):
        cfg.write_text(json.dumps(body))
        r = cli("--device", L4, "--input", inp, "--output", tmp_path / "p.csv", "--config", cfg)
        assert r.returncode == 2 and message in r.stderr and str(cfg) in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "p.csv").exists()


def test_cli_bad_device(tmp_path):
    inp, dev = tmp_path / "k.csv", tmp_path / "dev.json"
    KERNELS.to_csv(inp, index=False)
    dev.write_text(json.dumps({"Device": "X", "Dev_Mem": 1}))
    os.mkfifo(fifo := tmp_path / "fifo.json")   # never opened: refused by its file type
    for device, message in ((dev, "missing field"), (tmp_path / "nope.json", "not found"),
                            (fifo, f"argument --device: {fifo} is not a regular file")):
        r = cli("--device", device, "--input", inp, "--output", tmp_path / "p.csv")
        assert r.returncode != 0 and message in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1


def test_api_mem_kernels_are_bandwidth_bound():
    dev = load_device(H200)
    df = pd.DataFrame({"op": ["mem", "mem"], "bytes": [4.8e9, 0.0]})
    # 4.8e9 B at 4800 GB/s = 1 ms
    assert np.allclose(predict_kernels(df, dev, method="neusight"), [1.0, 0.0])


def test_api_takes_the_csv_names_and_names_a_wrong_device():
    dev = load_device(L4)
    ours = predict_kernels(KERNELS.rename(columns={"OPName": "op"}), dev, method="roofline")
    assert predict_kernels(KERNELS, dev, method="roofline") == pytest.approx(ours)   # 'OPName', as the CLI reads it
    with pytest.raises(KernelInputError, match=r"device must be a lib.devices.Device .*got str"):
        predict_kernels(KERNELS, "NVIDIA L4")
    with pytest.raises(KernelInputError, match="kernels must be a pandas DataFrame, got dict"):
        predict_kernels(KERNELS.to_dict(), dev)


def test_api_rejects_unknown_method():
    with pytest.raises(KernelInputError, match="unknown method"):
        predict_kernels(KERNELS.rename(columns={"OPName": "op"}), load_device(L4), method="magic")


@pytest.mark.parametrize("method", ["neusight", "habitat"])   # roofline reads FLOPs and bytes, the same either way
def test_api_linear_with_batch_is_one_gemm_over_its_rows(method):
    # F.linear on a [8, 65, 1024] input runs one GEMM over 8 * 65 = 520 rows: on a 128-row tile that is
    # ceil(520 / 128) = 5 row tiles, not 8 * ceil(65 / 128) = 8
    from lib.kernels import flatten_linear
    batched = pd.DataFrame({"op": ["linear", "bmm"], "B": [8, 8], "M": [65, 65], "N": [1024, 64], "K": [4096, 64]})
    flat = flatten_linear(batched)
    assert flat[["B", "M"]].to_numpy().tolist() == [[1, 520], [8, 65]]     # bmm rows keep their batch
    assert batched["B"].tolist() == [8, 8]                                  # the input is not changed
    dev, cfg = load_device(H200), {c: TINY for c in ("BMM", "FC", "EW", "SOFTMAX", "LN")}
    assert predict_kernels(batched, dev, method, cfg_by_class=cfg) == pytest.approx(
        predict_kernels(flat, dev, method, cfg_by_class=cfg), rel=1e-9)


def test_api_identical_kernels_predicted_once_same_result():
    from lib.kernels import _dedup
    df = pd.DataFrame({"op": ["add", "add", "gelu", "add"], "B": [2, 2, 2, 3], "H": [4, 4, 4, 4]})
    seen = []

    def predict(u):
        seen.append(len(u))
        return u["B"].to_numpy(float) * 10 + (u["op"] == "gelu").to_numpy()
    out = _dedup(df, [], predict)
    assert seen == [3]                                  # three distinct kernels
    assert np.array_equal(out, [20, 20, 21, 30])
    # a vector op's row length tells kernels apart too: add [2, 4] and add [2, 8] are two kernels
    seen.clear()
    out = _dedup(df.assign(H=[4, 8, 4, 4]), [], lambda u: predict(u) + u["H"].to_numpy(float))
    assert seen == [4] and np.array_equal(out, [24, 28, 25, 34])


def test_booleans_inside_an_object_column_are_not_dimensions():
    table = pd.DataFrame({"op": ["add", "add"], "B": pd.Series([8, True], dtype=object), "H": [4, 4]})
    with pytest.raises(KernelInputError, match=r"column 'B' must be a positive integer .*\(row 1\)"):
        check_kernels(table)


def test_a_zero_dimension_is_no_kernel():
    with pytest.raises(KernelInputError, match=r"column 'H' must be a positive integer for vector ops \(row 1\)"):
        check_kernels(pd.DataFrame({"op": ["add", "add"], "B": [1, 1], "H": [4, 0]}))
    with pytest.raises(KernelInputError, match=r"column 'M' must be a positive integer for bmm/linear \(row 0\)"):
        check_kernels(pd.DataFrame({"op": ["bmm"], "B": [1], "M": [0], "N": [4], "K": [4]}))
    assert len(check_kernels(pd.DataFrame({"op": ["mem"], "bytes": [0]}))) == 1      # no bytes moved: allowed


def test_oracle_grid_fallback_needs_a_positive_grid():
    from lib.devices import device_by_name
    table = pd.DataFrame({"op": ["bmm"], "B": [1], "M": [64], "N": [64], "K": [64], "kernel_name": ["foo"],
                          "grid_x": [0], "grid_y": [1]})
    with pytest.raises(KernelInputError, match=r"row 0: .*positive number in column 'grid_x'"):
        predict_kernels(table, device_by_name("Tesla T4"), tiles="oracle")
    # on AMD the grid counts work-items, so the fallback needs the block size too
    with pytest.raises(KernelInputError, match=r"row 0: .*positive number in column 'block_x'"):
        predict_kernels(table.assign(grid_x=[4]), device_by_name("AMD Instinct MI100"), tiles="oracle")


def test_a_precision_other_than_fp32_is_refused_not_forecast_as_fp32():
    table = pd.DataFrame({"op": ["bmm", "bmm", "bmm"], "B": [1, 1, 1], "M": [64] * 3, "N": [64] * 3, "K": [64] * 3})
    for col, values in (("dtype", ["fp32", "torch.float32", None]), ("Precision", ["FP32", "", "float"])):
        assert len(check_kernels(table.assign(**{col: values}))) == 3          # fp32 in any spelling, or blank
    with pytest.raises(KernelInputError, match=r"column 'dtype' asks for 'fp16' \(row 1\): .*fp32 kernels only"):
        check_kernels(table.assign(dtype=["fp32", "fp16", "fp32"]))
    with pytest.raises(KernelInputError, match=r"column 'precision' asks for 'tf32' \(row 0\)"):
        check_kernels(table.assign(precision=["tf32", "fp32", "fp32"]))
    with pytest.raises(KernelInputError, match=r"column 'DType' asks for 'fp16' \(row 2\)"):   # the name in any case
        check_kernels(table.assign(DType=["fp32", "fp32", "fp16"]))
    assert len(check_kernels(table.assign(note=["fp16"] * 3))) == 3            # other columns are carried through


def test_cli_usage_errors_are_one_line(tmp_path):
    # argparse's own errors too (DESIGN.md: a one-line message): a missing argument, a method it does not know
    for args, message in ((("--device", L4, "--input", tmp_path / "k.csv"), "--output"),
                          (("--device", L4, "--input", tmp_path / "k.csv", "--output", tmp_path / "p.csv",
                            "--method", "magic"), "invalid choice: 'magic'")):
        r = cli(*args)
        assert r.returncode == 2 and r.stdout == "" and message in r.stderr, r.stderr
        assert r.stderr.strip().splitlines() == [r.stderr.strip()] and "--help" in r.stderr


def test_cli_says_when_it_replaces_an_input_pred_ms_column(tmp_path):
    inp, out = tmp_path / "k.csv", tmp_path / "p.csv"
    pd.DataFrame({"OPName": ["add"], "B": [2], "H": [3], "pred_ms": [99.0], "device": ["NVIDIA L4"]}).to_csv(inp, index=False)
    r = cli("--device", L4, "--input", inp, "--output", out, "--method", "roofline")
    assert r.returncode == 0 and "has a pred_ms column; the output replaces it" in r.stderr
    written = pd.read_csv(out)
    assert written["pred_ms"].iloc[0] != 99.0 and list(written.columns) == ["OPName", "B", "H", "pred_ms", "device"]
    assert "names other GPUs" not in r.stderr                # a device column naming --device's GPU is no news
    assert r.stderr.strip().splitlines()[-1] == f"wrote 1 prediction to {out}"


@pytest.mark.parametrize("text, header, rows", [
    # a bmm row has no H and an add row no M, N, K: pandas would read those columns as floats (512 -> 512.0)
    ("OPName,B,M,N,K,H,tag\nbmm,8,512,512,64,,a\nadd,2,,,,3,b\n", "OPName,B,M,N,K,H,tag,pred_ms",
     ("bmm,8,512,512,64,,a,", "add,2,,,,3,b,")),
    # a header ending in a comma has a last column without a name: it stays blank (pandas names it 'Unnamed: 5')
    ("OPName,B,M,N,K,\nbmm,2,512,512,64,\nbmm,1,64,64,64,x\n", "OPName,B,M,N,K,,pred_ms",
     ("bmm,2,512,512,64,,", "bmm,1,64,64,64,x,")),
], ids=["blank-cells", "blank-column-name"])
def test_cli_writes_the_input_cells_as_they_were_read(text, header, rows, tmp_path):
    inp, out = tmp_path / "k.csv", tmp_path / "p.csv"
    inp.write_text(text)
    r = cli("--device", L4, "--input", inp, "--output", out, "--method", "roofline")
    assert r.returncode == 0, r.stderr
    lines = out.read_text().splitlines()
    assert lines[0] == header and lines[1].startswith(rows[0]) and lines[2].startswith(rows[1])


def test_cli_a_bad_cache_migration_is_one_line(tiny_config, tmp_path):
    # NEUSIGHT_MIGRATE_FROM names a fingerprint with no kernel table to compare with: lib.data.DataError, one line
    inp = tmp_path / "k.csv"
    KERNELS.to_csv(inp, index=False)
    env = {**os.environ, "NEUSIGHT_BUILD": str(tmp_path / "build"), "NEUSIGHT_MIGRATE_FROM": "0123456789abcdef"}
    r = subprocess.run([sys.executable, "-m", "lib.kernels", "--device", H200, "--input", inp, "--output", "-",
                        "--config", tiny_config], capture_output=True, text=True, cwd=paths.ROOT, env=env, timeout=900)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("error: NEUSIGHT_MIGRATE_FROM=0123456789abcdef: no kernel table")
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr



def test_cli_oracle_tiles_need_a_tile_in_the_name_or_the_launch_grid(tiny_config, tmp_path):
    # 'foo' and a blank name carry no tile (lib.tiles); the launch-grid fallback then needs grid_x and grid_y
    inp, out = tmp_path / "k.csv", tmp_path / "p.csv"
    header = "OPName,B,M,N,K,H,kernel_name,grid_x,grid_y\n"
    for rows, message in (("bmm,1,64,64,64,,foo,,\n", "row 0: tiles='oracle' finds no GEMM tile in kernel_name 'foo', "
                                                       "and the launch-grid fallback needs a positive number in "
                                                       "column 'grid_x' (or 'Grid x')"),
                          ("add,2,,,,3,,,\nbmm,1,64,64,64,,,4,\n", "row 1: tiles='oracle' finds no GEMM tile in "
                                                                  "kernel_name (blank), and the launch-grid fallback "
                                                                  "needs a positive number in column 'grid_y'")):
        inp.write_text(header + rows)
        r = cli("--device", L4, "--input", inp, "--output", out, "--tiles", "oracle", "--config", tiny_config)
        assert r.returncode == 2 and r.stderr.startswith(f"error: {inp}: {message}"), r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and r.stdout == "" and not out.exists()
    # with its grid the same row is answered, and two grids are two tiles: tile_n = ceil(K / grid_x) = 64 or 16
    inp.write_text(header + "bmm,1,64,64,64,,foo,1,1\nbmm,1,64,64,64,,foo,4,1\n")
    r = cli("--device", L4, "--input", inp, "--output", out, "--tiles", "oracle", "--config", tiny_config)
    assert r.returncode == 0, r.stderr
    pred = pd.read_csv(out)["pred_ms"]
    assert np.isfinite(pred).all() and pred[0] != pred[1]


def test_oracle_tiles_read_kernel_names_for_gemm_rows_only(tiny_config):
    # the vector ops' tiles follow PyTorch's launch rules: a table without GEMM rows needs no kernel_name
    cfg = {c: TINY for c in ("BMM", "FC", "EW", "SOFTMAX", "LN")}
    vec = pd.DataFrame({"op": ["softmax", "add"], "B": [64, 8], "H": [1024, 512]})
    assert predict_kernels(vec, load_device(L4), tiles="oracle", cfg_by_class=cfg).tolist() == \
        predict_kernels(vec, load_device(L4), tiles="spec", cfg_by_class=cfg).tolist()
    with pytest.raises(KernelInputError, match="needs a 'kernel_name' column for GEMM rows"):
        predict_kernels(pd.concat([vec, KERNELS.rename(columns={"OPName": "op"}).head(1)]), load_device(L4),
                        tiles="oracle", cfg_by_class=cfg)


@pytest.mark.parametrize("stdin", ["/dev/stdin", "-"])
def test_cli_reads_its_input_from_a_pipe(stdin):
    # a pipe can be read once: `cat k.csv | python -m lib.kernels --input - ...`
    text = "OPName,B,M,N,K,H,tag\nbmm,8,512,512,64,,a\nadd,2,,,,3,b\n"
    r = subprocess.run([sys.executable, "-m", "lib.kernels", "--device", str(L4), "--input", stdin,
                        "--output", "-", "--method", "roofline"], input=text, capture_output=True, text=True,
                       cwd=paths.ROOT, timeout=900)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "OPName,B,M,N,K,H,tag,pred_ms" and len(lines) == 3
    assert lines[1].startswith("bmm,8,512,512,64,,a,") and lines[2].startswith("add,2,,,,3,b,")


def test_cli_reads_a_dataset_csv_as_it_is(tiny_config, tmp_path):
    # the dataset's own column names (lib.data.RENAME): 'Kernel Name', 'Grid x', ... ; the second name has no tile,
    # so its launch grid gives it: tile_n = ceil(K / Grid x), tile_m = ceil(M / Grid y)
    inp, out = tmp_path / "bmm.csv", tmp_path / "p.csv"
    inp.write_text("OPName,Latency,Device,Torch Version,CUDNN Version,Kernel Name,Warps per SM,Blocks per SM,Grid x,"
                   "Grid y,Grid z,Block x,Block y,Block z,CUDA Version,Kernels,B,M,N,K\n"
                   "bmm,0.11,Tesla T4,p2.1.0,8902,turing_sgemm_32x128_nn,8,2,4,1,384,256,1,1,cu121,,384,128,64,128\n"
                   "bmm,0.05,Tesla T4,p2.1.0,8902,gemv2T_kernel,8,2,2,2,8,128,1,1,cu121,,8,128,64,128\n")
    r = cli("--device", L4, "--input", inp, "--output", out, "--tiles", "oracle", "--config", tiny_config)
    assert r.returncode == 0, r.stderr
    # its Device column names the T4, but every row is forecast for --device: said on stderr
    assert ("bmm.csv's Device column names other GPUs (Tesla T4); every row is forecast for NVIDIA L4 (--device)"
            in r.stderr)
    lines = out.read_text().splitlines()
    assert lines[0] == inp.read_text().splitlines()[0] + ",pred_ms"
    tidy = pd.DataFrame({"op": ["bmm", "bmm"], "B": [384, 8], "M": [128, 128], "N": [64, 64], "K": [128, 128],
                         "kernel_name": ["turing_sgemm_32x128_nn", "gemv2T_kernel"], "grid_x": [4, 2],
                         "grid_y": [1, 2]})
    expected = predict_kernels(tidy, load_device(L4), tiles="oracle",
                               cfg_by_class={c: TINY for c in ("BMM", "FC", "EW", "SOFTMAX", "LN")})
    assert pd.read_csv(out)["pred_ms"].to_numpy() == pytest.approx(expected, rel=1e-9)
    # one column under both names is one column too many
    inp.write_text("OPName,B,M,N,K,kernel_name,Kernel Name\nbmm,1,64,64,64,a,b\n")
    r = cli("--device", L4, "--input", inp, "--output", out, "--method", "roofline")
    assert r.returncode == 2 and "both 'kernel_name' and 'Kernel Name' columns" in r.stderr


def test_cli_habitat_cap_is_an_overflow_not_a_forecast(tmp_path):
    # habitat holds a far extrapolation at exp(MAX_LOG_MS) = 1e12 ms (lib.baselines): dims of 1e30 on L4, and a
    # 64 x 4096^3 bmm on a GPU of 1 SM at 10 MHz, 1 GB/s and 1 GFLOP/s reach it; 64^3 on that GPU does not
    lo = tmp_path / "lo.json"
    lo.write_text(json.dumps({"Device": "NVIDIA Lo", "Dev_Mem": 0.1, "Mem_Bw": 1, "Num_Sm": 1, "Core_Per_SM": 1,
                              "Freq": 10, "SingleFLOPs": 1, "L2Cache": 0.01}))
    inp, out = tmp_path / "k.csv", tmp_path / "p.csv"
    for device, rows in ((L4, "bmm,1,64,64,64\nbmm,1,1" + "0" * 30 + ",1" + "0" * 30 + ",1" + "0" * 30 + "\n"),
                         (lo, "bmm,1,64,64,64\nbmm,64,4096,4096,4096\n")):
        inp.write_text("OPName,B,M,N,K\n" + rows)
        r = cli("--device", device, "--input", inp, "--output", out, "--method", "habitat")
        assert r.returncode == 2 and r.stderr.startswith(f"error: {inp}: row 1: the predicted latency overflows "
                                                         f"(habitat's cap of 1e+12 ms)"), r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and not out.exists()
    inp.write_text("OPName,B,M,N,K\nbmm,1,64,64,64\n")
    r = cli("--device", lo, "--input", inp, "--output", out, "--method", "habitat")
    assert r.returncode == 0 and 0 < pd.read_csv(out)["pred_ms"].iloc[0] < 1e12, r.stderr


def test_cli_li_names_the_op_classes_without_training_split_measurements(tmp_path):
    # H100 has measured kernels, but in test_ood only: Li et al. fits on split == 'train' rows
    inp = tmp_path / "k.csv"
    KERNELS.to_csv(inp, index=False)
    r = cli("--device", paths.DEVICE_CONFIGS / "NVIDIA_H100_80GB_HBM3.json", "--input", inp, "--output", "-",
            "--method", "li")
    assert r.returncode == 0, r.stderr
    assert ("note: Li et al. fits on measurements of the target itself, and NVIDIA H100 80GB HBM3 has no "
            "training-split (split == 'train') measurements of op class BMM, EW, FC, LN, SOFTMAX; pred_ms is NaN "
            "for 6 of 6 rows") in r.stderr


def test_cli_fp16_forecasts_gemms_on_the_equivalent_device(tiny_config, tmp_path):
    from lib.precision import fp16_device
    h100 = paths.DEVICE_CONFIGS / "NVIDIA_H100_80GB_HBM3.json"
    inp, out = tmp_path / "k.csv", tmp_path / "p.csv"
    gemms = pd.DataFrame({"OPName": ["bmm", "linear"], "B": [8, 1], "M": [512, 1024], "N": [64, 4096],
                          "K": [512, 1024], "dtype": ["fp16", "half"]})
    gemms.to_csv(inp, index=False)
    r = cli("--device", h100, "--input", inp, "--output", out, "--config", tiny_config, "--dtype", "fp16")
    assert r.returncode == 0, r.stderr
    pred = pd.read_csv(out)
    assert list(pred.columns) == [*gemms.columns, "pred_ms"]          # the dtype column is carried through
    cfg = {c: TINY for c in ("BMM", "FC", "EW", "SOFTMAX", "LN")}
    rows, spec = gemms.drop(columns="dtype").rename(columns={"OPName": "op"}), load_device(h100)
    expected = np.minimum(predict_kernels(rows, fp16_device(spec, 989_500), cfg_by_class=cfg),   # no slower than
                          predict_kernels(rows, spec, cfg_by_class=cfg))                        # the fp32 forecast
    assert pred["pred_ms"].to_numpy() == pytest.approx(expected, rel=1e-6)
    assert "warning: NVIDIA H100 80GB HBM3 (fp16 tensor cores): forecast by predictors that learned fp32" in r.stderr
    assert "not a multiple of 8" not in r.stderr                     # every K and N a multiple of 8
    gemms.assign(N=[64, 30522]).to_csv(inp, index=False)              # BERT's vocabulary: not aligned
    r = cli("--device", h100, "--input", inp, "--output", out, "--config", tiny_config, "--dtype", "fp16")
    assert r.returncode == 0 and ("warning: 1 of 2 fp16 rows (the first: row 1) have K or N not a multiple of 8: on "
                                  "our H200 such GEMMs ran slower kernels") in r.stderr, r.stderr
    # a vector op, a baseline without an fp16 path, a GPU without a known fp16 peak: one line each, nothing written
    for rows, args, message in [
            (KERNELS.iloc[[2]], (), "row 0: op 'add': --dtype fp16 forecasts GEMMs (bmm, linear) on tensor cores only"),
            (gemms, ("--method", "habitat"), "--dtype fp16 forecasts with neusight or roofline, not habitat"),
            (gemms.assign(dtype=["fp16", "fp32"]), (), "column 'dtype' asks for 'fp32' (row 1): --dtype says fp16")]:
        rows.to_csv(inp, index=False)
        r = cli("--device", h100, "--input", inp, "--output", tmp_path / "no.csv", "--dtype", "fp16", *args)
        assert r.returncode == 2 and message in r.stderr and not (tmp_path / "no.csv").exists(), r.stderr
    gemms.to_csv(inp, index=False)
    r = cli("--device", L4, "--input", inp, "--output", tmp_path / "no.csv", "--dtype", "fp16")
    assert r.returncode == 2 and "no fp16 tensor-core peak for NVIDIA L4; add the field 'Fp16TensorFLOPs'" in r.stderr
