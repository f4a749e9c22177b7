"""Device JSON loading: both vendors' formats, and clear errors for bad files."""
import json

import pytest

from lib import devices, paths
from lib.devices import DeviceError, load_device


def write(tmp_path, raw, name="dev.json"):
    p = tmp_path / name
    p.write_text(json.dumps(raw))
    return p


GOOD = {"Device": "Test GPU", "Dev_Mem": 16, "Mem_Bw": 900, "Num_Sm": 80, "Core_Per_SM": 64,
        "Freq": 1530, "SingleFLOPs": 15670, "L2Cache": 6}


def test_nvidia_format(tmp_path):
    d = load_device(write(tmp_path, GOOD))
    assert (d.name, d.vendor, d.num_sm, d.mem_bw_gbps, d.peak_gflops, d.peak_vec_gflops, d.l2_mb) == \
        ("Test GPU", "nvidia", 80, 900.0, 15670.0, 15670.0, 6.0)


def test_amd_format_has_matrix_and_vector_peaks():
    d = load_device(paths.DEVICE_CONFIGS / "AMD_Instinct_MI250.json")
    assert d.vendor == "amd" and d.peak_gflops == 45300 and d.peak_vec_gflops == 22600


@pytest.mark.parametrize("name, peaks, vendor", [
    ("NVIDIA H200", {"SingleFLOPs": 66908, "SingleFLOPsMM": 494000}, "nvidia"),   # a tensor-core peak beside fp32
    ("NVIDIA X", {"SingleFLOPsMM": 90000, "SingleFLOPsVEC": 60000}, "nvidia"),
    ("Tesla X", {"SingleFLOPsMM": 90000, "SingleFLOPsVEC": 60000}, "nvidia"),
    ("AMD X", {"SingleFLOPs": 50000}, "amd"),
    ("Test GPU", {"SingleFLOPs": 50000, "SingleFLOPsMM": 90000}, "nvidia"),
    ("Test GPU", {"SingleFLOPsMM": 90000, "SingleFLOPsVEC": 60000}, "amd"),
    ("nvidia geforce rtx 4090", {"SingleFLOPsMM": 90000, "SingleFLOPsVEC": 60000}, "nvidia"),   # any case
    ("amd instinct mi300x", {"SingleFLOPs": 50000}, "amd"),
    ("GeForce RTX 4090", {"SingleFLOPsMM": 90000, "SingleFLOPsVEC": 60000}, "nvidia"),
    ("Quadro RTX 8000", {"SingleFLOPsMM": 90000, "SingleFLOPsVEC": 60000}, "nvidia"),
    ("Radeon Pro", {"SingleFLOPs": 50000}, "amd"),
    ("LAMDA accel", {"SingleFLOPsMM": 90000, "SingleFLOPsVEC": 60000}, "amd"),     # no vendor word: the format
    ("LAMDA accel", {"SingleFLOPs": 50000}, "nvidia"),
    ("NVIDIA-AMD bridge", {"SingleFLOPs": 50000}, "nvidia"),                     # both named: the format
    ("AMD_Instinct_MI300X", {"SingleFLOPs": 50000}, "amd"),                      # words between underscores
    ("NVIDIA_RTX_4090", {"SingleFLOPsMM": 90000, "SingleFLOPsVEC": 60000}, "nvidia"),
    ("Tesla_V100-PCIE", {"SingleFLOPsMM": 90000, "SingleFLOPsVEC": 60000}, "nvidia"),
    ("NVIDIAX", {"SingleFLOPsMM": 90000, "SingleFLOPsVEC": 60000}, "amd"),      # not a whole word: the format
])
def test_vendor_from_the_name_else_the_peak_format(tmp_path, name, peaks, vendor):
    raw = {k: v for k, v in GOOD.items() if not k.startswith("SingleFLOPs")}
    assert load_device(write(tmp_path, {**raw, "Device": name, **peaks})).vendor == vendor


def test_every_known_device_keeps_its_vendor():
    for name, d in devices.all_devices().items():
        assert d.vendor == ("amd" if name.startswith("AMD") else "nvidia"), name


@pytest.mark.parametrize("field", ["Mem_Bw", "Num_Sm", "L2Cache", "Device"])
def test_missing_field_names_field_and_file(tmp_path, field):
    raw = {k: v for k, v in GOOD.items() if k != field}
    with pytest.raises(DeviceError, match=rf"dev\.json.*'{field}'"):
        load_device(write(tmp_path, raw))


