"""Tests of lib.graph and lib.model_config: FLOPs vs torch's FlopCounterMode, layer multiplication, hand-computed shapes,
configs refused by field."""
import json
from unittest import mock

import pandas as pd
import pytest

from lib import graph, model_config, paths

TINY_GPT2 = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "activation_function": "gelu_new",
             "n_embd": 64, "n_head": 4, "n_layer": 2, "n_positions": 128, "vocab_size": 1000}
TINY_SWITCH = {"architectures": ["SwitchTransformersForConditionalGeneration"],
               "model_type": "switch_transformers", "d_model": 32, "d_ff": 64, "d_kv": 8, "num_heads": 4,
               "num_layers": 6, "num_decoder_layers": 6, "num_sparse_encoder_layers": 3,
               "num_sparse_decoder_layers": 3, "num_experts": 4, "expert_capacity": 8, "vocab_size": 100,
               "feed_forward_proj": "relu", "dense_act_fn": "relu"}
# Llama family (beyond the labels): grouped-query attention (4 query heads, 2 key/value heads), SwiGLU MLP
TINY_LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
              "intermediate_size": 160, "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 5,
              "max_position_embeddings": 128, "vocab_size": 1000, "hidden_act": "silu", "tie_word_embeddings": False}
LLAMA_FAMILY = {"llama": TINY_LLAMA,
                "mistral": dict(TINY_LLAMA, model_type="mistral", architectures=["MistralForCausalLM"], sliding_window=8),
                "qwen2": dict(TINY_LLAMA, model_type="qwen2", architectures=["Qwen2ForCausalLM"]),
                "gemma": dict(TINY_LLAMA, model_type="gemma", architectures=["GemmaForCausalLM"], head_dim=16,
                              hidden_act="gelu_pytorch_tanh"),
                "phi3": dict(TINY_LLAMA, model_type="phi3", architectures=["Phi3ForCausalLM"], pad_token_id=0)}
# Mixtral: Mistral's blocks with 4 SwiGLU experts, 2 per token
TINY_MIXTRAL = dict(TINY_LLAMA, model_type="mixtral", architectures=["MixtralForCausalLM"], num_local_experts=4,
                    num_experts_per_tok=2)
# GPT-NeoX (Pythia): layernorm, a quarter of each head rotary, fused q/k/v, attention and MLP side by side
TINY_NEOX = {"architectures": ["GPTNeoXForCausalLM"], "model_type": "gpt_neox", "hidden_size": 64,
             "intermediate_size": 256, "num_attention_heads": 4, "num_hidden_layers": 5, "max_position_embeddings": 128,
             "vocab_size": 1000, "rotary_pct": 0.25, "use_parallel_residual": True, "hidden_act": "gelu"}
KEY = ["aten", "phase", "op", "B", "M", "N", "K", "H", "bytes", "layer"]


def _write(tmp_path, cfg, name="m"):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(cfg))
    return path


def _totals(df):
    """Kernel multiset: count per (aten, phase, shape...) key, NaN-safe."""
    return df.fillna(-1).groupby(KEY)["count"].sum().sort_index()


@pytest.mark.parametrize("tiny", [TINY_GPT2, TINY_LLAMA], ids=["gpt2", "llama"])
def test_inference_flops_match_flop_counter(tmp_path, tiny):
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from lib.graph_capture import Recorder, build_model
    path = _write(tmp_path, tiny)
    batch, seq = 3, 16
    df = graph.capture(path, batch, seq, "inference", use_cache=False)
    cfg = model_config.load_config(path)
    model = build_model(cfg, "inference", cfg.num_layers, batch)
    ids = torch.zeros(batch, seq, dtype=torch.long, device="meta")
    # Recorder underneath only answers .item() on meta (as in capture); the counter sees every op
    with torch.no_grad(), Recorder(), FlopCounterMode(display=False) as counter:
        model(input_ids=ids)
    assert graph.summary(df)["gemm_flops"] == counter.get_total_flops()


def test_training_flops_are_three_forwards(tmp_path):
    # backward of every GEMM is two GEMMs of the same size (input and weight gradients)
    path = _write(tmp_path, TINY_GPT2)
    df = graph.capture(path, 2, 32, "training", use_cache=False)
    gemm = df[df.op.isin(["bmm", "linear"])]
    flops = (2 * gemm.B * gemm.M * gemm.N * gemm.K * gemm["count"]).groupby(gemm.phase).sum()
    assert flops["bw"] == 2 * flops["fw"]


@pytest.mark.parametrize("mode", ["inference", "training"])
def test_layer_multiplication_equals_full_depth(tmp_path, mode):
    path = _write(tmp_path, dict(TINY_GPT2, n_layer=5))
    reduced = graph.capture(path, 2, 16, mode, use_cache=False)
    full = graph.capture(path, 2, 16, mode, depths=(5,), use_cache=False)
    assert len(reduced) < len(full)
    pd.testing.assert_series_equal(_totals(reduced), _totals(full))


def test_other_depths_build_exactly_that_model(tmp_path):
    # depths other than the reduced 3 periods: a model of that depth, nothing multiplied (a 5-block config
    # built with 2 blocks runs the kernels of the 2-block config; its middle block was counted 4 times before)
    two = graph.capture(_write(tmp_path, dict(TINY_GPT2, n_layer=2), "two"), 2, 16, "training", use_cache=False)
    five = _write(tmp_path, dict(TINY_GPT2, n_layer=5), "five")
    built = graph.capture(five, 2, 16, "training", depths=(2,), use_cache=False)
    assert built["count"].sum() == two["count"].sum()
    pd.testing.assert_series_equal(_totals(built), _totals(two))


