"""lib.distributed: collectives against hand-computed times, the tensor-parallel shard against Megatron's split, the
pipeline stages against a hand-made table, the paper's table against the labels, and the CLI."""
import json

import pandas as pd
import pytest

from lib import distributed as d
from lib import network as net
from lib import sharding
from lib import paths
from lib.devices import device_by_name
from lib.forecast import forecast, predict_table, summarize
from lib.graph import capture
from lib.labels import load_labels
from lib.model_config import load_config

from cli_run import run_main, run_module

GPT2 = paths.MODEL_CONFIGS / "gpt2_large.json"
H100 = paths.DEVICE_CONFIGS / "NVIDIA_H100_80GB_HBM3.json"
LINK = net.Link("test", GBps=400.0, latency_us=0.0)


def test_ring_allreduce_by_hand():
    # 4 GB over 4 GPUs at 400 GB/s: 2 * 3 steps of 1 GB / 400 GB/s = 6 * 2.5 ms
    assert net.allreduce_ms(4e9, 4, LINK) == pytest.approx(15.0)
    # each of the 2 (n - 1) steps pays the latency: 6 * 10 us
    assert net.allreduce_ms(0.0, 4, net.Link("x", 400.0, 10.0)) == pytest.approx(0.06)
    assert net.allreduce_ms(4e9, 1, LINK) == 0.0


def test_hierarchical_allreduce_is_a_ring_in_the_node_then_one_across():
    ib = net.Link("ib", GBps=50.0, latency_us=0.0)
    assert net.hierarchical_allreduce_ms(4e9, 4, 1, LINK, ib) == net.allreduce_ms(4e9, 4, LINK)
    # across 2 servers each GPU all-reduces its quarter (1 GB): 2 * 1 step of 0.5 GB / 50 GB/s = 20 ms
    assert net.hierarchical_allreduce_ms(4e9, 4, 2, LINK, ib) == pytest.approx(15.0 + 20.0)


def test_p2p_by_hand():
    assert net.p2p_ms(4e8, net.Link("x", 400.0, 5.0)) == pytest.approx(1.0 + 0.005)


def test_megatron_pads_the_vocabulary_to_128_times_tp():
    assert sharding.padded_vocab(50257, 1) == 50304     # GPT-2's padded vocabulary in Megatron-LM
    assert sharding.padded_vocab(50257, 4) == 50688     # 99 x 512
    assert sharding.padded_vocab(512, 4) == 512


@pytest.mark.parametrize("option, nodes, layout, kind", [
    ("dp4", 1, d.Layout(dp=4), "dp"), ("tp4", 1, d.Layout(tp=4), "tp"), ("pp4_1", 1, d.Layout(pp=4), "pp"),
    ("pp4", 1, d.Layout(pp=4), "pp"), ("dp16", 2, d.Layout(dp=16, nodes=2), "dp"),
    ("tp4xdp2", 1, d.Layout(tp=4, dp=2), "hybrid"), ("dp2xpp2_4xtp2", 1, d.Layout(2, 2, 2, 4), "hybrid"),
    ("tp8xpp2_8", 2, d.Layout(tp=8, pp=2, micro_batches=8, nodes=2), "hybrid")])
def test_parse_layout(option, nodes, layout, kind):
    assert d.parse_layout(option, nodes) == layout
    assert d.parse_layout(layout.name, nodes) == layout and layout.kind == kind
    assert d.Layout(tp=2, pp=2, dp=2, micro_batches=4).name == "tp2xpp2_4xdp2"


@pytest.mark.parametrize("option, nodes, message", [
    ("dp4_2", 1, "expected dp<n>"), ("xp4", 1, "expected dp<n>"), ("dp0", 1, "expected dp<n>"),
    ("tp2x", 1, "expected dp<n>"), ("tp2_2xdp2", 1, "expected dp<n>"), ("tp2xtp2", 1, "each of dp, tp and pp at most"),
    ("tp8", 2, "a tensor-parallel group of 8 would span servers of 4 GPUs"), ("dp6", 4, "do not split evenly"),
    ("dp4", 0, "nodes must be"),
    ("dp3xpp2", 3, "data-parallel groups of 3 do not align with servers of 2 tensor-parallel groups")])
def test_parse_layout_errors(option, nodes, message):
    with pytest.raises(d.DistributedError, match=message):
        d.parse_layout(option, nodes)


@pytest.mark.parametrize("option, nodes, where", [
    # 16 GPUs on 2 servers of 8, tp innermost, then dp, then pp (Megatron-LM's order)
    ("dp16", 2, {"gpus_per_node": 8, "dp_in_node": 8, "dp_nodes": 2, "pp_crossings": 0}),
    ("tp8xdp2", 2, {"gpus_per_node": 8, "dp_in_node": 1, "dp_nodes": 2, "pp_crossings": 0}),
    ("tp4xdp2xpp2_4", 2, {"gpus_per_node": 8, "dp_in_node": 2, "dp_nodes": 1, "pp_crossings": 1}),
    ("tp2xpp8_8", 2, {"gpus_per_node": 8, "dp_in_node": 1, "dp_nodes": 1, "pp_crossings": 1}),
    ("tp2xdp8", 2, {"gpus_per_node": 8, "dp_in_node": 4, "dp_nodes": 2, "pp_crossings": 0}),
    ("dp2xpp4_4", 1, {"gpus_per_node": 8, "dp_in_node": 2, "dp_nodes": 1, "pp_crossings": 0})])
