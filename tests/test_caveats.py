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
    # a *_TP.json file of the dataset is a tensor-parallel group's spec, not one GPU (the H100's: twice one GPU's memory,
    # bandwidth and L2, one GPU's SMs and clock)
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


def test_training_memory_note_with_activations_hand_case():
    from lib.devices import device_by_name
    dev = device_by_name("NVIDIA L4")   # 24 GB
    # 1e9 parameters: weights 4 GB; training holds the larger of the gradients (4 GB) and the saved activations
    assert C.min_memory_gb(10**9, "training", 3.0) == 8.0 and C.min_memory_gb(10**9, "training", 20.0) == 24.0
    assert C.min_memory_gb(10**9, "inference", 20.0) == 4.0                 # no backward, nothing saved
    assert C.memory_note(10**9, "training", dev, 20.0) is None               # 24.0 GB: fits exactly
    assert C.memory_note(10**9, "training", dev, 21.0).startswith(
        "the model's fp32 weights (4.0 GB, 1.00 B parameters) and the activations autograd saves for the backward "
        "(21.0 GB) need 25.0 GB, more than NVIDIA L4's 24 GB")
    assert "weights and gradients alone (4.00 B parameters) need 32.0 GB" in C.memory_note(4 * 10**9, "training", dev,
                                                                                           10.0)


def test_training_memory_bound_holds_for_the_runs_that_happened():
    """The bound of every single-GPU training setting the dataset timed lies within each GPU that ran it and below
    our H200's measured peaks; it is no trivial bound: within 15% of the plain step's peak."""
    from lib.labels import load_labels
    from lib.measured import memory_against_dataset, read_peak_memory
    bounds = C.memory_bound_checks(memory_against_dataset(read_peak_memory(), load_labels()))
    assert len(bounds) == 10 and bounds["activation_gb"].notna().all()
    assert (bounds["min_memory_gb"] <= bounds["smallest_dataset_gpu_gb"]).all()
    plain = bounds.dropna(subset=["plain_peak_gb"])
    assert len(plain) == 2
    ratio = plain["min_memory_gb"] / plain["plain_peak_gb"]
    assert ((ratio > 0.85) & (ratio <= 1)).all(), ratio
    timed = bounds[bounds["grad_mode_outcome"] == "timed"]
    assert (timed["min_memory_gb"] <= timed["grad_mode_peak_gb"]).all()


def test_kernel_memory_note_hand_case():
    import pandas as pd

    from lib.devices import device_by_name
    h200 = device_by_name("NVIDIA H200")   # 141 GB
    rows = pd.DataFrame({"op": ["bmm", "bmm", "softmax", "softmax", "mem"],
                         "B": [1, 1, 1e6, 2e6, None], "M": [64, 2e5, None, None, None], "N": [64, 1, None, None, None],
                         "K": [64, 2e5, None, None, None], "H": [None, None, 1e4, 1e4, None],
                         "bytes": [None, None, None, None, 1.5e11]})
    # bmm 2e5 x 1 x 2e5: 4 * (2e5 + 2e5 + 4e10) B = 160.0016 GB; softmax 1e6 x 1e4: read + write 4 B each = 80 GB
    # (fits), 2e6 x 1e4: 160 GB; mem: its own 150 GB
    note = C.kernel_memory_note(rows, h200)
    assert note.startswith("3 of 5 rows (the first: row 1, 160 GB) have tensors that alone need more than "
                           "NVIDIA H200's 141 GB of memory"), note
    # in fp16 the GEMM's tensors take half: 80.0008 GB fits
    assert C.kernel_memory_note(rows.iloc[:2], h200, bytes_per_element=2) is None
    assert C.kernel_memory_note(rows.iloc[[0, 2]], h200) is None


def _spec(name="NVIDIA H200", **changes):
    """H200's spec sheet (data/devices/) with some fields changed, as a Device."""
    import json

    from lib import paths
    from lib.devices import parse_device
    raw = json.loads((paths.DEVICES_ADDED / "NVIDIA_H200.json").read_text()) | {"Device": name} | changes
    return parse_device(raw, "what-if.json")


def test_spec_notes_say_nothing_of_the_known_nvidia_files():
    from lib.devices import all_devices
    for dev in all_devices().values():   # AMD files get extrapolation_note's vendor warning instead
        assert C.spec_notes(dev) == [], dev.path
    assert C.spec_notes(_spec()) == []   # the same spec in another file