@pytest.mark.parametrize("mode", ["inference", "training"])
def test_switch_layer_multiplication_equals_full_depth(tmp_path, mode):
    # Switch: period of 2 blocks (dense, sparse), first block special (relative position bias). 8 blocks per
    # stack are 4 periods, one more than the 3 that a reduced capture builds, so the middle one is multiplied
    path = _write(tmp_path, dict(TINY_SWITCH, num_layers=8, num_decoder_layers=8, num_sparse_encoder_layers=4,
                                 num_sparse_decoder_layers=4))
    reduced = graph.capture(path, 1, 16, mode, use_cache=False)
    full = graph.capture(path, 1, 16, mode, depths=(8, 8), use_cache=False)
    assert len(reduced) < len(full)
    assert reduced["count"].sum() == full["count"].sum()
    pd.testing.assert_series_equal(_totals(reduced), _totals(full))


@pytest.mark.parametrize("layers,sparse,period", [(12, 4, 3), (16, 4, 4), (7, 9, 1)],
                         ids=["step3", "step4", "none-sparse"])
def test_switch_sparse_step_sets_the_period(tmp_path, layers, sparse, period):
    # Hugging Face: step = layers // sparse (0: no sparse block), block i sparse iff i % step == 1. A period is one
    # step, so a 12-block stack with 4 sparse blocks is captured as 9 blocks (3 periods of 3) and counted to 12
    path = _write(tmp_path, dict(TINY_SWITCH, num_layers=layers, num_decoder_layers=layers,
                                 num_sparse_encoder_layers=sparse, num_sparse_decoder_layers=sparse))
    cfg = model_config.load_config(path)
    assert cfg.periods == (period, period)
    reduced = graph.capture(path, 1, 8, "inference", use_cache=False)
    full = graph.capture(path, 1, 8, "inference", depths=(layers, layers), use_cache=False)
    assert len(reduced) < len(full)
    pd.testing.assert_series_equal(_totals(reduced), _totals(full))
    router = full[(full.op == "linear") & (full.K == TINY_SWITCH["num_experts"])]   # one router GEMM per sparse block
    assert router["count"].sum() == 2 * (sparse if sparse <= layers else 0)


@pytest.mark.parametrize("value", [-1, 1.5, "3", True])
def test_switch_bad_sparse_count_names_the_field(tmp_path, value):
    path = _write(tmp_path, dict(TINY_SWITCH, num_sparse_decoder_layers=value))
    with pytest.raises(model_config.GraphError, match="num_sparse_decoder_layers"):
        model_config.load_config(path)


@pytest.mark.parametrize("mode", ["inference", "training"])
@pytest.mark.parametrize("arch", [*sorted(LLAMA_FAMILY), "gpt_neox", "mixtral"])
def test_decoders_beyond_the_labels_layer_multiplication_equals_full_depth(tmp_path, arch, mode):
    path = _write(tmp_path, {**LLAMA_FAMILY, "gpt_neox": TINY_NEOX, "mixtral": TINY_MIXTRAL}[arch])
    reduced = graph.capture(path, 2, 16, mode, use_cache=False)
    full = graph.capture(path, 2, 16, mode, depths=(5,), use_cache=False)
    assert len(reduced) < len(full)
    pd.testing.assert_series_equal(_totals(reduced), _totals(full))


def test_llama_kernels_by_hand(tmp_path):
    # hidden 64, 4 heads of 16, 2 key/value heads (k/v projections 64 -> 32), MLP 64 -> 160 (gate, up) -> 64
    df = graph.capture(_write(tmp_path, TINY_LLAMA), 2, 12, "training", use_cache=False)
    fw, tokens = df[df.phase == "fw"], 2 * 12
    lin = fw[(fw.op == "linear") & (fw.layer == "layer")].groupby(["M", "N", "K"])["count"].sum().to_dict()
    assert lin == {(tokens, 64, 64): 2 * 5, (tokens, 64, 32): 2 * 5, (tokens, 64, 160): 2 * 5, (tokens, 160, 64): 5}
    # attention over all 4 query heads (keys/values repeated to 4 heads: grouped-query attention):
    # scores [8, 12, 16] @ [8, 16, 12], context [8, 12, 12] @ [8, 12, 16]
    bmm = fw[fw.op == "bmm"].groupby(["B", "M", "N", "K"])["count"].sum().to_dict()
    assert bmm == {(2 * 4, 12, 16, 12): 5, (2 * 4, 12, 12, 16): 5}
    # RMSNorm is no layernorm kernel: a mean (memory-bound) and element-wise kernels, twice per block + final
    assert not (df.op == "ln").any()
    assert fw[fw.aten == "aten.mean.dim"]["count"].sum() == 2 * 5 + 1
    # SiLU's backward is an element-wise kernel over the 160-wide gate, as GELU's is
    silu_bw = df[df.aten == "aten.silu_backward.default"]
    assert silu_bw["count"].sum() == 5 and set(silu_bw.op) == {"mul"} and set(silu_bw.H) == {160}