def test_groups_are_placed_as_megatron_orders_the_gpus(option, nodes, where):
    assert d.place(d.parse_layout(option, nodes)) == where


def test_megatron_configs_read_as_their_layouts():
    folder = paths.NEUSIGHT / "data" / "megatron_configs"
    assert d.megatron_layout(folder / "DP.yaml") == d.Layout(dp=4)
    assert d.megatron_layout(folder / "TP.yaml") == d.Layout(tp=4)
    assert d.megatron_layout(folder / "PP.yaml") == d.Layout(pp=4, micro_batches=4)


def test_megatron_config_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("num_processes: 4\n")
    with pytest.raises(d.DistributedError, match="bad.yaml: not a Megatron-LM launch config"):
        d.megatron_layout(bad)
    with pytest.raises(d.DistributedError, match="not found"):
        d.megatron_layout(tmp_path / "none.yaml")


def test_link_table_has_a_node_link_for_every_distributed_label_gpu():
    labels = load_labels()
    for name in labels[labels["option"].str.match(d.LAYOUT)]["device"].unique():
        link = net.link_of(name)
        assert link.GBps > 0 and "datasheet" in link.source


def test_link_table_errors_name_the_row(tmp_path):
    table = net.load_links()
    bad = table.copy()
    bad.loc[1, "GBps_per_direction"] = -1
    bad.to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(net.NetworkError, match="bad.csv: row 3"):
        net.load_links(tmp_path / "bad.csv")
    pd.concat([table, table.head(1)]).to_csv(tmp_path / "twice.csv", index=False)
    with pytest.raises(net.NetworkError, match="two node links"):
        net.load_links(tmp_path / "twice.csv")
    with pytest.raises(net.NetworkError, match="no network link for 'NVIDIA L4'"):
        net.link_of("NVIDIA L4", "network")


def _layer(t, phase, op):
    rows = t[(t["layer"] == "layer") & (t["phase"] == phase) & (t["op"] == op)]
    return rows.sort_index()


