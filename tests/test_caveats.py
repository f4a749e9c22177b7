"""Hand-computed cases for lib.caveats: machine balance, the extrapolation and memory warnings."""
import pytest

from lib import caveats as C


def test_machine_balance_and_extrapolation_note():
    from lib import paths
    from lib.devices import device_by_name, load_device
    t4, l4 = device_by_name("Tesla T4"), device_by_name("NVIDIA L4")
    assert C.balance_flop_per_byte(l4) == pytest.approx(31334 / 300)
    # training GPUs span P100/A100-40GB (~12.5-13) .. P4 (~29.7): L4 lies outside, H200 and H100 inside
    note = C.extrapolation_note(l4)
    assert note.startswith("NVIDIA L4's machine balance (104.4 FLOP/byte)") and "(12.5-29.7)" in note
    assert C.extrapolation_note(device_by_name("NVIDIA H200")) is None
    assert C.extrapolation_note(device_by_name("NVIDIA H100 80GB HBM3")) is None
    assert C.extrapolation_note(t4) is None            # a training GPU is never an extrapolation
    # a *_TP.json file of the dataset is a 4-GPU group's summed spec, not one GPU
    group = load_device(paths.DEVICE_CONFIGS / "NVIDIA_H100_80GB_HBM3_TP.json")
    assert "group of GPUs for tensor parallelism" in C.extrapolation_note(group)
    # no AMD predictor exists: every AMD GPU, MI100 (an AMD training GPU) included, gets the vendor's warning
    for name in ("AMD Instinct MI100", "AMD Instinct MI250"):
        assert C.extrapolation_note(device_by_name(name)).startswith(f"{name} is not an NVIDIA GPU")


def test_memory_note_hand_case():
    from lib.devices import device_by_name
    dev = device_by_name("NVIDIA L4")   # 24 GB
    assert C.min_memory_gb(10**9, "training") == 8.0 and C.min_memory_gb(10**9, "inference") == 4.0
    assert C.memory_note(3 * 10**9, "training", dev) is None                 # 24.0 GB: fits exactly
    assert C.memory_note(6 * 10**9, "inference", dev) is None
    assert "fp32 weights alone (7.00 B parameters) need 28.0 GB" in C.memory_note(7 * 10**9, "inference", dev)