def test_phi3_and_neox_fused_projections_by_hand(tmp_path):
    # Phi-3: q, k, v in one GEMM (64 -> 64 + 2 x 32), gate and up in one (64 -> 2 x 160), then o (64) and down (160)
    df = graph.capture(_write(tmp_path, LLAMA_FAMILY["phi3"]), 2, 12, "training", use_cache=False)
    fw, tokens = df[df.phase == "fw"], 2 * 12
    lin = fw[(fw.op == "linear") & (fw.layer == "layer")].groupby(["M", "N", "K"])["count"].sum().to_dict()
    assert lin == {(tokens, 64, 128): 5, (tokens, 64, 64): 5, (tokens, 64, 320): 5, (tokens, 160, 64): 5}
    # GPT-NeoX: q, k, v in one GEMM (64 -> 192), the attention's dense (64), the MLP's 64 -> 256 -> 64; two
    # layernorms per block (attention's and MLP's, side by side) and the final one
    df = graph.capture(_write(tmp_path, TINY_NEOX), 2, 12, "training", use_cache=False)
    fw = df[df.phase == "fw"]
    lin = fw[(fw.op == "linear") & (fw.layer == "layer")].groupby(["M", "N", "K"])["count"].sum().to_dict()
    assert lin == {(tokens, 64, 192): 5, (tokens, 64, 64): 5, (tokens, 64, 256): 5, (tokens, 256, 64): 5}
    assert fw[fw.op == "ln"]["count"].sum() == 2 * 5 + 1
    # rotary positions on a quarter of each 16-wide head: q and k each times cos and sin over 4 of its elements
    assert fw[(fw.op == "mul") & (fw.H == 4)]["count"].sum() == 4 * 5
    bmm = fw[fw.op == "bmm"].groupby(["B", "M", "N", "K"])["count"].sum().to_dict()
    assert bmm == {(2 * 4, 12, 16, 12): 5, (2 * 4, 12, 12, 16): 5}


def test_mixtral_experts_by_hand(tmp_path):
    # 24 tokens, 2 experts each, routed evenly over 4 experts: 12 tokens per expert, each through its gate/up GEMM
    # (64 -> 2 x 160) and its down GEMM (160 -> 64); the router is one GEMM of all tokens onto the 4 experts
    df = graph.capture(_write(tmp_path, TINY_MIXTRAL), 2, 12, "training", use_cache=False)
    fw, tokens = df[df.phase == "fw"], 2 * 12
    lin = fw[(fw.op == "linear") & (fw.layer == "layer")].groupby(["M", "N", "K"])["count"].sum().to_dict()
    assert lin == {(tokens, 64, 64): 2 * 5, (tokens, 64, 32): 2 * 5, (tokens, 64, 4): 5,
                   (12, 64, 320): 4 * 5, (12, 160, 64): 4 * 5}
    # each expert's weights are a slice of one 3D parameter: autograd writes the whole [4, ...] gradient for each
    # expert (select_backward) and sums the four, as upstream's eager experts train
    select = df[df.aten == "aten.select_backward.default"]
    whole = select[select.shapes.str.endswith(("->[(4, 320, 64)]", "->[(4, 64, 160)]"))]
    assert whole["count"].sum() == 2 * 4 * 5


# Published sizes of the configs in data/models/ (model cards and papers): Llama 3 8B, Mistral 7B, Qwen2 7B,
# Pythia 1.4B and Mixtral 8x7B give every parameter; the Gemma report gives Gemma 2B's non-embedding parameters (its embedding
# count pads the vocabulary to 256,128), the Phi-3 report 3.8 B for Phi-3 mini.
PUBLISHED_SIZES = {"llama3_8b": 8_030_261_248, "mistral_7b": 7_241_732_096, "qwen2_7b": 7_615_616_512,
                   "pythia_1b4": 1_414_647_808, "mixtral_8x7b": 46_702_792_704}


def test_added_model_configs_have_their_published_sizes():
    from lib import paths
    assert {f.stem for f in paths.MODELS_ADDED.glob("*.json")} == {*PUBLISHED_SIZES, "gemma_2b", "phi3_mini"}
    for name, size in PUBLISHED_SIZES.items():
        assert graph.parameter_count(paths.MODELS_ADDED / f"{name}.json") == size, name
    gemma = paths.MODELS_ADDED / "gemma_2b.json"
    assert graph.parameter_count(gemma) - 256_000 * 2048 == 1_981_884_416        # tied head: one embedding
    assert graph.parameter_count(paths.MODELS_ADDED / "phi3_mini.json") == pytest.approx(3.8e9, rel=0.01)


def test_parameter_count_by_hand(tmp_path):
    h, i, kv, v, n = 64, 160, 32, 1000, 5
    block = 2 * h * h + 2 * h * kv + 3 * h * i + 2 * h      # q, o; k, v; gate, up, down; two RMSNorm weights
    assert graph.parameter_count(_write(tmp_path, TINY_LLAMA)) == v * h + n * block + h + h * v


