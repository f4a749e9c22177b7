"""lib.plotting: one colour per GPU and per kernel class across every figure."""
from lib import paths
from lib.calibration import CLASSES
from lib.data import load_kernels
from lib.devices import load_device
from lib.plotting import CLASS_COLORS, DEVICE_COLORS, device_colors


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