def test_spec_notes_hand_cases():
    from lib.devices import device_by_name
    t4 = device_by_name("Tesla T4")
    raw = {"Dev_Mem": t4.mem_gb, "Mem_Bw": 4 * t4.mem_bw_gbps, "Num_Sm": t4.num_sm, "Core_Per_SM": t4.cores_per_sm,
           "Freq": t4.freq_mhz, "L2Cache": t4.l2_mb, "SingleFLOPs": t4.peak_gflops}
    # a training GPU's exact name with another spec: the per-GPU model is used, and the note names the fields
    [note] = C.spec_notes(_spec("Tesla T4", **raw))
    assert note.startswith("Tesla T4 is a training GPU's name") and "another spec (Mem_Bw) than" in note
    # the same name in other case: forecast as a GPU never trained on
    [note] = C.spec_notes(_spec("tesla_t4", **raw | {"Mem_Bw": t4.mem_bw_gbps}))
    assert note.startswith("tesla_t4 is spelled unlike the training GPU 'Tesla T4'")
    [note] = C.spec_notes(_spec("Intel Data Center GPU Max 1550"))
    assert note.startswith("'Intel Data Center GPU Max 1550' names no vendor, so it is read as an NVIDIA GPU")
    # 51,200 KB of L2 given as MB: more than 10 x the largest known L2 (B200's 126 MB)
    [note] = C.spec_notes(_spec(L2Cache=51200))
    assert note == ("what-if.json: 'L2Cache' = 51200 (known: 2 to 126) lies more than 10 times outside every known "
                    "NVIDIA GPU's range; check the units (README, 'Forecast a model on a GPU')")
    # H200: 2 x 132 SMs x 128 cores x 1,980 MHz = 66,908.16 GFLOP/s; a base clock of 1,230 MHz gives 1.61 times that
    [note] = C.spec_notes(_spec(Freq=1230))
    assert note.startswith("what-if.json: 'SingleFLOPs' (66908 GFLOP/s) is 1.61 times 2 x Num_Sm x Core_Per_SM x Freq "
                           "(41564.2 GFLOP/s)")
    assert C.spec_notes(_spec(Freq=1500)) == []   # 1.32 times: within FMA_PEAK_TOLERANCE


def test_spec_notes_and_balance_below_the_known_range():
    # TB/s given for GB/s: 4.8 lies more than 10 times below the least known bandwidth (P4's 192)
    [note] = C.spec_notes(_spec(Mem_Bw=4.8))
    assert note.startswith("what-if.json: 'Mem_Bw' = 4.8 (known: 192 to 8000) lies more than 10 times outside")
    # TFLOP/s given for GFLOP/s: both the range note and the FMA note (0.001 times 2 x SMs x cores x clock)
    units, fma = C.spec_notes(_spec(SingleFLOPs=66.9))
    assert "'SingleFLOPs' = 66.9" in units and fma.startswith("what-if.json: 'SingleFLOPs' (66.9 GFLOP/s) is 0.001 times")
    # a balance below every training GPU's (66,908 GFLOP/s over 8,000 GB/s = 8.4 < 12.5) is an extrapolation too
    assert C.extrapolation_note(_spec(Mem_Bw=8000)).startswith("NVIDIA H200's machine balance (8.4 FLOP/byte) lies "
                                                               "outside the training GPUs' (12.5-29.7)")


def test_head_note_names_the_class_built_where_the_config_names_another(tmp_path):
    # BERT configs name BertLMHeadModel, but the forecast builds what the dataset's BERT-Large labels ran: a
    # classification head for inference, BertForPreTraining for training; GPT-2's named class is the one built
    import json
    from lib import paths
    bert = paths.MODEL_CONFIGS / "bert_large.json"
    assert C.head_note(bert, "inference") == (
        "bert_large.json names BertLMHeadModel in 'architectures'; the inference forecast builds "
        "BertForSequenceClassification, the class it takes for model_type 'bert' (for the paper's models, what the "
        "labels ran), so its head may differ from the named one")
    assert "the training forecast builds BertForPreTraining" in C.head_note(bert, "training")
    assert C.head_note(paths.MODEL_CONFIGS / "gpt2_large.json", "training") is None
    # a config naming the class built, or naming none, gets no note
    raw = json.loads(bert.read_text())
    for named in (["BertForPreTraining"], [], None):
        cfg = tmp_path / "bert.json"
        cfg.write_text(json.dumps({**raw, "architectures": named}))
        assert C.head_note(cfg, "training") is None