def test_bert_large_inference_gemms():
    df = graph.capture(paths.MODEL_CONFIGS / "bert_large.json", 8, 512, "inference", use_cache=False)
    lin = df[(df.op == "linear") & (df.B == 1) & (df.M == 8 * 512) & (df.N == 1024) & (df.K == 1024)]
    # Q, K, V and attention-output projections, 24 layers
    assert lin["count"].sum() == 4 * 24
    scores = df[(df.op == "bmm") & (df.B == 8 * 16) & (df.M == 512) & (df.N == 64) & (df.K == 512)]
    context = df[(df.op == "bmm") & (df.B == 8 * 16) & (df.M == 512) & (df.N == 512) & (df.K == 64)]
    assert scores["count"].sum() == 24 and context["count"].sum() == 24
    assert set(df.layer) == {"prologue", "layer", "epilogue"}
    assert not df.aten.str.contains(r"\.(?:view|permute|transpose|t)\.").any()
    # sequence-classification head as in the label: pooler 1024->1024, classifier 1024->2
    assert ((df.op == "linear") & (df.M == 8) & (df.K == 2)).any()


# Element-wise kernels named as in the label CSVs: fx function (truediv, max ...) or the activation
# (a module node in OPT, a function node in BERT); our rows by aten base name.
_EW_TOKEN = {"div": "truediv", "maximum": "max", "gelu": "act", "relu": "act"}


def _label_layer_tokens(csv) -> list:
    """Forward kernels of the label CSV's layer: op class, element-wise ones by function."""
    from lib.calibration import fx_function, label_nodes
    n = label_nodes(csv)
    n = n[(n.part == "layer") & ~n.cls.isin(["NONE", "MEM"])]
    return [c if c != "EW" else "act" if op == "call_module" else _EW_TOKEN.get(fx_function(t), fx_function(t))
            for c, op, t in zip(n.cls, n.op, n.target)]


@pytest.mark.parametrize("model", ["bert_large", "gpt2_large", "gpt3_xl", "opt_13"])
@pytest.mark.parametrize("mode", ["inference", "training"])
def test_layer_kernels_match_label_csv(model, mode):
    # One captured block runs the kernels the labels measured, in order: BERT's mask add, GPT-2's
    # truediv + where, OPT's clamp (transformers 4.x attention; lib.graph_capture.MEASURED_ATTENTION).
    from lib.calibration import kernel_class
    from lib.labels import load_labels
    labels = load_labels()
    csvs = labels[(labels.model == model) & (labels["mode"] == mode) & (labels.csv != "")].csv
    expected = _label_layer_tokens(csvs.iloc[0])
    df = graph.capture(paths.MODEL_CONFIGS / f"{model}.json", 1, 128, mode, depths=(1,), use_cache=False)
    df = df[(df.layer == "layer") & (df.phase == "fw")]
    base = df.aten.str.split(".").str[1].str.rstrip("_")
    ours = [c if c != "EW" else _EW_TOKEN.get(b, b) for c, b in zip(kernel_class(df.op), base) if c != "MEM"]
    assert ours == expected


@pytest.mark.parametrize("mode", ["inference", "training"])
def test_switch_attention_adds_one_bias(tmp_path, mode):
    # No label CSV for Switch: the 4.x source (T5-style) adds the position bias, the mask folded in once, to the
    # scores in one kernel and does not scale them; transformers 5 multiplies by 1.0 and adds bias and mask apart.
    # The self-attention's bias is a permuted view, read out of order (lib.graph_ops.STRIDED_READ); the
    # cross-attention's, zeros, is contiguous
    from lib.graph_ops import STRIDED_READ
    df = graph.capture(_write(tmp_path, TINY_SWITCH), 2, 16, mode, use_cache=False)
    fw = df[(df.layer == "layer") & (df.phase == "fw")].reset_index(drop=True)
    scores = fw.index[(fw.op == "bmm") & (fw.M == 16) & (fw.K == 16)]          # [B*h, s, d] @ [B*h, d, s]
    assert len(scores) > 0
    adds = []
    for i in scores:
        between = fw.loc[i + 1:].aten.tolist()
        between = between[:between.index("aten._softmax.default")]
        assert between in (["aten.add_.Tensor"], ["aten.add_.Tensor" + STRIDED_READ]), between
        adds += between
    assert {"aten.add_.Tensor", "aten.add_.Tensor" + STRIDED_READ} <= set(adds)


