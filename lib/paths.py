"""Where things live in the repository (introduced in notebook 01)."""
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data"
NEUSIGHT = DATA / "neusight"            # materialized public dataset (git-ignored)
DEVICES_ADDED = DATA / "devices"        # GPU specs this project adds, each number sourced
MEASURED = DATA / "measured"            # data this project measured itself (committed)
MODELS_ADDED = DATA / "models"          # model configs this project adds (no label measures them)
BUILD = Path(os.environ.get("NEUSIGHT_BUILD", ROOT / "build"))  # caches, predictors, executed notebooks
CACHE = BUILD / "cache"
FIGURES = Path(os.environ.get("NEUSIGHT_FIGURES", ROOT / "figures"))  # make test points it into build/smoke
TABLES = FIGURES / "tables"
MODEL_LEDGER_ENV = "NEUSIGHT_MODEL_LEDGER"  # names the file a notebook run logs its trained and loaded models to

# Layout of the materialized dataset (same as the dataset's README).
NVIDIA_DATASET = NEUSIGHT / "data" / "dataset"
AMD_DATASET = NEUSIGHT / "data" / "dataset_amd"
DEVICE_CONFIGS = NEUSIGHT / "data" / "device_configs"
MODEL_CONFIGS = NEUSIGHT / "data" / "DLmodel_configs"
LABELS = NEUSIGHT / "label"
SUMMARY = NEUSIGHT / "summary"


def output_problem(path, inputs=()) -> str | None:
    """Why `path` cannot be written as an output file, else None: it names a folder, its folder (for a link,
    the folder of the file it points to) is missing, it exists but is not a regular file (a FIFO, a device), or
    it is one of the `inputs`, or the file system refuses the name (too long, ...)."""
    try:
        return _output_problem(path, inputs)
    except OSError as e:
        return f"cannot be used as a file path ({e.strerror or e})"


def _output_problem(path, inputs) -> str | None:
    text, path = str(path), Path(path)
    if path.is_dir() or text.endswith(("/", os.sep)):
        return "names a folder, not a file"
    if path.is_symlink():   # write_atomic writes the file a link points to: that file's folder must exist
        path = path.resolve()
    if not path.parent.is_dir():
        return f"{path.parent} is a file, not a folder" if path.parent.exists() else f"folder {path.parent} does not exist"
    if path.exists() and not path.is_file():
        return "exists and is not a regular file"
    if any(path.resolve() == Path(i).resolve() for i in inputs if i):
        return "is also an input of this command; it would be overwritten"
    return None


def write_atomic(path, write) -> Path:
    """`write(tmp)` to a sibling temporary file, then rename it onto `path`: never a half-written file."""
    path = Path(path)
    if path.is_symlink():   # write the file the link points to, and keep the link
        path = path.resolve()
    # one temporary file per process (two runs writing one cached model never share it); same suffixes, so pandas
    # infers the same compression
    tmp = path.with_name(f".tmp-{os.getpid()}-{path.name}")
    try:
        write(tmp)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def read_table(path, what: str, error: type[Exception], columns=()):
    """A CSV of data/ (board power, interconnect) as a DataFrame with `columns`; `error` names the file when it is
    missing, unreadable or lacks a column (notebooks 04 and 07)."""
    import pandas as pd   # here, not above: lib.notebook_deps imports this module with the system Python
    path = Path(path)
    try:
        table = pd.read_csv(path)
    except FileNotFoundError:
        raise error(f"{path}: {what} not found") from None
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as e:
        raise error(f"{path}: not a readable CSV ({str(e).splitlines()[0]})") from None
    if missing := [c for c in columns if c not in table.columns]:
        raise error(f"{path}: missing column(s) {', '.join(missing)}")
    return table
