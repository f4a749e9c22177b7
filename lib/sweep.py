"""Which GPU, which batch: one model forecast on several GPUs and batch sizes in one call, as a CSV table (notebook 05).

    python -m lib.sweep --model gpt3_27 --device H100 H200 L4 --batch 1 2 4 --seq 1024 --mode training [--plot F.png]

Each row is what `python -m lib.forecast` prints for that GPU and batch (the same numbers up to float32 last bits), by
lib.forecast.forecast_sweep: one graph capture per batch, one prediction pass per vendor's models.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from . import paths
from .cli import Parser, device_arg, model_arg, stdout_failed
from .devices import DeviceError, load_device
from .forecast import forecast_sweep, input_error
from .model_config import GraphError

# the baselines that can give no answer (li without the target's measurements, habitat past its cap) are left to
# lib.forecast, which checks each forecast
METHODS = ("neusight", "roofline")
COLUMNS = ["device", "batch", "seq", "mode", "latency_ms", "forward_ms", "backward_ms", "kernels", "fits_memory"]
PLOT_FORMATS = ("png", "pdf", "svg")   # --plot's file types, by the file's suffix


def sweep_table(model_config, devices, batches, seq: int, mode: str, *, method: str = "neusight",
                fusion: bool = False) -> pd.DataFrame:
    """forecast_sweep over GPUs of either vendor, each by its vendor's models, one row per (device, batch) in the order
    given; fits_memory is False where the run cannot fit in the GPU's memory, and memory_note (not in the CSV) says
    by how much, as lib.forecast warns (notebook 05)."""
    from .caveats import activation_gb, memory_note
    from .graph import parameter_count
    from .kernels import vendor_models
    devices = list(devices)
    by_vendor: dict[str, list] = {}
    for d in devices:
        by_vendor.setdefault(d.vendor, []).append(d)
    rows = pd.concat([forecast_sweep(model_config, group, batches, seq, mode, method=method, fusion=fusion,
                                     cfg_by_class=vendor_models(group[0], method))
                      for group in by_vendor.values()], ignore_index=True)
    # the order given; a GPU or batch given twice keeps its first place
    order = {"device": {n: i for i, n in reversed(list(enumerate(d.name for d in devices)))},
             "batch": {int(b): i for i, b in reversed(list(enumerate(batches)))}}
    rows = rows.drop_duplicates(["device", "batch"]).sort_values(["device", "batch"], key=lambda col: col.map(order[col.name]))
    parameters = parameter_count(model_config)
    saved = {b: activation_gb(model_config, b, seq) if mode == "training" else None for b in set(rows["batch"])}
    specs = {d.name: d for d in devices}
    notes = [memory_note(parameters, mode, specs[name], saved[b]) for name, b in zip(rows["device"], rows["batch"])]
    rows = rows.assign(fits_memory=[n is None for n in notes], memory_note=[n or "" for n in notes])
    return rows[COLUMNS + ["memory_note"]].reset_index(drop=True)


def memory_warnings(table: pd.DataFrame) -> list[str]:
    """One line per GPU with runs of a sweep_table that cannot fit: its smallest such batch's memory note, and the
    other batches that cannot fit either (notebook 05)."""
    lines = []
    for _, rows in table[~table["fits_memory"]].groupby("device", sort=False):
        rows = rows.sort_values("batch")
        others = [str(b) for b in rows["batch"].iloc[1:]]
        also = f" (nor can batch{'es' if len(others) > 1 else ''} {', '.join(others)})" if others else ""
        lines.append(f"batch {rows['batch'].iloc[0]}: {rows['memory_note'].iloc[0]}{also}")
    return lines


def sweep_figure(table: pd.DataFrame, title: str):
    """A sweep_table as two panels over batch size, one line per GPU: one step's latency and its time per sequence
    (latency_ms / batch), a run that cannot fit in the GPU's memory drawn as a cross (notebook 05)."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    from .plotting import device_colors, plt, short_gpu_name
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharex=True)
    colors = device_colors(table["device"].unique())
    for name, rows in table.groupby("device", sort=False):
        rows = rows.sort_values("batch")
        for ax, y in zip(axes, (rows["latency_ms"], rows["latency_ms"] / rows["batch"])):
            ax.plot(rows["batch"], y, "-", color=colors[name], label=short_gpu_name(name))
            fits = rows["fits_memory"].to_numpy(bool)
            ax.plot(rows["batch"][fits], y[fits], "o", color=colors[name])
            ax.plot(rows["batch"][~fits], y[~fits], "x", color=colors[name], markersize=9, mew=2)
    for ax, what in zip(axes, ("one step (ms)", "per sequence (ms)")):
        ax.set(xscale="log", yscale="log", xlabel="batch (sequences)", ylabel=what)
        ax.set_xticks(sorted(table["batch"].unique()), labels=sorted(table["batch"].unique()))
        ax.minorticks_off()
        ax.yaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))   # ticks at 1, 2 and 5 per decade, as plain numbers
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    handles, labels = axes[0].get_legend_handles_labels()
    if not table["fits_memory"].all():
        handles.append(plt.Line2D([], [], ls="", marker="x", color="black", mew=2))
        labels.append("does not fit in memory")
    fig.suptitle(title)
    fig.tight_layout()
    fig.legend(handles, labels, fontsize="small", loc="center left", bbox_to_anchor=(1.0, 0.5))
    return fig


