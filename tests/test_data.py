"""The data layer: materialization manifest, the tidy kernel table, and clear errors."""
import io
import shutil
import tarfile
import urllib.error

import pandas as pd
import pytest

from lib import data, paths


@pytest.fixture(scope="module")
def table():
    return data.load_kernels()


def test_manifest_verifies_and_detects_changes(tmp_path, monkeypatch):
    root = tmp_path / "ds"
    shutil.copytree(paths.SUMMARY, root / "summary")
    data.write_manifest(root)
    assert data.verify_manifest(root) == []
    (root / "summary" / "perop.csv").write_text("tampered")
    (root / "summary" / "new.csv").write_text("x")
    assert data.verify_manifest(root) == ["summary/new.csv", "summary/perop.csv"]
    # materialize() refuses a copy that differs from its manifest instead of using it
    monkeypatch.setattr(paths, "NEUSIGHT", root)
    with pytest.raises(data.DataError, match=r"differs from its manifest \(2 files, e.g. summary/new.csv\)"):
        data.materialize()


def test_a_data_variable_that_is_no_folder_is_named(monkeypatch, tmp_path):
    monkeypatch.setenv("NEUSIGHT_DATA", str(tmp_path / "nowhere"))
    with pytest.raises(data.DataError, match=r"\$NEUSIGHT_DATA=.*nowhere is not a directory"):
        data.source_dir()


def test_materialized_copy_is_intact():
    assert data.verify_manifest() == []


def test_missing_data_folder_says_how_to_get_it(monkeypatch, tmp_path):
    monkeypatch.setattr(paths, "NEUSIGHT", tmp_path / "absent")
    with pytest.raises(data.DataError, match="make data"):
        data.require_data()


def test_csv_without_expected_columns_names_them(tmp_path):
    p = tmp_path / "k.csv"
    launch = {"Kernel Name": ["k"], **{f"{c} {a}": [1] for c in ("Grid", "Block") for a in "xyz"}}
    pd.DataFrame({"OPName": ["bmm"], "Latency": [1.0], "Device": ["Tesla T4"], **launch, "B": [1], "M": [2]}).to_csv(
        p, index=False)
    with pytest.raises(data.DataError, match=r"k\.csv: missing column\(s\) N, K"):
        data.read_kernel_csv(p)
    # the kernel name and launch grid, which the table keeps, are checked too (a bare KeyError before)
    no_grid = {k: v for k, v in launch.items() if k not in ("Kernel Name", "Grid y")}
    pd.DataFrame({"OPName": ["ln"], "Latency": [1.0], "Device": ["Tesla T4"], **no_grid, "B": [1], "H": [2]}).to_csv(
        p, index=False)
    with pytest.raises(data.DataError, match=r"k\.csv: missing column\(s\) Kernel Name, Grid y$"):
        data.read_kernel_csv(p)
    # occupancy is optional (AMD files have none)
    pd.DataFrame({"OPName": ["ln"], "Latency": [1.0], "Device": ["Tesla T4"], **launch, "B": [1], "H": [2]}).to_csv(
        p, index=False)
    assert data.read_kernel_csv(p)["kernel_name"].tolist() == ["k"]
    pd.DataFrame({"OPName": ["conv2"], "Latency": [1.0], "Device": ["x"], **launch, "B": [1], "H": [2]}).to_csv(
        p, index=False)
    with pytest.raises(data.DataError, match="unknown OPName"):
        data.read_kernel_csv(p)


def test_a_gpu_without_a_device_json_is_named(tmp_path, monkeypatch):
    p = tmp_path / "bmm.csv"
    row = {"OPName": "bmm", "Latency": 1.0, "Device": "Mystery GPU", "Kernel Name": "k", "B": 1, "M": 2, "N": 2, "K": 2,
           **{f"{kind} {axis}": 1 for kind in ("Grid", "Block") for axis in "xyz"}}
    pd.DataFrame([row]).to_csv(p, index=False)
    monkeypatch.setattr(data, "kernel_csvs", lambda vendor="nvidia": [(p, "test")])
    monkeypatch.setattr(paths, "NEUSIGHT", tmp_path)   # the table's `source` column is relative to it
    with pytest.raises(data.DataError, match=r"no device JSON for \['Mystery GPU'\]"):
        data._build_table("nvidia")


def test_splits_follow_the_protocol(table):
    assert set(table["split"]) == set(data.SPLITS)
    ood = set(table.loc[table["split"] == "test_ood", "device"])
    assert {"NVIDIA H100 80GB HBM3", "NVIDIA A100 80GB PCIe"} <= ood
    train_devices = set(table.loc[table["split"] == "train", "device"])
    assert train_devices == {"Tesla P4", "Tesla P100-PCIE-16GB", "Tesla T4", "Tesla V100-PCIE-32GB", "NVIDIA A100-PCIE-40GB"}
    assert not (ood & train_devices)


def test_table_loads_every_kernel_csv(table):
    assert set(table["op_class"]) == set(data.OP_CLASSES)
    assert table["latency_ms"].gt(0).all()
    assert table[["num_sm", "mem_bw_gbps", "peak_gflops"]].notna().all().all()
    gemm = table[table["op_class"].isin(["BMM", "FC"])]
    assert gemm[["B", "M", "N", "K"]].notna().all().all()
    # every row of every source file made it into the table, and only exact duplicates were dropped
    key = ["op", "device", "B", "M", "N", "K", "H", "latency_ms"]
    sources = pd.concat([data.read_kernel_csv(p) for p, _ in data.kernel_csvs()], ignore_index=True)
    sources = sources.reindex(columns=key)
    assert len(table) == len(sources.drop_duplicates()) < len(sources)
    assert table[key].merge(sources.drop_duplicates(), how="outer", indicator=True)["_merge"].eq("both").all()


