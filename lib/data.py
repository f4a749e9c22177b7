"""The data layer: materialize the NeuSight dataset and load one tidy kernel table (notebook 01).

`make data` (python -m lib.data) copies the dataset into data/neusight/ from $NEUSIGHT_DATA,
else ../shared/neusight-data, else downloads the public repository at the pinned commit, and
records a sha256 manifest that later runs verify. `load_kernels()` returns every kernel CSV as
one table with op class, dimensions, device spec, launch geometry, latency and split columns.
"""
from __future__ import annotations

import hashlib
import io
import os
import shutil
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path

import pandas as pd

from . import paths
from .ops import EW_OPS, GEMM_DIMS, OP_CLASS, OP_CLASSES, VEC_DIMS  # noqa: F401  (imported from here too)
from .devices import TRAIN_GPUS, all_devices

UPSTREAM_REPO = "sitar-lab/NeuSight"
UPSTREAM_COMMIT = "6945927d9afcca2b9daf021f8395e53edc5b4eef"
UPSTREAM_TARBALL = f"https://codeload.github.com/{UPSTREAM_REPO}/tar.gz/{UPSTREAM_COMMIT}"
UPSTREAM_FOLDERS = ("scripts/asplos/data", "scripts/asplos/label", "scripts/asplos/summary")
MANIFEST = "MANIFEST.sha256"

SPLITS = ("train", "test_id", "test_ood")

# Dataset CSV column -> tidy column.
RENAME = {"OPName": "op", "Latency": "latency_ms", "Device": "device", "Kernel Name": "kernel_name",
          "Warps per SM": "warps_per_sm", "Blocks per SM": "blocks_per_sm",
          "Grid x": "grid_x", "Grid y": "grid_y", "Grid z": "grid_z",
          "Block x": "block_x", "Block y": "block_y", "Block z": "block_z"}
KEEP = ("op", "op_class", "B", "M", "N", "K", "H", "device", "latency_ms", "kernel_name",
        "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
        "warps_per_sm", "blocks_per_sm", "split", "source")


class DataError(RuntimeError):
    """Missing or malformed dataset files; the message says which and what to do."""


# ---------------------------------------------------------------- materialize + manifest

def source_dir() -> Path | None:
    """Where to copy the dataset from: $NEUSIGHT_DATA, else ../shared/neusight-data, else None."""
    env = os.environ.get("NEUSIGHT_DATA")
    if env:
        if not Path(env).is_dir():
            raise DataError(f"$NEUSIGHT_DATA={env} is not a directory")
        return Path(env)
    shared = paths.ROOT.parent / "shared" / "neusight-data"
    return shared if shared.is_dir() else None


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def manifest_of(root: Path) -> dict[str, str]:
    """Relative path -> sha256 of every file under root (the manifest itself excluded)."""
    return {str(p.relative_to(root)): _sha256(p) for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != MANIFEST}


def write_manifest(root: Path) -> None:
    lines = [f"{digest}  {rel}" for rel, digest in manifest_of(root).items()]
    (root / MANIFEST).write_text("\n".join(lines) + "\n")


def verify_manifest(root: Path = paths.NEUSIGHT) -> list[str]:
    """Files whose hash differs from the manifest, or that were added or removed ([] = intact)."""
    recorded = {}
    for line in (root / MANIFEST).read_text().splitlines():
        digest, rel = line.split("  ", 1)
        recorded[rel] = digest
    actual = manifest_of(root)
    return sorted(rel for rel in recorded.keys() | actual.keys() if recorded.get(rel) != actual.get(rel))


def _download(dest: Path) -> None:
    """Fetch the pinned upstream commit's tarball and unpack its asplos folders into dest."""
    print(f"downloading {UPSTREAM_REPO}@{UPSTREAM_COMMIT[:10]} ...", file=sys.stderr)
    try:
        with urllib.request.urlopen(UPSTREAM_TARBALL, timeout=120) as r:
            blob = r.read()
    except OSError as e:   # URLError, HTTPError and timeouts are all OSErrors
        raise DataError(f"no local copy of the dataset ($NEUSIGHT_DATA unset, no ../shared/neusight-data) and "
                        f"the download of {UPSTREAM_TARBALL} failed ({getattr(e, 'reason', e)})") from None
    n_files = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
            for member in tar.getmembers():
                rel = member.name.split("/", 1)[-1]
                for folder in UPSTREAM_FOLDERS:
                    if member.isfile() and rel.startswith(folder + "/"):
                        target = dest / folder.rsplit("/", 1)[-1] / rel[len(folder) + 1:]
                        target.parent.mkdir(parents=True, exist_ok=True)
                        target.write_bytes(tar.extractfile(member).read())
                        n_files += 1
    except (tarfile.TarError, EOFError, OSError) as e:
        raise DataError(f"the download of {UPSTREAM_TARBALL} is not a readable tarball ({e})") from None
    if not n_files:
        raise DataError(f"the download of {UPSTREAM_TARBALL} holds none of {', '.join(UPSTREAM_FOLDERS)}")


