"""lib.cli: the argparse helpers both command-line tools share."""
import argparse
import os

import pytest

from lib import cli


def test_file_path_refuses_a_pipe_and_passes_files_folders_and_missing_paths(tmp_path):
    f = tmp_path / "d.json"
    f.write_text("{}")
    for arg in (str(f), str(tmp_path), str(tmp_path / "missing.json")):   # the loaders name a folder or a missing file
        assert cli.file_path(arg) == arg
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(argparse.ArgumentTypeError, match="is not a regular file"):
        cli.file_path(str(fifo))


def test_file_path_names_a_path_the_file_system_refuses(tmp_path):
    long = str(tmp_path / ("x" * 300 + ".json"))
    with pytest.raises(argparse.ArgumentTypeError, match=r"x\.json: cannot be used as a file path \(File name too long\)"):
        cli.file_path(long)


class _Closed:
    """A standard output whose reader has quit."""
    def write(self, text):
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self):
        pass


def test_a_failed_write_to_standard_output_leaves_no_file_behind(tmp_path, monkeypatch, capsys):
    written = tmp_path / "kernels.csv"
    written.write_text("this run's")
    monkeypatch.setattr("sys.stdout", _Closed())
    try:
        print("x")
    except OSError as e:
        cli.stdout_failed(e, written, None)
    assert not written.exists()
    assert capsys.readouterr().err == "error: cannot write the result to standard output (Broken pipe)\n"


def _known(tmp_path, *stems):
    for stem in stems:
        (tmp_path / f"{stem}.json").write_text("{}")
    return sorted(tmp_path.glob("*.json"))


def test_named_file_takes_a_name_by_its_words(tmp_path):
    files = _known(tmp_path, "NVIDIA_H100_80GB_HBM3", "NVIDIA_A100-PCIE-40GB", "NVIDIA_A100_80GB_PCIe", "Tesla_T4",
                   "NVIDIA_L4", "NVIDIA_L40S", "bert", "bert_large")
    for name, stem in [("H100", "NVIDIA_H100_80GB_HBM3"), ("nvidia h100 80gb hbm3", "NVIDIA_H100_80GB_HBM3"),
                       ("Tesla T4", "Tesla_T4"), ("t4", "Tesla_T4"), ("a100-80GB", "NVIDIA_A100_80GB_PCIe"),
                       ("L4", "NVIDIA_L4"),            # a whole word: not L40S
                       ("A100-80", "NVIDIA_A100_80GB_PCIe"), ("L40", "NVIDIA_L40S"),   # words that begin a file's
                       ("bert", "bert")]:              # the exact words win over the files that include them
        assert cli.named_file(name, files, "GPU") == str(tmp_path / f"{stem}.json"), name


def test_named_file_names_the_candidates_when_a_name_fits_several_or_none(tmp_path):
    files = _known(tmp_path, "NVIDIA_A100-PCIE-40GB", "NVIDIA_A100_80GB_PCIe", "Tesla_T4")
    with pytest.raises(argparse.ArgumentTypeError,
                       match=r"'A100' names 2 known GPUs \(NVIDIA_A100-PCIE-40GB, NVIDIA_A100_80GB_PCIe\)"):
        cli.named_file("A100", files, "GPU")
    with pytest.raises(argparse.ArgumentTypeError, match=r"'a100 p' names 2 known GPUs"):   # 'p' begins both's 'pcie'
        cli.named_file("a100 p", files, "GPU")
    with pytest.raises(argparse.ArgumentTypeError, match=r"'V100' is neither a file nor the name of a known GPU; "
                                                         r"known: NVIDIA_A100-PCIE-40GB, NVIDIA_A100_80GB_PCIe, Tesla_T4$"):
        cli.named_file("V100", files, "GPU")
    with pytest.raises(argparse.ArgumentTypeError, match=r"known: none \(run `make data` first\)"):
        cli.named_file("H100", [], "GPU")


def test_named_file_leaves_paths_to_the_loaders(tmp_path, monkeypatch):
    files = _known(tmp_path, "Tesla_T4")
    monkeypatch.chdir(tmp_path)
    # a file that exists (even one whose name is also a GPU's), a missing .json and a path with a folder pass as given
    (tmp_path / "T4").write_text("{}")
    for arg in ("T4", "missing.json", "sub/T4", str(tmp_path / "Tesla_T4.json")):
        assert cli.named_file(arg, files, "GPU") == arg
    with pytest.raises(argparse.ArgumentTypeError, match="cannot be used as a file path"):
        cli.named_file("x" * 300, files, "GPU")


def test_a_model_folder_stands_for_its_config_json(tmp_path):
    # a Hugging Face download holds config.json beside the weights: its folder is the config's
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "config.json").write_text("{}")
    assert cli.model_arg(str(tmp_path / "hf")) == str(tmp_path / "hf" / "config.json")
    assert cli.model_arg(str(tmp_path)) == str(tmp_path)      # no config.json in it: the loader says so


def test_device_and_model_names_resolve_to_the_repository_files():
    from lib import paths
    assert cli.device_arg("H200") == str(paths.DEVICES_ADDED / "NVIDIA_H200.json")
    assert cli.device_arg("Tesla T4") == str(paths.DEVICE_CONFIGS / "Tesla_T4.json")
    assert cli.device_arg("H100") == str(paths.DEVICE_CONFIGS / "NVIDIA_H100_80GB_HBM3.json")   # not the _TP group
    assert cli.model_arg("gpt3_27") == str(paths.MODEL_CONFIGS / "gpt3_27.json")
    assert cli.model_arg("llama3_8b") == str(paths.MODELS_ADDED / "llama3_8b.json")