def test_errors(tmp_path):
    with pytest.raises(model_config.GraphError, match=r"unknown architecture.*MambaForCausalLM"):
        model_config.load_config(_write(tmp_path, {"architectures": ["MambaForCausalLM"], "model_type": "mamba"}))
    with pytest.raises(model_config.GraphError, match="num_hidden_layers"):
        model_config.load_config(_write(tmp_path, {k: v for k, v in TINY_LLAMA.items() if k != "num_hidden_layers"}))
    with pytest.raises(model_config.GraphError, match=r"512.*max_position_embeddings"):
        graph.capture(paths.MODEL_CONFIGS / "bert_large.json", 1, 1024, "inference")
    with pytest.raises(model_config.GraphError, match="not found"):
        model_config.load_config(tmp_path / "missing.json")
    with pytest.raises(model_config.GraphError, match="a folder without a config.json, not a model config"):
        model_config.load_config(tmp_path)
    with pytest.raises(model_config.GraphError, match="n_layer"):
        model_config.load_config(_write(tmp_path, dict(TINY_GPT2, n_layer=0)))
    with pytest.raises(model_config.GraphError, match="'n_layer' must be a positive integer"):
        model_config.load_config(_write(tmp_path, dict(TINY_GPT2, n_layer=True)))
    # a size Hugging Face would fill with its own default must be given
    with pytest.raises(model_config.GraphError, match=r"m\.json: field 'n_embd' is missing \(a positive integer"):
        model_config.load_config(_write(tmp_path, {k: v for k, v in TINY_GPT2.items() if k != "n_embd"}))
    with pytest.raises(model_config.GraphError, match="'n_positions' is missing"):
        model_config.load_config(_write(tmp_path, {k: v for k, v in TINY_GPT2.items() if k != "n_positions"}))
    with pytest.raises(model_config.GraphError, match=r"'n_embd' must be a positive integer \(got None\)"):
        model_config.load_config(_write(tmp_path, dict(TINY_GPT2, n_embd=None)))    # null in the JSON
    with pytest.raises(model_config.GraphError, match="'hidden_size' must be a positive integer"):
        model_config.load_config(_write(tmp_path, dict(TINY_LLAMA, hidden_size=-64)))
    # a value only transformers can judge: one line naming the file, not a traceback from inside
    with pytest.raises(model_config.GraphError, match=r"bad\.json: Hugging Face does not know the value 'foo' of field "
                                               r"'activation_function'; check its spelling"):
        graph.capture(_write(tmp_path, dict(TINY_GPT2, activation_function="foo"), "bad"), 1, 8, "inference",
                      use_cache=False)
    # a nested field (a RoPE type) is named by its dotted path
    rope = dict(TINY_LLAMA, rope_scaling={"rope_type": "wobbly", "factor": 2.0})
    with pytest.raises(model_config.GraphError, match=r"value 'wobbly' of field 'rope_scaling\.rope_type'"):
        graph.capture(_write(tmp_path, rope, "rope"), 1, 8, "inference", use_cache=False)
    # any other rejection keeps transformers' own words, after the file's name
    with pytest.raises(model_config.GraphError, match=r"bad\.json: cannot build the model.*KeyError: 'missing_table_entry'"):
        with mock.patch("lib.graph_capture.record", side_effect=KeyError("missing_table_entry")):
            graph.capture(_write(tmp_path, TINY_GPT2, "bad"), 1, 8, "inference", use_cache=False)
    with pytest.raises(model_config.GraphError, match=r"mode must be one of .*\(got 'serving'\)"):
        graph.capture(_write(tmp_path, TINY_GPT2), 1, 8, "serving")


def test_optional_sizes_must_be_positive_where_given(tmp_path):
    # a 0 would build an empty embedding or head that the forecast prices without a word (BERT's token types)
    bert = json.loads((paths.MODEL_CONFIGS / "bert_large.json").read_text())
    opt = json.loads((paths.MODEL_CONFIGS / "opt_13.json").read_text())
    for base, field, value in ((bert, "type_vocab_size", 0), (bert, "num_labels", 0), (opt, "word_embed_proj_dim", 0),
                               (TINY_LLAMA, "head_dim", 0), (TINY_GPT2, "n_inner", 2.5)):
        with pytest.raises(model_config.GraphError, match=rf"m\.json: field '{field}' must be a positive integer where given "
                                                   rf"\(got {value}\)"):
            model_config.load_config(_write(tmp_path, dict(base, **{field: value})))
    with pytest.raises(model_config.GraphError, match=r"field 'id2label' must be an object naming at least one label"):
        model_config.load_config(_write(tmp_path, dict(bert, id2label={})))
    # null, or not given: Hugging Face's default, as the dataset's configs use it
    for base, field in ((TINY_LLAMA, "head_dim"), (TINY_GPT2, "n_inner"), (bert, "num_labels")):
        model_config.load_config(_write(tmp_path, dict(base, **{field: None})))
    model_config.load_config(_write(tmp_path, dict(bert, id2label={"0": "LABEL_0"})))
    model_config.load_config(_write(tmp_path, dict(TINY_GPT2, id2label={})))   # an LM head counts no labels


def test_aliases_are_hugging_faces():
    from transformers import CONFIG_MAPPING
    for model_type in model_config.ARCHS:
        assert model_config.ALIASES.get(model_type, {}) == CONFIG_MAPPING[model_type].attribute_map, model_type


@pytest.mark.parametrize("base, alias, field", [(TINY_GPT2, "num_hidden_layers", "n_layer"),
                                                (TINY_GPT2, "hidden_size", "n_embd"),
                                                (TINY_SWITCH, "num_hidden_layers", "num_layers"),
                                                (TINY_MIXTRAL, "num_experts", "num_local_experts")])
def test_an_alias_builds_the_same_model_and_a_conflicting_one_is_an_error(tmp_path, base, alias, field):
    # Hugging Face builds with the alias's value when a config gives both: a reduced-depth capture that set only
    # n_layer used to build every block of a config that also said num_hidden_layers (GPT-2 +63% at 12 layers)
    plain = graph.capture(_write(tmp_path, base, "plain"), 1, 8, "training", use_cache=False)
    both = graph.capture(_write(tmp_path, dict(base, **{alias: base[field]}), "both"), 1, 8, "training",
                         use_cache=False)
    pd.testing.assert_series_equal(_totals(both), _totals(plain))
    with pytest.raises(model_config.GraphError, match=rf"fields '{alias}' \({2 * base[field]}\) and '{field}' "
                                               rf"\({base[field]}\) disagree"):
        model_config.load_config(_write(tmp_path, dict(base, **{alias: 2 * base[field]})))