def materialize(force: bool = False) -> Path:
    """Make data/neusight/ (copy or download), write its manifest; verify it if already there."""
    dest = paths.NEUSIGHT
    if (dest / MANIFEST).is_file() and not force:
        bad = verify_manifest(dest)
        if bad:
            raise DataError(f"{dest} differs from its manifest ({len(bad)} files, e.g. {bad[0]}); "
                            "run `make data FORCE=1` to materialize it again")
        return dest
    src = source_dir()
    tmp = Path(tempfile.mkdtemp(prefix="neusight-", dir=dest.parent))
    try:
        if src is not None:
            print(f"copying dataset from {src}", file=sys.stderr)
            shutil.copytree(src, tmp, dirs_exist_ok=True)
        else:
            _download(tmp)
        write_manifest(tmp)
        if dest.exists():
            shutil.rmtree(dest)
        tmp.rename(dest)  # atomic: nothing half-written is left behind
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return dest


def require_data() -> Path:
    """data/neusight/, or a clear error saying how to get it."""
    if not (paths.NEUSIGHT / MANIFEST).is_file():
        raise DataError(f"{paths.NEUSIGHT} is missing: run `make data` (it copies $NEUSIGHT_DATA or "
                        f"../shared/neusight-data, or downloads {UPSTREAM_REPO}@{UPSTREAM_COMMIT[:10]})")
    return paths.NEUSIGHT


# ---------------------------------------------------------------- the tidy kernel table

def kernel_csvs(vendor: str = "nvidia") -> list[tuple[Path, str]]:
    """(csv, kind) for every kernel CSV of one vendor; kind is 'train' or 'test' by folder."""
    root = require_data() / "data" / ("dataset" if vendor == "nvidia" else "dataset_amd")
    out = []
    for kind in ("train", "test"):
        folder = root / kind
        files = sorted(folder.glob("collect/*/*/*.csv"))
        files += [folder / f"{op}.csv" for op in ("bmm", "linear", "elem", "ln", "softmax")]
        out += [(f, kind) for f in files if f.is_file() and f.parent.parent.name != "conv"]
    return out


def read_kernel_csv(path: Path) -> pd.DataFrame:
    """One dataset CSV, checked for the columns the table needs; tidy column names."""
    df = pd.read_csv(path)
    # every column KEEP takes from the file; occupancy (Warps/Blocks per SM) is optional, AMD files lack it
    needed = ["OPName", "Latency", "Device", "Kernel Name",
              "Grid x", "Grid y", "Grid z", "Block x", "Block y", "Block z"]
    missing = [c for c in needed if c not in df.columns]
    if not missing and len(df):
        dims = GEMM_DIMS if df["OPName"].iloc[0] in ("bmm", "linear") else VEC_DIMS
        missing = [c for c in dims if c not in df.columns]
    if missing:
        raise DataError(f"{path}: missing column(s) {', '.join(missing)}")
    df = df.rename(columns=RENAME)
    unknown = sorted(set(df["op"]) - OP_CLASS.keys())
    if unknown:
        raise DataError(f"{path}: unknown OPName value(s) {unknown}")
    return df


def split_of(device: str, kind: str) -> str:
    """Evaluation split (DESIGN.md): train GPU + train file, train GPU + test shape, other GPU."""
    if device not in TRAIN_GPUS:
        return "test_ood"
    return "train" if kind == "train" else "test_id"