def test_tensor_parallel_shard_splits_heads_and_mlp_as_megatron():
    full, shard = capture(GPT2, 1, 64, "training"), sharding.tp_capture(GPT2, 1, 64, 4)
    # forward GEMMs of a block: qkv [h -> 3h/4], out-proj [h/4 -> h], fc1 [h -> 4h/4], fc2 [4h/4 -> h] (N in, K out)
    fw = _layer(shard, "fw", "linear")[["M", "N", "K"]].to_numpy().tolist()
    assert fw == [[64, 1280, 960], [64, 320, 1280], [64, 1280, 1280], [64, 1280, 1280]]
    # every GEMM of a block, forward and backward, does a quarter of the work
    for phase in ("fw", "bw"):
        flops = [(_layer(t, phase, "linear")[["M", "N", "K"]].prod(axis=1) * _layer(t, phase, "linear")["count"]).sum()
                 for t in (full, shard)]
        assert flops[1] == pytest.approx(flops[0] / 4)
    # a quarter of the heads: 20 / 4 attention matrices, softmax rows likewise
    assert set(_layer(shard, "fw", "bmm")["B"]) == {5}
    assert set(_layer(shard, "fw", "softmax")["B"]) == {5 * 64}
    # layer norms stay whole, and the LM head covers a quarter of the padded vocabulary
    assert _layer(shard, "fw", "ln")[["B", "H"]].equals(_layer(full, "fw", "ln")[["B", "H"]])
    head = shard[(shard["layer"] == "epilogue") & (shard["phase"] == "fw") & (shard["op"] == "linear")]
    assert head["K"].tolist() == [sharding.padded_vocab(50257, 4) // 4]


def _gemm_flops(t, phase):
    g = _layer(t, phase, "linear")
    return (g[["M", "N", "K"]].prod(axis=1) * g["count"]).sum()


@pytest.mark.parametrize("config, width, inner", [(paths.MODEL_CONFIGS / "opt_13.json", 2048, 8192),
                                                  (paths.MODELS_ADDED / "llama3_8b.json", 4096, 14336)])
def test_tensor_parallel_shard_of_opt_and_llama(config, width, inner):
    full, shard = capture(config, 1, 64, "training"), sharding.tp_capture(config, 1, 64, 4)
    for phase in ("fw", "bw"):
        assert _gemm_flops(shard, phase) == pytest.approx(_gemm_flops(full, phase) / 4)
    fw = _layer(shard, "fw", "linear")
    assert set(fw["N"]) == {width, width / 4, inner / 4}      # reduced over: the width, or a quarter of the heads / MLP
    assert (_layer(shard, "fw", "softmax")["B"].to_numpy() * 4 == _layer(full, "fw", "softmax")["B"].to_numpy()).all()
    head = shard[(shard["layer"] == "epilogue") & (shard["phase"] == "fw") & (shard["op"] == "linear")]
    vocab = json.loads(config.read_text())["vocab_size"]
    assert head["K"].tolist() == [sharding.padded_vocab(vocab, 4) // 4]


def test_tensor_parallel_shard_of_gemma_keeps_its_tied_head(tmp_path):
    # a small Gemma (head_dim 16 given, 2 key/value heads): tp 2 halves every GEMM of the blocks, and the LM head,
    # tied to the embedding as Gemma's is by default, covers half of the padded vocabulary
    config = tmp_path / "gemma.json"
    config.write_text(json.dumps({"model_type": "gemma", "hidden_size": 64, "intermediate_size": 160,
                                  "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
                                  "num_hidden_layers": 2, "max_position_embeddings": 128, "vocab_size": 1000}))
    full, shard = capture(config, 1, 32, "training", use_cache=False), sharding.tp_capture(config, 1, 32, 2,
                                                                                            use_cache=False)
    for phase in ("fw", "bw"):
        assert _gemm_flops(shard, phase) == pytest.approx(_gemm_flops(full, phase) / 2)
    head = shard[(shard["layer"] == "epilogue") & (shard["phase"] == "fw") & (shard["op"] == "linear")]
    assert head["K"].tolist() == [sharding.padded_vocab(1000, 2) // 2]


_SMALL = {"hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 1, "max_position_embeddings": 128,
          "vocab_size": 1000}


# Small configs (width 64, 4 heads, 32 tokens) split over 2 GPUs. Each GPU's forward GEMMs of one block, in the
# order they run, by hand as [M (tokens), N (inputs), K (outputs)]: a column-parallel layer keeps half its outputs,
# a row-parallel one half its inputs. A fused projection halves as a whole: Phi-3's q, k, v (4 + 2 x 2 heads of 16)
# 128 -> 64 outputs and its gate and up 2 x 96 -> 96; NeoX's q, k, v 192 -> 96. Mixtral's router stays whole (4
# experts), and each expert runs its 16 tokens (32 x top-2 / 4) through half its inner width (gate and up 2 x 96 -> 96,
# down 96 -> 48 inputs). BERT's layer-norms' and output layers' biases stay whole; its LM head has a bias per token.
@pytest.mark.parametrize("model_type, extra, block", [
    ("phi3", {"num_key_value_heads": 2, "intermediate_size": 96, "pad_token_id": 0},
     [[32, 64, 64], [32, 32, 64], [32, 64, 96], [32, 48, 64]]),
    ("gpt_neox", {"intermediate_size": 256},
     [[32, 64, 96], [32, 32, 64], [32, 64, 128], [32, 128, 64]]),
    ("mixtral", {"num_key_value_heads": 2, "intermediate_size": 96, "num_local_experts": 4, "num_experts_per_tok": 2},
     [[32, 64, 32], [32, 64, 16], [32, 64, 16], [32, 32, 64], [32, 64, 4]] + [[16, 64, 96], [16, 48, 64]] * 4),
    ("bert", {"intermediate_size": 256, "type_vocab_size": 2},
     [[32, 64, 32], [32, 64, 32], [32, 64, 32], [32, 32, 64], [32, 64, 128], [32, 128, 64]]),
])
def test_tensor_parallel_shard_of_fused_expert_and_encoder_models_by_hand(tmp_path, model_type, extra, block):
    config = tmp_path / f"{model_type}.json"
    config.write_text(json.dumps({"model_type": model_type, **_SMALL, **extra}))
    full, shard = (capture(config, 1, 32, "training", use_cache=False),
                   sharding.tp_capture(config, 1, 32, 2, use_cache=False))
    fw = _layer(shard, "fw", "linear")
    assert fw[["M", "N", "K"]].to_numpy().tolist() == block
    # every GEMM of a block but Mixtral's router does half the work, forward and backward
    # (the router's GEMMs, forward and backward, are the ones with a side of 4, the experts)
    router = full[["M", "N", "K"]].eq(4).any(axis=1) if model_type == "mixtral" else full["op"] != full["op"]
    for phase in ("fw", "bw"):
        assert _gemm_flops(shard, phase) == pytest.approx(_gemm_flops(full[~router], phase) / 2
                                                          + _gemm_flops(full[router], phase))
    # the attention's softmax (the block's first; Mixtral's router has one over all tokens) covers half the heads' rows
    assert _layer(shard, "fw", "softmax")["B"].iloc[0] * 2 == _layer(full, "fw", "softmax")["B"].iloc[0] == 4 * 32
    head = shard[(shard["layer"] == "epilogue") & (shard["phase"] == "fw") & (shard["op"] == "linear")]
    assert sharding.padded_vocab(1000, 2) // 2 in head["K"].tolist()


def test_tensor_parallel_inner_width_must_split(tmp_path):
    config = tmp_path / "llama.json"
    config.write_text(json.dumps({"model_type": "llama", **_SMALL, "intermediate_size": 90}))
    with pytest.raises(sharding.ShardError, match=r"llama\.json: field 'intermediate_size' \(90\) does not split over 4 "
                                                 r"GPUs"):
        sharding.tp_capture(config, 1, 32, 4, use_cache=False)


def test_tied_heads_follow_hugging_faces_defaults():
    from transformers import CONFIG_MAPPING

    from lib.model_config import ARCHS
    assert set(d.TIED_BY_DEFAULT) == {t for t in ARCHS if CONFIG_MAPPING[t]().tie_word_embeddings}


def test_tensor_parallel_errors_name_the_config():
    with pytest.raises(sharding.ShardError, match=r"field 'n_head' \(20\) does not split over 3"):
        sharding.tp_capture(GPT2, 1, 64, 3)
    with pytest.raises(sharding.ShardError, match=r"field 'num_key_value_heads' \(8\) does not split over 16"):
        sharding.tp_capture(paths.MODELS_ADDED / "llama3_8b.json", 1, 64, 16)
    with pytest.raises(sharding.ShardError, match=r"switchxl4.json: field 'num_heads' \(32\) does not split over 3"):
        sharding.check_split(load_config(SWITCH), 3)


SWITCH = paths.MODEL_CONFIGS / "switchxl4.json"
# A small SwitchTransformer: width 64, 4 heads of 16, MLP 128 wide, 2 experts; dense and sparse blocks alternate
_SMALL_SWITCH = {"model_type": "switch_transformers", "d_model": 64, "num_heads": 4, "d_kv": 16, "d_ff": 128,
                 "num_experts": 2, "num_layers": 2, "num_decoder_layers": 2, "num_sparse_encoder_layers": 1,
                 "num_sparse_decoder_layers": 1, "expert_capacity": 64, "vocab_size": 1000}


def test_tensor_parallel_shard_of_switch_by_hand(tmp_path):
    # Over 2 GPUs, 32 tokens, each GPU's forward GEMMs [M, N (inputs), K (outputs)] of the encoder's dense block: q, k,
    # v keep half their outputs (2 of the 4 heads of 16), o half its inputs, the MLP's wi half its 128 outputs and wo
    # half its inputs; the decoder's cross-attention splits as its self-attention. Each expert runs its 16 tokens (32
    # over 2 experts, within the capacity) through half its width; the router (2 outputs, the experts) stays whole.
    config = tmp_path / "switch.json"
    config.write_text(json.dumps(_SMALL_SWITCH))
    full, shard = (capture(config, 1, 32, "training", use_cache=False),
                   sharding.tp_capture(config, 1, 32, 2, use_cache=False))
    fw = _layer(shard, "fw", "linear")
    encoder, decoder = fw[fw["stack"] == 0], fw[fw["stack"] == 1]
    attention = [[32, 64, 32]] * 3 + [[32, 32, 64]]
    assert encoder[["M", "N", "K"]].to_numpy().tolist() == (attention + [[32, 64, 64]] * 2 + attention
                                                            + [[32, 64, 2]] + [[16, 64, 64]] * 4)
    assert decoder[["M", "N", "K"]].to_numpy().tolist()[:10] == attention * 2 + [[32, 64, 64]] * 2
    router = full[["M", "N", "K"]].eq(2).any(axis=1)
    for phase in ("fw", "bw"):
        assert _gemm_flops(shard, phase) == pytest.approx(_gemm_flops(full[~router], phase) / 2
                                                          + _gemm_flops(full[router], phase))
    # the attention's softmax rows and the relative position bias cover half the heads; the embeddings of both stacks
    # and the tied LM head half the padded vocabulary
    assert _layer(shard, "fw", "softmax")["B"].iloc[0] * 2 == _layer(full, "fw", "softmax")["B"].iloc[0] == 4 * 32
    assert "[(32, 2), (32, 32)]->[(32, 32, 2)]" in set(shard["shapes"])
    lookups = shard[(shard["aten"] == "aten.embedding.default") & (shard["phase"] == "fw") & (shard["layer"] != "layer")]
    assert set(lookups["shapes"]) == {"[(512, 64), (1, 32)]->[(1, 32, 64)]"} and len(lookups) == 2
    head = shard[(shard["layer"] == "epilogue") & (shard["phase"] == "fw") & (shard["op"] == "linear")]
    assert head["K"].tolist() == [sharding.padded_vocab(1000, 2) // 2]


@pytest.mark.parametrize("encoder, decoder, tp", [(4, 4, 1), (4, 2, 1), (4, 4, 2)])
def test_saved_activations_of_two_stacks_add_up_to_the_whole_model(tmp_path, encoder, decoder, tp):
    # counted from one and two periods per stack, outside + L per_block is what the whole model saves, counted whole
    config = tmp_path / "switch.json"
    config.write_text(json.dumps({**_SMALL_SWITCH, "num_layers": encoder, "num_decoder_layers": decoder,
                                  "num_sparse_encoder_layers": encoder // 2, "num_sparse_decoder_layers": decoder // 2}))
    saved = sharding.activation_bytes(config, 2, 32, tp=tp, use_cache=False)
    whole = sharding._saved_bytes(load_config(config), 2, 32, (encoder, decoder), tp)
    assert sharding.saved_bytes_of(saved, encoder + decoder) == pytest.approx(whole, rel=1e-12)


def test_saved_activations_of_a_gpt2_block_by_hand():
    # What autograd keeps of one GPT-2 block in fp32, per token (s b tokens), in units of h bytes: the inputs of both
    # layer norms (4 each) and of the q/k/v projection (4), q, k and v (12, one tensor), the merged heads (4), the
    # attention's and the MLP's output dropout masks (1 each, bool), the MLP's input (4), and five tensors of the
    # MLP's width 4h along gelu_new (x, tanh, 0.5 x, 1 + tanh, its output: 5 x 16); plus each layer norm's mean and
    # rstd (2 x 2 x 4 bytes per token). Per head and token pair: the softmax output (4), the dropout mask (1) and the
    # dropped probabilities (4); the causal mask once (1 byte per token pair); and the scores' divisor, a 0-dim tensor.
    h, a = 1280, 20
    for batch, seq in ((1, 128), (2, 256)):
        saved = sharding.activation_bytes(GPT2, batch, seq)
        tokens = seq * batch
        assert saved["per_block"] == (4 + 4 + 4 + 12 + 4 + 2 + 4 + 5 * 16) * h * tokens + 16 * tokens \
            + (9 * a * batch + 1) * seq ** 2 + 4
        assert 0 < saved["outside"] < saved["per_block"]
    # a quarter of the heads and of the MLP per GPU under tp4; the layer norms' inputs and the masks stay whole
    tp = sharding.activation_bytes(GPT2, 1, 128, tp=4)["per_block"]
    assert tp == (4 + 4 + 4 + 12 / 4 + 4 / 4 + 2 + 4 + 5 * 16 / 4) * h * 128 + 16 * 128 + (9 * a / 4 + 1) * 128 ** 2 + 4


def test_pipeline_stages_by_hand():
    table = pd.DataFrame({"layer": ["prologue", "prologue", "layer", "layer", "epilogue", "epilogue"],
                          "phase": ["fw", "bw", "fw", "bw", "fw", "bw"], "total_ms": [1.0, 2.0, 8.0, 16.0, 3.0, 4.0]})
    stages = d._pp_stages(table, stages=2, layers=4)
    assert stages[["fw_ms", "bw_ms"]].to_numpy().tolist() == [[5.0, 10.0], [7.0, 12.0]]


def test_one_micro_batch_pipeline_computes_the_whole_model_once():
    dev = device_by_name("NVIDIA H100 80GB HBM3")
    single = forecast(GPT2, dev, 2, 128, "training")["latency_ms"]
    pp = d.forecast_layout(GPT2, dev, 2, 128, d.parse_layout("pp4_1"))
    assert pp["compute_ms"] == pytest.approx(single)
    # with 2 micro-batches: the stages of one micro-batch once, then the slowest stage once more
    pp2 = d.forecast_layout(GPT2, dev, 2, 128, d.parse_layout("pp4_2"))
    half = forecast(GPT2, dev, 1, 128, "training")["latency_ms"]
    assert half < pp2["compute_ms"] < 2 * half
    dp = d.forecast_layout(GPT2, dev, 4, 128, d.parse_layout("dp4"))
    assert dp["compute_ms"] == pytest.approx(forecast(GPT2, dev, 1, 128, "training")["latency_ms"])
    assert dp["communication_ms"] == pytest.approx(net.allreduce_ms(4 * 774_030_080, 4, net.link_of(dev.name)))
    assert dp["model_state_gb"] == pytest.approx(16 * 774_030_080 / 1e9)
    saved = sharding.activation_bytes(GPT2, 1, 128)
    assert dp["activation_gb"] == pytest.approx((saved["outside"] + 36 * saved["per_block"]) / 1e9)
    assert dp["memory_gb"] == pytest.approx(dp["model_state_gb"] + dp["activation_gb"])
    # the busiest pipeline stage: 9 blocks and everything outside them, for min(2, 4) micro-batches of 1
    assert pp2["activation_gb"] == pytest.approx(2 * (saved["outside"] + 9 * saved["per_block"]) / 1e9)


def test_switch_layouts_by_hand():
    # SwitchTransformer (24 encoder and 24 decoder blocks, width 1024, P parameters) at 2 sequences of 64 tokens on
    # H100s. tp2: one GPU's shard, and per pass 2 all-reduces per encoder block, 3 per decoder block (after its
    # cross-attention too) and 2 outside the blocks, each of the [2, 64, 1024] fp32 activations
    dev = device_by_name("NVIDIA H100 80GB HBM3")
    node, params = net.link_of(dev.name), 5_267_615_744
    tp = d.forecast_layout(SWITCH, dev, 2, 64, d.parse_layout("tp2"))
    assert tp["compute_ms"] == pytest.approx(summarize(predict_table(sharding.tp_capture(SWITCH, 2, 64, 2), dev))
                                             ["latency_ms"])
    assert tp["communication_ms"] == pytest.approx(2 * (2 * 24 + 3 * 24 + 2) * net.allreduce_ms(4 * 2 * 64 * 1024, 2,
                                                                                                  node))
    # dp2: the whole model on one sequence per GPU, then the gradients of all its parameters
    dp = d.forecast_layout(SWITCH, dev, 2, 64, d.parse_layout("dp2"))
    assert dp["compute_ms"] == pytest.approx(forecast(SWITCH, dev, 1, 64, "training")["latency_ms"])
    assert dp["communication_ms"] == pytest.approx(net.allreduce_ms(4 * params, 2, node))
    assert dp["model_state_gb"] == pytest.approx(2 * tp["model_state_gb"]) == pytest.approx(16 * params / 1e9)
    saved = sharding.activation_bytes(SWITCH, 1, 64)
    assert dp["activation_gb"] == pytest.approx((saved["outside"] + 48 * saved["per_block"]) / 1e9)
    # no pipeline stages across its encoder and decoder, so 4 GPUs admit three layouts (32 heads, an MLP of 16384)
    with pytest.raises(d.DistributedError, match="pipeline stages split one stack of blocks here; this model has 2"):
        d.forecast_layout(SWITCH, dev, 2, 64, d.parse_layout("pp2_1"))
    assert {lay.name for lay in d.candidate_layouts(SWITCH, 4, 1, 4)} == {"dp4", "tp2xdp2", "tp4"}


def test_combined_layouts_by_hand():
    # GPT2-Large (36 blocks, width 1280, P parameters) at a global batch of 4 sequences of 128 tokens on H100s
    dev = device_by_name("NVIDIA H100 80GB HBM3")
    node, ib = net.link_of(dev.name), net.link_of(dev.name, "network")
    params, width, vocab = 774_030_080, 1280, 50257
    shard = summarize(predict_table(sharding.tp_capture(GPT2, 2, 128, 2), dev))      # tp 2, 2 sequences
    # tp2 x dp2: each pair of GPUs runs half the batch as a tp-2 shard, then all-reduces the gradients of its half of
    # the parameters with the other pair
    f = d.forecast_layout(GPT2, dev, 4, 128, d.parse_layout("tp2xdp2"))
    tp_ms = 2 * (2 * 36 + 1) * net.allreduce_ms(4 * 2 * 128 * width, 2, node)
    assert f["compute_ms"] == pytest.approx(shard["latency_ms"])
    assert f["communication_ms"] == pytest.approx(tp_ms + net.allreduce_ms(4 * params / 2, 2, node))
    assert f["model_state_gb"] == pytest.approx(16 * params / 2 / 1e9)
    saved = sharding.activation_bytes(GPT2, 2, 128, tp=2)
    assert f["activation_gb"] == pytest.approx((saved["outside"] + 36 * saved["per_block"]) / 1e9)
    # the same over 2 servers: the gradients' all-reduce crosses the network, the shard's stays inside a server
    f2 = d.forecast_layout(GPT2, dev, 4, 128, d.parse_layout("tp2xdp2", nodes=2))
    assert f2["communication_ms"] == pytest.approx(tp_ms + net.allreduce_ms(4 * params / 2, 2, ib))
    # tp2 x pp2 with 2 micro-batches of 2: stage i runs 18 blocks and its tp all-reduces (the embedding's on stage 0);
    # the step is both stages once, then the busier once more; each boundary sends half a micro-batch's activations
    # per tp rank both ways, and the tied embedding's gradient (a tp rank's half) is all-reduced by both ends
    f3 = d.forecast_layout(GPT2, dev, 4, 128, d.parse_layout("tp2xpp2_2"))
    stages = d._pp_stages(predict_table(sharding.tp_capture(GPT2, 2, 128, 2), dev), 2, 36)
    ar = net.allreduce_ms(4 * 2 * 128 * width, 2, node)
    stage_ms = (stages["fw_ms"] + stages["bw_ms"]).to_numpy() + [2 * (2 * 18 + 1) * ar, 2 * 2 * 18 * ar]
    p2p = 2 * net.p2p_ms(4 * 2 * 128 * width / 2, node)
    tied = net.allreduce_ms(4 * vocab * width / 2, 2, node)
    assert f3["latency_ms"] == pytest.approx(stage_ms.sum() + stage_ms.max() + p2p + tied)
    assert f3["model_state_gb"] == pytest.approx(16 * params / 4 / 1e9)
    assert f3["activation_gb"] == pytest.approx(2 * (saved["outside"] + 18 * saved["per_block"]) / 1e9)


def test_full_recomputation_by_hand():
    # GPT2-Large at 1 sequence of 128 tokens on one H100: each block keeps only its input [1, 128, 1280] (fp32) and
    # runs its forward again before its backward; one block's saved tensors are rebuilt at a time
    dev = device_by_name("NVIDIA H100 80GB HBM3")
    table = predict_table(capture(GPT2, 1, 128, "training"), dev)
    blocks_fw = table[(table["layer"] == "layer") & (table["phase"] == "fw")]["total_ms"].sum()
    plain, again = (d.forecast_layout(GPT2, dev, 1, 128, d.parse_layout("dp1"), recompute=r) for r in (False, True))
    assert again["compute_ms"] == pytest.approx(plain["compute_ms"] + blocks_fw)
    saved = sharding.activation_bytes(GPT2, 1, 128)
    assert again["activation_gb"] == pytest.approx((saved["outside"] + 36 * 4 * 128 * 1280 + saved["per_block"]) / 1e9)
    assert again["activation_gb"] < plain["activation_gb"] and again["model_state_gb"] == plain["model_state_gb"]
    # tp2 x pp2, 2 micro-batches of 2: each stage runs its 18 blocks' forward again, with their 2 all-reduces each
    node = net.link_of(dev.name)
    f = d.forecast_layout(GPT2, dev, 4, 128, d.parse_layout("tp2xpp2_2"), recompute=True)
    shard = predict_table(sharding.tp_capture(GPT2, 2, 128, 2), dev)
    stages = d._pp_stages(shard, 2, 36)
    fw18 = shard[(shard["layer"] == "layer") & (shard["phase"] == "fw")]["total_ms"].sum() / 2
    ar = net.allreduce_ms(4 * 2 * 128 * 1280, 2, node)
    stage_ms = ((stages["fw_ms"] + stages["bw_ms"]).to_numpy() + fw18
                + [(2 * (2 * 18 + 1) + 2 * 18) * ar, (2 * 2 * 18 + 2 * 18) * ar])
    p2p, tied = 2 * net.p2p_ms(4 * 2 * 128 * 1280 / 2, node), net.allreduce_ms(4 * 50257 * 1280 / 2, 2, node)
    assert f["latency_ms"] == pytest.approx(stage_ms.sum() + stage_ms.max() + p2p + tied)
    saved2 = sharding.activation_bytes(GPT2, 2, 128, tp=2)
    assert f["activation_gb"] == pytest.approx((2 * (saved2["outside"] + 18 * 4 * 2 * 128 * 1280)
                                                + saved2["per_block"]) / 1e9)


def test_candidate_layouts_by_hand():
    # GPT2-Large: 20 heads (tp 1, 2 or 4 of 4 GPUs), 36 blocks (pp 1, 2 or 4); a global batch of 4 sequences
    names = {lay.name for lay in d.candidate_layouts(GPT2, 4, 1, 4)}
    assert names == {"dp4", "pp2_1xdp2", "pp2_2xdp2", "pp4_1", "pp4_2", "pp4_4", "tp2xdp2", "tp2xpp2_1", "tp2xpp2_2",
                     "tp2xpp2_4", "tp4"}
    # on two servers of 2 GPUs a tp group of 4 would span them; 3 sequences go to one copy of the model, in 1 or 3
    # micro-batches
    assert {lay.name for lay in d.candidate_layouts(GPT2, 4, 2, 4)} == names - {"tp4"}
    assert {lay.name for lay in d.candidate_layouts(GPT2, 4, 1, 3)} == {"pp4_1", "pp4_3", "tp2xpp2_1", "tp2xpp2_3", "tp4"}
    with pytest.raises(d.DistributedError, match="6 GPUs do not split evenly over 4 servers"):
        d.candidate_layouts(GPT2, 6, 4, 4)


def test_search_puts_the_fastest_layout_that_fits_first():
    from dataclasses import replace
    dev = device_by_name("NVIDIA H100 80GB HBM3")
    small = replace(dev, mem_gb=6.0)     # a GPU whose memory holds only the layouts that split the model state
    t = d.search_layouts(GPT2, small, 4, 1, 4, 128)
    assert len(t) == 11 and list(t.columns) == d.SEARCH_COLUMNS
    assert t["fits_memory"].tolist() == sorted(t["fits_memory"], reverse=True)           # those that fit first
    for fits, rows in t.groupby("fits_memory"):
        assert rows["latency_ms"].is_monotonic_increasing                              # each group fastest first
        assert ((rows["memory_gb"] <= 6.0) == fits).all()
    assert 0 < t["fits_memory"].sum() < len(t)
    top = t.iloc[0]
    f = d.forecast_layout(GPT2, small, 4, 128, d.parse_layout(top["layout"]))
    assert top["latency_ms"] == pytest.approx(f["latency_ms"]) and top["memory_gb"] == pytest.approx(f["memory_gb"])


def test_forecast_layout_refuses_a_batch_that_does_not_split():
    dev = device_by_name("NVIDIA H100 80GB HBM3")
    with pytest.raises(d.DistributedError, match="batch 6 does not split over 4"):
        d.forecast_layout(GPT2, dev, 6, 128, d.parse_layout("dp4"))
    with pytest.raises(d.DistributedError, match="36 blocks do not split evenly into 5"):
        d.forecast_layout(GPT2, dev, 5, 128, d.parse_layout("pp5_1"))
    with pytest.raises(d.DistributedError, match="batch 6 does not split over 2 data-parallel GPUs x 4 micro-batches"):
        d.forecast_layout(GPT2, dev, 6, 128, d.parse_layout("dp2xpp2_4"))


def test_paper_table_measured_column_is_the_labels():
    paper = d.paper_distributed_table()
    assert len(paper) == 11 and paper["paper_ms"].notna().all()
    labels = load_labels().set_index(["gpu", "model", "batch", "option"])["e2e_ms"]
    from lib.labels import PAPER_MODELS
    for r in paper.itertuples():
        option = {"dp": "dp4", "tp": "tp4", "pp": "pp4_1"}[r.layout]
        measured = labels[(d.PAPER_GPUS[r.gpus], PAPER_MODELS[r.model], r.batch, option)]
        assert r.measured_ms == pytest.approx(measured, abs=0.05)


def _cli(*args):
    return run_main(d.main, "python -m lib.distributed", *args)


def test_cli_prints_the_forecast():
    # the real process: `python -m lib.distributed` prints main's answer and exits with its status
    r = run_module("lib.distributed", "--model", GPT2, "--device", H100, "--batch", 4, "--seq", 128, "--layout", "tp4")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert set(out) == {"latency_ms", "compute_ms", "communication_ms", "model_state_gb", "activation_gb", "memory_gb"}
    assert out["latency_ms"] == pytest.approx(out["compute_ms"] + out["communication_ms"])


@pytest.mark.parametrize("args, message", [
    (("--layout", "zz4"), "layout 'zz4'"),
    (("--layout", "dp4", "--device", "A100"), "'A100' names 3 known GPUs"),
    (("--layout", "dp4", "--device", paths.DEVICE_CONFIGS / "AMD_Instinct_MI250.json"), "no node link for"),
    (("--layout", "dp8", "--nodes", "2", "--device", paths.DEVICE_CONFIGS / "NVIDIA_L4.json"), "no network link"),
    (("--layout", "tp8", "--nodes", "2"), "a tensor-parallel group of 8 would span servers of 4 GPUs"),
    (("--layout", "tp2xdp2xtp2"), "each of dp, tp and pp at most once"),
    (("--layout", "tp2xpp2_3"), "batch 8 does not split over 3 micro-batches"),
    (("--layout", "all"), "--layout all needs --gpus"),
    (("--layout", "tp4xdp2", "--gpus", "4"), "layout 'tp4xdp2' takes 8 GPUs, not --gpus 4"),
    (("--layout", "all", "--gpus", "7", "--batch", "2"), "no layout of these GPUs splits this model and batch")])
def test_cli_errors_are_one_line(args, message):
    base = {"--model": GPT2, "--device": H100, "--batch": 8, "--seq": 128}
    extra = dict(zip(args[::2], args[1::2]))
    r = _cli(*[x for k, v in {**base, **extra}.items() for x in (k, v)])
    assert r.returncode == 2 and r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1 and message in r.stderr


def test_cli_takes_a_combined_layout_across_servers():
    r = _cli("--model", GPT2, "--device", H100, "--batch", 8, "--seq", 128, "--layout", "tp4xdp2", "--nodes", "2")
    assert r.returncode == 0, r.stderr
    dev = device_by_name("NVIDIA H100 80GB HBM3")
    assert json.loads(r.stdout) == pytest.approx(d.forecast_layout(GPT2, dev, 8, 128, d.parse_layout("tp4xdp2", 2),
                                                                   cfg_by_class=None))


def test_cli_recomputes_on_request():
    base = ("--model", GPT2, "--device", H100, "--batch", 8, "--seq", 128, "--layout", "tp4xdp2")
    plain, again = (json.loads(_cli(*base, *extra).stdout) for extra in ((), ("--recompute",)))
    assert again["compute_ms"] > plain["compute_ms"] and again["activation_gb"] < plain["activation_gb"]


def test_cli_searches_every_layout():
    r = _cli("--model", GPT2, "--device", H100, "--batch", 4, "--seq", 128, "--layout", "all", "--gpus", 4)
    assert r.returncode == 0, r.stderr
    import io
    table = pd.read_csv(io.StringIO(r.stdout))
    assert list(table.columns) == d.SEARCH_COLUMNS and len(table) == 11
    best = table.iloc[0]
    assert best["fits_memory"] and best["latency_ms"] == table[table["fits_memory"]]["latency_ms"].min()
    assert f"fastest that fits: {best['layout']}, {best['latency_ms']:.1f} ms" in r.stderr


def test_cli_warns_when_the_model_state_exceeds_memory():
    r = _cli("--model", paths.MODEL_CONFIGS / "gpt3_67.json", "--device", H100, "--batch", 4, "--seq", 128,
             "--layout", "dp4")
    assert r.returncode == 0 and "warning: the model state and saved activations" in r.stderr
    assert "exceed the GPU's 80 GB" in r.stderr