def test_switch_sparse_step_must_agree_with_the_sparse_count(tmp_path):
    # 6 blocks, 3 sparse: step 2, which Hugging Face's saved configs also write out (and then read instead)
    assert model_config.load_config(_write(tmp_path, dict(TINY_SWITCH, encoder_sparse_step=2))).periods == (2, 2)
    with pytest.raises(model_config.GraphError, match=r"'decoder_sparse_step' \(3\) disagrees with "
                                               r"'num_sparse_decoder_layers' \(3\): 6 blocks with 3 sparse ones "
                                               r"make a step of 2"):
        model_config.load_config(_write(tmp_path, dict(TINY_SWITCH, decoder_sparse_step=3)))


def test_switch_sparse_counts_are_integers_and_depths_reduce_to_whole_periods(tmp_path):
    for bad in (False, 0.0, -1):                             # a bool or a float is no count, even one equal to 0
        with pytest.raises(model_config.GraphError, match="'num_sparse_encoder_layers' must be a non-negative integer"):
            model_config.load_config(_write(tmp_path, dict(TINY_SWITCH, num_sparse_encoder_layers=bad)))
    # 10 blocks of period 3 are no whole number of periods: built at full depth; 12 are: built as 3 periods (9)
    from dataclasses import replace
    cfg = model_config.load_config(_write(tmp_path, TINY_SWITCH))
    assert graph._reduced_depths(replace(cfg, num_layers=(10, 12), periods=(3, 3))) == (10, 9)


def test_heads_must_split_the_width(tmp_path):
    with pytest.raises(model_config.GraphError, match=r"'n_embd' \(64\) must be a multiple of 'n_head' \(3\)"):
        model_config.load_config(_write(tmp_path, dict(TINY_GPT2, n_head=3)))
    for family, cfg in LLAMA_FAMILY.items():                 # each of the grouped-query families
        with pytest.raises(model_config.GraphError, match=r"'num_attention_heads' \(4\) must be a multiple of "
                                                   r"'num_key_value_heads' \(3\)"):
            model_config.load_config(_write(tmp_path, dict(cfg, num_key_value_heads=3), family))
    with pytest.raises(model_config.GraphError, match="'num_key_value_heads' must be a positive integer or null"):
        model_config.load_config(_write(tmp_path, dict(TINY_LLAMA, num_key_value_heads=0)))
    # a Llama config may give head_dim, and then the heads need not split the width
    model_config.load_config(_write(tmp_path, dict(TINY_LLAMA, num_attention_heads=6, num_key_value_heads=2, head_dim=16)))
    model_config.load_config(_write(tmp_path, dict(TINY_LLAMA, num_key_value_heads=None)))


def test_label_layer_nodes_reads_label_csv(tmp_path):
    csv = tmp_path / "lab.csv"
    csv.write_text("op,target,input_shapes,output_shape,fw_latency,bw_latency,Name,extra\n"
                   "call_module,h.0.mlp,\"[[4, 8]]\",\"(4, 8)\",0.5,1.0,mlp,x\n")
    df = graph.label_layer_nodes(csv)
    assert list(df.columns) == ["Name", "op", "target", "input_shapes", "output_shape",
                                "fw_latency_ms", "bw_latency_ms"]
    assert df.fw_latency_ms.iloc[0] == 0.5


def test_fields_with_value_finds_nested_string_fields():
    raw = {"hidden_act": "silu", "rope_scaling": {"rope_type": "silu", "factor": 2.0}, "n": 3, "tag": ["silu"]}
    assert graph.fields_with_value(raw, "silu") == ["hidden_act", "rope_scaling.rope_type"]
    assert graph.fields_with_value(raw, "gelu") == []
    assert graph.fields_with_value(raw, 3) == []     # only strings: a size shared by many fields names none


def test_building_leaves_the_config_unchanged(tmp_path):
    # Hugging Face copies an old-style RoPE 'type' to 'rope_type' inside the dict it is given
    cfg = model_config.load_config(_write(tmp_path, dict(TINY_LLAMA, rope_scaling={"type": "linear", "factor": 2.0})))
    before = json.dumps(cfg.raw, sort_keys=True)
    from lib.graph_capture import build_model
    build_model(cfg, "inference", cfg.num_layers, batch=1)
    assert json.dumps(cfg.raw, sort_keys=True) == before


def test_capture_regions_follow_the_blocks_forward_and_backward(tmp_path):
    # forward: prologue, block 0, block 1, epilogue; backward runs it in reverse, so the head's gradients come first
    # (epilogue) and the embeddings' last (prologue); each block runs the same kernels in either direction
    import itertools
    from lib.graph_capture import record
    recs = record(model_config.load_config(_write(tmp_path, TINY_GPT2)), 2, 8, "training", (2,))
    runs = {ph: [k for k, _ in itertools.groupby((r["layer"], r["block"]) for r in recs if r["phase"] == ph)]
            for ph in ("fw", "bw")}
    assert runs["fw"] == [("prologue", -1), ("layer", 0), ("layer", 1), ("epilogue", -1)]
    assert runs["bw"] == [("epilogue", -1), ("layer", 1), ("layer", 0), ("prologue", -1)]
    for ph in ("fw", "bw"):
        per_block = [[r["aten"] for r in recs if r["phase"] == ph and r["block"] == b] for b in (0, 1)]
        assert per_block[0] == per_block[1], ph
    # the backward's seeds (ones like the logits) are no kernel of the model
    assert not any("ones_like" in r["aten"] for r in recs)