def _write_plot(path: str, table: pd.DataFrame, title: str) -> None:
    """sweep_figure(table) written to `path` in its suffix's format, never half-written."""
    from .plotting import plt
    fig = sweep_figure(table, title)
    try:
        paths.write_atomic(path, lambda tmp: fig.savefig(tmp, format=plot_format(path)))
    finally:
        plt.close(fig)


def plot_format(path: str) -> str | None:
    """The file type of a --plot path ('png' for x.png, X.PNG), or None where its suffix is none of PLOT_FORMATS."""
    suffix = Path(path).suffix.lower().lstrip(".")
    return suffix if suffix in PLOT_FORMATS else None


def main(argv=None) -> int:
    p = Parser(prog="python -m lib.sweep", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, type=model_arg,
                   help="Hugging Face config.json, or the name of one in DLmodel_configs/ or data/models/ (gpt3_27)")
    p.add_argument("--device", required=True, nargs="+", type=device_arg,
                   help="device spec JSONs, or known GPUs' names (H100 H200 'Tesla T4')")
    p.add_argument("--batch", type=int, required=True, nargs="+", help="sequences per step, one or more")
    p.add_argument("--seq", type=int, required=True, help="tokens per sequence (<= the model's maximum)")
    p.add_argument("--mode", choices=("inference", "training"), required=True,
                   help="one forward pass, or forward + backward (no optimizer step)")
    p.add_argument("--fusion", action="store_true", help="fuse chains of element-wise ops, as lib.forecast --fusion")
    p.add_argument("--method", choices=METHODS, default="neusight",
                   help="NeuSight (default) or the roofline; for the other baselines, lib.forecast")
    p.add_argument("--output", default="-", help="CSV file to write ('-', the default: standard output)")
    p.add_argument("--plot", metavar="FILE", help="also draw the table, latency over batch per GPU, to this "
                   f"{', '.join(PLOT_FORMATS)} file (by its suffix)")
    args = p.parse_args(argv)
    for name, values in (("--batch", args.batch), ("--seq", [args.seq])):
        if min(values) < 1:
            print(f"error: {name} must be positive integers, got {min(values)}", file=sys.stderr)
            return 2
    for option, path in (("--output", args.output), ("--plot", args.plot)):
        if path not in (None, "-") and (problem := paths.output_problem(path, (args.model, *args.device))):
            print(f"error: {option} {path}: {problem}", file=sys.stderr)
            return 2
    if args.plot is not None and plot_format(args.plot) is None:
        print(f"error: --plot {args.plot}: name a {', '.join(PLOT_FORMATS)} file (by its suffix)", file=sys.stderr)
        return 2
    if args.plot is not None and args.output != "-" and Path(args.plot).resolve() == Path(args.output).resolve():
        print(f"error: --plot {args.plot}: is also the --output file", file=sys.stderr)
        return 2
    from .caveats import extrapolation_note, fusion_note, head_note, spec_notes
    from .data import DataError
    try:
        devices = [load_device(path) for path in args.device]
        table = sweep_table(args.model, devices, args.batch, args.seq, args.mode, method=args.method,
                            fusion=args.fusion)
    except (DataError, DeviceError, GraphError, ValueError) as e:   # KernelInputError is a ValueError
        print(input_error(args.model, e), file=sys.stderr)
        return 2
    if len(bad := table[~(table["latency_ms"] > 0)]):   # NaN or not positive
        print(f"error: the forecast for {bad['device'].iloc[0]} is not a positive number; check its spec values",
              file=sys.stderr)
        return 2
    for note in (*[n for d in devices for n in (extrapolation_note(d), *spec_notes(d))],
                 fusion_note(args.fusion, args.mode)):
        if note:
            print(f"warning: {note}", file=sys.stderr)
    for line in memory_warnings(table):
        print(f"warning: {line}", file=sys.stderr)
    if note := head_note(args.model, args.mode):
        print(f"note: {note}", file=sys.stderr)
    if args.plot is not None:
        title = f"{Path(args.model).stem}, {args.seq} tokens, {args.mode}{', fused' if args.fusion else ''} ({args.method})"
        try:
            _write_plot(args.plot, table, title)
        except OSError as e:
            print(f"error: --plot {args.plot}: {e.strerror or e}", file=sys.stderr)
            return 2
        print(f"wrote the plot to {args.plot}", file=sys.stderr)
    if args.output != "-":
        try:
            paths.write_atomic(args.output, lambda tmp: table[COLUMNS].to_csv(tmp, index=False))
        except OSError as e:
            print(f"error: --output {args.output}: {e.strerror or e}", file=sys.stderr)
            return 2
        print(f"wrote {len(table)} forecasts to {args.output}", file=sys.stderr)
        return 0
    try:
        print(table[COLUMNS].to_csv(index=False), end="", flush=True)
    except OSError as e:   # a full disk, a reader that quit
        stdout_failed(e)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
