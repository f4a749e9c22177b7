"""lib.plotting: one colour per GPU and per kernel class across every figure, and short GPU names."""
from lib import paths
from lib.calibration import CLASSES
from lib.data import load_kernels
from lib.devices import load_device
from lib.plotting import CLASS_COLORS, DEVICE_COLORS, device_colors, short_gpu_name


def test_every_gpu_of_the_figures_has_its_own_colour():
    measured = set(load_kernels()["device"].unique())
    targets = {load_device(paths.DEVICE_CONFIGS / "NVIDIA_L4.json").name,
               load_device(paths.DEVICES_ADDED / "NVIDIA_H200.json").name}
    named = measured | targets
    assert len(measured) == 7 and named <= set(DEVICE_COLORS)
    colours = device_colors(sorted(named))
    assert len(set(colours.values())) == len(named)          # no two GPUs share a colour


def test_any_other_gpu_is_grey_and_never_takes_a_named_colour():
    other = device_colors(["AMD Instinct MI300X", "NVIDIA B200"])
    assert other["AMD Instinct MI300X"] == other["NVIDIA B200"]
    assert other["NVIDIA B200"] not in DEVICE_COLORS.values()
    # the colour of a GPU does not depend on which other GPUs a figure shows
    assert device_colors(["Tesla T4"]) == {"Tesla T4": device_colors(sorted(DEVICE_COLORS))["Tesla T4"]}


def test_every_kernel_class_has_its_own_colour():
    assert set(CLASS_COLORS) == set(CLASSES)
    assert len(set(CLASS_COLORS.values())) == len(CLASSES)


def test_bars_with_reference_places_bars_and_diamonds_by_hand():
    import matplotlib.pyplot as plt
    import numpy as np
    import pandas as pd
    from lib.plotting import bars_with_reference

    values = pd.DataFrame({"a": [1.0, 2.0], "b": [3.0, 4.0], "c": [5.0, np.nan]}, index=["g0", "g1"])
    # the reference's rows in another order, one row values lacks, and a column values lacks
    reference = pd.DataFrame({"b": [40.0, 30.0, 99.0], "z": [7.0, 7.0, 7.0]}, index=["g1", "g0", "g9"])
    fig, ax = plt.subplots()
    centres = bars_with_reference(ax, values, reference, "ref")
    # three bars share 0.8: width 0.8/3, centres at -0.8/3, 0, +0.8/3 around each group
    assert np.allclose(centres["a"], [-0.8 / 3, 1 - 0.8 / 3]) and np.allclose(centres["b"], [0, 1])
    assert np.allclose(centres["c"], [0.8 / 3, 1 + 0.8 / 3])
    heights = [p.get_height() for p in ax.patches]
    assert heights[:4] == [1.0, 2.0, 3.0, 4.0] and np.isnan(heights[5])
    assert np.allclose([p.get_width() for p in ax.patches], 0.8 / 3)
    # one diamond per reference value over column b's bars, matched by row name; none for z
    (dots,) = ax.collections
    assert np.allclose(dots.get_offsets(), [[0, 30.0], [1, 40.0]])
    assert ax.get_legend_handles_labels()[1] == ["ref", "a", "b", "c"]
    plt.close(fig)


def test_bars_take_the_colour_named_for_their_column_and_the_cycle_otherwise():
    import matplotlib.pyplot as plt
    import pandas as pd
    from matplotlib.colors import to_rgba
    from lib.plotting import METHOD_COLORS, bars_with_reference

    fig, ax = plt.subplots()
    cycle = [c["color"] for c in plt.rcParams["axes.prop_cycle"]]
    bars_with_reference(ax, pd.DataFrame({"x": [1.0], "li": [2.0], "y": [3.0]}), colors={"li": METHOD_COLORS["li"]})
    assert [p.get_facecolor() for p in ax.patches] == [to_rgba(cycle[0]), to_rgba(METHOD_COLORS["li"]),
                                                        to_rgba(cycle[1])]
    plt.close(fig)


def test_every_method_has_its_own_colour_and_label():
    from lib.plotting import METHOD_COLORS, METHOD_LABELS
    from lib.forecast import METHODS

    assert set(METHODS) <= set(METHOD_COLORS) == set(METHOD_LABELS)
    assert len(set(METHOD_COLORS.values())) == len(METHOD_COLORS)


def test_save_table_writes_no_index_and_four_significant_digits(tmp_path, monkeypatch):
    import pandas as pd

    from lib import plotting
    monkeypatch.setattr(paths, "TABLES", tmp_path)
    out = plotting.save_table(pd.DataFrame({"a": [1.23456]}, index=[7]), "t")
    assert open(out).read() == "a\n1.235\n"


def test_short_gpu_name_drops_the_vendor_prefix_only():
    assert short_gpu_name("NVIDIA A100 80GB PCIe") == "A100 80GB PCIe"
    assert short_gpu_name("Tesla V100-PCIE-32GB") == "V100-PCIE-32GB"
    assert short_gpu_name("AMD Instinct MI300X") == "MI300X" and short_gpu_name("all AMD GPUs") == "all AMD GPUs"