def test_dropout_backward_rows_are_the_kernels_autograd_runs_with_grad_mode_on():
    # the trusted reference: PyTorch's own autograd. With grad mode on in the backward (create_graph=True) the
    # derivative of native_dropout is a cast of the mask, a multiplication by the scale and one by the gradient
    # (lib.graph_ops.kernel_rows' three rows); with it off, the one native_dropout_backward kernel
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx

    def ops(create_graph):
        def f(x, g):
            y, _ = torch.ops.aten.native_dropout(x, 0.1, True)
            return torch.autograd.grad(y, x, g, create_graph=create_graph)[0]
        gm = make_fx(f)(torch.randn(4, 8, requires_grad=True), torch.randn(4, 8))
        return [str(n.target) for n in gm.graph.nodes if n.op == "call_function"][3:]   # after native_dropout, getitem x2
    assert ops(False) == ["aten.native_dropout_backward.default"]
    assert ops(True) == ["aten._to_copy.default", "aten.mul.Scalar", "aten.mul.Tensor"]


def test_dropout_kernels_only_where_cuda_runs_them(tmp_path):
    # GPT-2 (dropout 0.1): a native_dropout kernel in training, none in inference (eval mode); Llama's dropout
    # probabilities are 0, which CUDA's F.dropout returns as is, without a kernel
    def dropouts(cfg, mode):
        df = graph.capture(_write(tmp_path, cfg), 1, 8, mode, use_cache=False)
        return int(df[df.aten == "aten.native_dropout.default"]["count"].sum())
    assert dropouts(TINY_GPT2, "training") > 0 and dropouts(TINY_GPT2, "inference") == 0
    assert dropouts(TINY_LLAMA, "training") == 0


def test_bert_pretraining_backward_starts_from_both_heads(tmp_path):
    # BertForPreTraining returns prediction_logits and seq_relationship_logits (no 'logits'): the backward seeds
    # both, so every forward GEMM has its two backward GEMMs
    bert = {"architectures": ["BertForPreTraining"], "model_type": "bert", "hidden_size": 64, "num_attention_heads": 4,
            "intermediate_size": 128, "num_hidden_layers": 2, "max_position_embeddings": 128, "vocab_size": 1000}
    df = graph.capture(_write(tmp_path, bert), 2, 16, "training", use_cache=False)
    gemm = df[df.op.isin(["bmm", "linear"])]
    flops = (2 * gemm.B * gemm.M * gemm.N * gemm.K * gemm["count"]).groupby(gemm.phase).sum()
    assert flops["fw"] > 0 and flops["bw"] == 2 * flops["fw"]


@pytest.mark.parametrize("batch, capacity, tokens_per_expert", [(1, 8, 3), (2, 2, 4)])
def test_switch_experts_take_an_even_share_up_to_their_capacity(tmp_path, batch, capacity, tokens_per_expert):
    # 10 tokens per sequence over 4 experts: ceil(10 / 4) = 3 each; batch 2 (20 tokens, 5 each) with capacity
    # 2 per sequence: at most 2 * 2 = 4. Dense blocks' MLPs see every token (10 * batch)
    df = graph.capture(_write(tmp_path, dict(TINY_SWITCH, expert_capacity=capacity)), batch, 10, "inference",
                       use_cache=False)
    wi = df[(df.op == "linear") & (df.N == TINY_SWITCH["d_model"]) & (df.K == TINY_SWITCH["d_ff"])]
    # per stack: 3 sparse blocks x 4 experts, 3 dense blocks
    assert wi.groupby("M")["count"].sum().to_dict() == {tokens_per_expert: 2 * 3 * 4, 10 * batch: 2 * 3}


def test_switch_decoder_runs_as_long_a_sequence_as_the_encoder(tmp_path):
    # decoder self- and cross-attention scores [B*h, s, d] @ [B*h, d, s], context [B*h, s, s] @ [B*h, s, d], s = 10
    df = graph.capture(_write(tmp_path, TINY_SWITCH), 1, 10, "inference", use_cache=False)
    dec = df[(df.op == "bmm") & (df["stack"] == 1)]
    d = TINY_SWITCH["d_kv"]
    assert dec.groupby(["M", "N", "K"])["count"].sum().to_dict() == {(10, d, 10): 2 * 6, (10, 10, d): 2 * 6}


def test_tensor_info_counts_the_storage_behind_a_tensor():
    import torch
    from lib.graph_capture import _tensor_info
    assert _tensor_info(torch.zeros(4).expand(3, 4)) == ((3, 4), 16, "float32")   # an expanded view: 4 floats
    assert _tensor_info(torch.zeros(10, dtype=torch.int64)[:2]) == ((2,), 16, "int64")   # a slice: its own 2