def _build_table(vendor: str) -> pd.DataFrame:
    frames = []
    for path, kind in kernel_csvs(vendor):
        df = read_kernel_csv(path)
        df["source"] = str(path.relative_to(paths.NEUSIGHT))
        df["split"] = [split_of(d, kind) for d in df["device"]]
        frames.append(df)
    df = pd.concat(frames, ignore_index=True)
    df["op_class"] = df["op"].map(OP_CLASS)
    for col in ("M", "N", "K", "H", "warps_per_sm", "blocks_per_sm"):  # AMD files lack occupancy
        if col not in df:
            df[col] = float("nan")
    df = df[list(KEEP)].copy()
    # The same measurement can occur in two files (e.g. train/elem.csv rows also in collect/).
    df = df.drop_duplicates(subset=["op", "device", "B", "M", "N", "K", "H", "latency_ms"])
    devices = all_devices()
    missing = sorted(set(df["device"]) - devices.keys())
    if missing:
        raise DataError(f"no device JSON for {missing} (looked in {paths.DEVICE_CONFIGS} and {paths.DEVICES_ADDED})")
    spec = pd.DataFrame([d.spec_columns() for d in devices.values()])
    df = df.merge(spec, on="device", how="left")
    return df.reset_index(drop=True)


# The loader's code enters the fingerprint as code_text (no comments or docstrings), so fixing prose in
# these modules rebuilds no table and retrains no predictor; a change to what they do does both.
FINGERPRINT_CODE = ("data.py", "devices.py", "ops.py")


def fingerprint(vendor: str = "nvidia") -> str:
    """Hash of what the kernel table is made from: dataset manifest, loader code, device specs."""
    from .train import code_text   # lazy: torch is not needed to copy the dataset
    manifest = (require_data() / MANIFEST).read_bytes()
    code = "".join(code_text((paths.ROOT / "lib" / f).read_text()) for f in FINGERPRINT_CODE).encode()
    extra = b"".join(f.read_bytes() for f in sorted(paths.DEVICES_ADDED.glob("*.json")))
    return hashlib.sha256(manifest + code + extra + vendor.encode()).hexdigest()[:16]


def kernel_table_path(vendor: str = "nvidia", fp: str | None = None) -> Path:
    """build/cache/kernels-<vendor>-<fingerprint>.parquet, load_kernels' cache (fp None: the current fingerprint)."""
    return paths.CACHE / f"kernels-{vendor}-{fp or fingerprint(vendor)}.parquet"


def load_kernels(ops=None, devices=None, splits=None, vendor: str = "nvidia") -> pd.DataFrame:
    """Tidy kernel table, cached as parquet under build/cache/; filter by op, device, split."""
    cache = kernel_table_path(vendor)
    if cache.is_file():
        df = pd.read_parquet(cache)
    else:
        df = _build_table(vendor)
        cache.parent.mkdir(parents=True, exist_ok=True)
        paths.write_atomic(cache, lambda tmp: df.to_parquet(tmp, index=False))
    if ops is not None:
        ops = [ops] if isinstance(ops, str) else list(ops)
        df = df[df["op"].isin(ops) | df["op_class"].isin(ops)]
    if devices is not None:
        df = df[df["device"].isin([devices] if isinstance(devices, str) else list(devices))]
    if splits is not None:
        df = df[df["split"].isin([splits] if isinstance(splits, str) else list(splits))]
    return df.reset_index(drop=True)


# An edit to the loader's code moves the fingerprint, and so every NeuSight predictor's cache key, even where the
# kernel table comes out as it was. With $NEUSIGHT_MIGRATE_FROM set to the previous fingerprint, and the tables built
# under both fingerprints equal, lib.predictors copies each missing model from its previous key instead of
# retraining it (docs/reproducibility.md).
MIGRATE_ENV = "NEUSIGHT_MIGRATE_FROM"


def migration_source(vendor: str = "nvidia") -> str | None:
    """The previous fingerprint named by $NEUSIGHT_MIGRATE_FROM once both kernel tables are found equal; None if unset."""
    old = os.environ.get(MIGRATE_ENV, "").strip()
    if not old or old == fingerprint(vendor):
        return None
    before = kernel_table_path(vendor, old)
    if not before.is_file():
        raise DataError(f"{MIGRATE_ENV}={old}: no kernel table {before} to compare with")
    load_kernels(vendor=vendor)   # builds the current table if it is not cached yet
    if not pd.read_parquet(before).equals(pd.read_parquet(kernel_table_path(vendor))):
        raise DataError(f"{MIGRATE_ENV}={old}: the kernel table differs from {before.name}, so the models must retrain; "
                        f"unset {MIGRATE_ENV}")
    return old


def main() -> None:
    force = os.environ.get("FORCE") == "1" or "--force" in sys.argv
    try:
        dest = materialize(force=force)
    except DataError as e:
        sys.exit(f"error: {e}")
    n = sum(1 for _ in dest.rglob("*") if _.is_file())
    print(f"{dest}: {n} files, manifest verified", file=sys.stderr)


if __name__ == "__main__":
    main()