def test_non_numeric_field(tmp_path):
    with pytest.raises(DeviceError, match=r"dev\.json: field 'Mem_Bw' is not a number"):
        load_device(write(tmp_path, {**GOOD, "Mem_Bw": "fast"}))


def test_numeric_strings_are_accepted(tmp_path):
    assert load_device(write(tmp_path, {**GOOD, "Mem_Bw": "900"})).mem_bw_gbps == 900.0


def test_negative_and_missing_file(tmp_path):
    with pytest.raises(DeviceError, match="positive"):
        load_device(write(tmp_path, {**GOOD, "Num_Sm": -1}))
    with pytest.raises(DeviceError, match="not found"):
        load_device(tmp_path / "nope.json")
    (tmp_path / "bad.json").write_text("{oops")
    with pytest.raises(DeviceError, match="bad.json: not valid JSON"):
        load_device(tmp_path / "bad.json")


def test_every_shipped_device_loads_and_training_gpus_exist():
    found = devices.all_devices()
    assert set(devices.TRAIN_GPUS_NVIDIA) <= found.keys()
    assert "NVIDIA L4" in found
    added = sorted(paths.DEVICES_ADDED.glob("*.json"))
    assert {"NVIDIA_H200.json", "NVIDIA_B200.json"} <= {f.name for f in added}
    for f in added:
        raw = json.loads(f.read_text())
        numbers = [k for k in (*devices.NUMERIC_KEYS, "SingleFLOPs", "SingleFLOPsMM", "SingleFLOPsVEC") if k in raw]
        assert set(numbers) <= set(raw.get("Sources", {})), f"{f.name}: every number needs a source"


@pytest.mark.parametrize("field,value,message", [
    ("Mem_Bw", True, "'Mem_Bw' is not a number: true"),
    ("Num_Sm", 0.5, "'Num_Sm' must be a whole number"),
    ("Core_Per_SM", "64.5", "'Core_Per_SM' must be a whole number"),
    ("Mem_Bw", 9e11, r"'Mem_Bw' = 900000000000\.0 is outside the plausible range 1 to 1e\+06 GB/s \(check its units\)"),
    ("Mem_Bw", 1e-300, "'Mem_Bw' = 1e-300 is outside the plausible range"),
    ("SingleFLOPs", 1e308, r"'SingleFLOPs' .* GFLOP/s"),
])
def test_implausible_values_name_the_field(tmp_path, field, value, message):
    with pytest.raises(DeviceError, match=rf"dev\.json: field {message}"):
        load_device(write(tmp_path, {**GOOD, field: value}))


def test_whole_number_counts_given_as_floats_are_accepted(tmp_path):
    assert load_device(write(tmp_path, {**GOOD, "Num_Sm": 80.0})).num_sm == 80


def test_unreadable_files_are_device_errors(tmp_path):
    (tmp_path / "latin1.json").write_bytes('{"Device": "caf\xe9"}'.encode("latin-1"))
    with pytest.raises(DeviceError, match=r"latin1\.json: not a UTF-8 text file"):
        load_device(tmp_path / "latin1.json")
    with pytest.raises(DeviceError, match="is a folder"):
        load_device(tmp_path)


def test_names_are_trimmed_and_a_blank_name_is_an_error(tmp_path):
    assert load_device(write(tmp_path, {**GOOD, "Device": "  Test GPU "})).name == "Test GPU"
    with pytest.raises(DeviceError, match="Device"):
        load_device(write(tmp_path, {**GOOD, "Device": "   "}))


def test_a_value_at_the_edge_of_its_plausible_range_is_accepted(tmp_path):
    assert load_device(write(tmp_path, {**GOOD, "Mem_Bw": 1})).mem_bw_gbps == 1.0    # the range is 1 to 1e6 GB/s


def test_known_devices_are_single_gpus_and_the_dataset_comes_first(tmp_path, monkeypatch):
    assert any(f.stem.endswith("_TP") for f in paths.DEVICE_CONFIGS.glob("*.json"))
    assert not any(f.stem.endswith("_TP") for f in devices.device_files())   # a _TP file is a tensor-parallel group
    t4 = devices.device_by_name("Tesla T4")
    added = tmp_path / "added"
    added.mkdir()
    write(added, {**GOOD, "Device": "Tesla T4", "Mem_Bw": 2 * t4.mem_bw_gbps}, "Tesla_T4.json")
    monkeypatch.setattr(paths, "DEVICES_ADDED", added)
    assert devices.all_devices()["Tesla T4"].mem_bw_gbps == t4.mem_bw_gbps       # an addition cannot replace it