def test_read_strides_follow_the_outputs_innermost_dimension():
    # T5's relative position bias: a [q, k, heads] table permuted to [1, heads, q, k], added into contiguous scores;
    # along k (the scores' innermost dimension) its elements lie `heads` apart. Adding a mask to the bias itself makes
    # an output laid out as the bias is, walked along heads: read in order there. A broadcast input reads stride 0.
    import torch
    from lib.graph_capture import Recorder, _read_strides
    heads, q, k = 4, 16, 16
    bias = torch.zeros(q, k, heads, device="meta").permute(2, 0, 1).unsqueeze(0)
    scores = torch.zeros(1, heads, q, k, device="meta")
    with Recorder() as rec:
        scores.add_(bias)
        bias + torch.zeros(1, 1, q, k, device="meta")
        scores.sum(dim=-1)
    assert [r["read_strides"] for r in rec.records[:1]] == [[1, heads]]
    assert rec.records[-2]["read_strides"] == [1, 0]        # the bias plus a broadcast mask, in the bias's layout
    assert _read_strides([scores], torch.zeros(1, heads, q, device="meta")) == [None]   # a reduction's input
    assert _read_strides([scores], torch.zeros((), device="meta")) == [0]


def test_recorder_answers_item_on_meta_with_the_nominal_case():
    # `.item()` has no value on meta: True for masks (e.g. `(mask == 1).all()`), 0 for counts and sums
    import torch
    from lib.graph_capture import Recorder
    with Recorder() as rec:
        assert torch.ones(3, dtype=torch.bool, device="meta").all().item() is True
        assert torch.ones(3, device="meta").sum().item() == 0.0
        assert torch.ones(3, dtype=torch.long, device="meta").sum().item() == 0
    assert rec.records and all(r["layer"] == "prologue" for r in rec.records)


def test_as_measured_puts_back_what_it_replaced():
    # after a capture (or an error inside one) the process's dropout and the transformers attention are upstream's
    import torch
    from lib.graph_capture import MEASURED_ATTENTION, _attention_module, as_measured
    module = _attention_module("gpt2")
    upstream, dropout = module.eager_attention_forward, torch.nn.functional.dropout
    with pytest.raises(RuntimeError, match="inside"):
        with as_measured("gpt2"):
            assert module.eager_attention_forward is MEASURED_ATTENTION["gpt2"]
            assert torch.nn.functional.dropout is not dropout
            raise RuntimeError("inside")
    assert module.eager_attention_forward is upstream and torch.nn.functional.dropout is dropout


@pytest.mark.parametrize("mode", ["inference", "training"])
def test_gpt2_attention_runs_the_4x_kernels_between_scores_and_softmax(tmp_path, mode):
    # transformers 4.x GPT2Attention._attn: scores / full([]) (the scale), where(causal mask, scores, full([])
    # (finfo.min)), softmax; its causal mask was a slice of a buffer, so no kernel makes one (torch.empty here)
    df = graph.capture(_write(tmp_path, TINY_GPT2), 2, 8, mode, use_cache=False)
    fw = df[(df.layer == "layer") & (df.phase == "fw")].aten.tolist()
    start = fw.index("aten.bmm.default")
    assert fw[start:fw.index("aten._softmax.default") + 1] == [
        "aten.bmm.default", "aten.full.default", "aten.div.Tensor", "aten.full.default", "aten.where.self",
        "aten._softmax.default"]


def test_recorder_marks_the_gradient_sums_autograd_runs():
    # the trusted reference: PyTorch's own autograd. x feeds three ops, so the engine adds up three gradients of x
    # (two add kernels) after the backward nodes that return the second and third have finished; no op's backward
    # (mul, tanh_backward, exp's grad * result) is a sum, and the hooks change no gradient
    import torch
    from lib.graph_capture import Recorder, _mark_gradient_sums
    x = torch.randn(4, 8, requires_grad=True)
    with Recorder() as rec:
        y = x * 2 + torch.tanh(x) + x.exp()
        seed = torch.ones_like(y)
        _mark_gradient_sums([y], rec)
        rec.phase = "bw"
        y.backward(seed)
    sums = [r["aten"] for r in rec.records if r["grad_sum"]]
    assert sums == ["aten.add.Tensor"] * 2
    assert all(r["phase"] == "bw" for r in rec.records if r["grad_sum"])
    assert not any(r["aten"] == "aten.add.Tensor" and not r["grad_sum"] for r in rec.records if r["phase"] == "bw")
    assert torch.allclose(x.grad, 2 + (1 - torch.tanh(x) ** 2) + x.exp())


def test_gpt2_block_backward_sums_four_gradients(tmp_path):
    # per GPT-2 block: the residual stream feeds ln_1 and the attention's residual add, and again ln_2 and the MLP's
    # (one sum each), and gelu_new's 0.5 * x * (1 + tanh(c * (x + 0.044715 * x ** 3))) reads x three times (two
    # sums): 4 per block, 8 in a 2-block model; each an 'add' of the residual width, none in inference
    from lib.graph_ops import GRAD_SUM
    path = _write(tmp_path, TINY_GPT2)
    df = graph.capture(path, 2, 8, "training", use_cache=False)
    sums = df[df.aten.str.endswith(GRAD_SUM)]
    layer = sums[sums.layer == "layer"]
    assert (sums.phase == "bw").all() and (sums.aten == "aten.add.Tensor" + GRAD_SUM).all()
    assert layer["count"].sum() == 8 and (layer.op == "add").all()
    assert sorted(layer.H.unique()) == [64, 256]     # n_embd, and gelu's input: the MLP's 4 x n_embd
    assert not graph.capture(path, 2, 8, "inference", use_cache=False).aten.str.endswith(GRAD_SUM).any()