def test_filters(table):
    t4 = data.load_kernels(ops="BMM", devices="Tesla T4", splits="train")
    assert len(t4) == ((table["op_class"] == "BMM") & (table["device"] == "Tesla T4") & (table["split"] == "train")).sum()
    assert len(data.load_kernels(ops=["add", "mul"])) == table["op"].isin(["add", "mul"]).sum()


def test_amd_table_loads():
    amd = data.load_kernels(vendor="amd")
    assert set(amd["device"]) == {"AMD Instinct MI100", "AMD Instinct MI210"}
    assert {"BMM", "FC", "EW"} <= set(amd["op_class"])



def test_failed_download_is_a_data_error_and_leaves_nothing(monkeypatch, tmp_path):
    def offline(*args, **kwargs):
        raise data.urllib.error.URLError("no network")
    monkeypatch.setattr(data.urllib.request, "urlopen", offline)
    with pytest.raises(data.DataError, match="download of .*failed.*no network"):
        data._download(tmp_path)
    assert list(tmp_path.iterdir()) == []


def _tarball(files: dict) -> bytes:
    """A .tar.gz of {member name: bytes}, as the upstream download would serve it."""
    blob = io.BytesIO()
    with tarfile.open(fileobj=blob, mode="w:gz") as tar:
        for name, text in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(text)
            tar.addfile(info, io.BytesIO(text))
    return blob.getvalue()


def test_download_unpacks_the_asplos_folders_by_their_last_name(monkeypatch, tmp_path):
    served = _tarball({"NeuSight-6945927/scripts/asplos/data/device_configs/G.json": b"{}",
                       "NeuSight-6945927/scripts/asplos/summary/perop.csv": b"x",
                       "NeuSight-6945927/README.md": b"not a dataset file"})
    monkeypatch.setattr(data.urllib.request, "urlopen", lambda *a, **k: io.BytesIO(served))
    data._download(tmp_path)
    got = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert got == ["data/device_configs/G.json", "summary/perop.csv"]
    # a tarball without any of the folders is an error, not an empty dataset
    readme_only = _tarball({"NeuSight-6945927/README.md": b"x"})
    monkeypatch.setattr(data.urllib.request, "urlopen", lambda *a, **k: io.BytesIO(readme_only))
    with pytest.raises(data.DataError, match="holds none of"):
        data._download(tmp_path / "again")


def test_every_top_level_op_file_of_both_splits_is_read():
    # train/ holds elem, ln and softmax files (its GEMMs are under collect/), test/ all five
    files = {(p.name, kind) for p, kind in data.kernel_csvs()}
    assert {("elem.csv", "train"), ("ln.csv", "train"), ("softmax.csv", "train")} <= files
    assert {(f"{op}.csv", "test") for op in ("bmm", "linear", "elem", "ln", "softmax")} <= files


def test_splits_of_both_vendors_training_gpus():
    assert data.split_of("Tesla T4", "train") == "train" and data.split_of("Tesla T4", "test") == "test_id"
    assert data.split_of("AMD Instinct MI100", "train") == "train"         # AMD trains on MI100 and MI210
    assert data.split_of("AMD Instinct MI250", "train") == "test_ood"
    assert data.split_of("NVIDIA H100 80GB HBM3", "train") == "test_ood"


def test_download_that_is_not_a_tarball_is_a_data_error(monkeypatch, tmp_path):
    class Response(io.BytesIO):
        pass
    monkeypatch.setattr(data.urllib.request, "urlopen", lambda *a, **k: Response(b"<html>rate limited</html>"))
    with pytest.raises(data.DataError, match="not a readable tarball"):
        data._download(tmp_path)


def test_fingerprint_ignores_prose_in_the_loader(monkeypatch):
    before = data.fingerprint()
    real = data.Path.read_text

    def with_comment(self, *args, **kwargs):
        text = real(self, *args, **kwargs)
        return text + "\n# a comment\n" if self.name == "devices.py" else text
    monkeypatch.setattr(data.Path, "read_text", with_comment)
    assert data.fingerprint() == before

    def with_code(self, *args, **kwargs):
        text = real(self, *args, **kwargs)
        return text + "\nX = 1\n" if self.name == "ops.py" else text
    monkeypatch.setattr(data.Path, "read_text", with_code)
    assert data.fingerprint() != before


def test_migration_source_compares_the_two_tables(tmp_path, monkeypatch):
    table = pd.DataFrame({"op": ["bmm", "ln"], "latency_ms": [1.0, 2.0]})
    monkeypatch.setattr(data.paths, "CACHE", tmp_path)
    monkeypatch.setattr(data, "fingerprint", lambda vendor="nvidia": "new")
    monkeypatch.setattr(data, "load_kernels", lambda vendor="nvidia": table)
    table.to_parquet(tmp_path / "kernels-nvidia-new.parquet", index=False)
    monkeypatch.delenv(data.MIGRATE_ENV, raising=False)
    assert data.migration_source() is None
    monkeypatch.setenv(data.MIGRATE_ENV, "old")
    with pytest.raises(data.DataError, match=r"NEUSIGHT_MIGRATE_FROM=old: no kernel table .*kernels-nvidia-old\.parquet"):
        data.migration_source()
    table.to_parquet(tmp_path / "kernels-nvidia-old.parquet", index=False)
    assert data.migration_source() == "old"
    table.iloc[:1].to_parquet(tmp_path / "kernels-nvidia-old.parquet", index=False)
    with pytest.raises(data.DataError, match="differs from kernels-nvidia-old.parquet, so the models must retrain"):
        data.migration_source()
    monkeypatch.setenv(data.MIGRATE_ENV, "new")      # the current fingerprint: nothing to migrate
    assert data.migration_source() is None
