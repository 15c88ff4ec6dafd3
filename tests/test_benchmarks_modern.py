"""The modern benchmark builders (Transformer, GPT-2, BERT, ResNet-50), VGG-16 (with and without batch norm) and
MobileNetV2, on their TINY variants:
static flat graphs, the published architectures' wiring, block scopes, determinism, a real step."""
from __future__ import annotations

import functools

import numpy as np
import pytest
import tensorflow as tf

import placement_env as pe
from placement_env.benchmarks import (EXTRA_MODELS, MODERN_MODELS, bert, common, dlrm, gpt2, mlp_mixer,
                                      mobilenet_v2, resnet50, transformer, vgg16, vgg16_bn)
from placement_env.benchmarks.sizes import MOBILENET_V2_STAGES, RESNET50_STAGES, VGG16_STAGES

CONTROL_FLOW = {"While", "StatelessWhile", "Switch", "Merge", "Enter", "Exit", "NextIteration",
                "LoopCond", "PartitionedCall", "StatefulPartitionedCall", "If", "StatelessIf"}
MODULES = {"transformer": transformer, "gpt2": gpt2, "bert": bert, "resnet50": resnet50, "vgg16": vgg16,
           "vgg16_bn": vgg16_bn, "mobilenet_v2": mobilenet_v2, "mlp_mixer": mlp_mixer, "dlrm": dlrm}
MODELS = (*MODERN_MODELS, *EXTRA_MODELS)
# Ops outside every block: the optimiser, the gradients' own bookkeeping, the initialiser.
OUTSIDE_BLOCKS = ("gradients", "train_step", "init")


@functools.lru_cache(maxsize=None)
def tiny(name: str) -> common.TrainingStep:
    """The TINY training step of model ``name``, built once per test session."""
    return MODULES[name].build(**MODULES[name].TINY)


@pytest.fixture(params=MODELS)
def built(request):
    return request.param, MODULES[request.param], tiny(request.param)


def _ops(step):
    return step.graph.get_operations()


def _trainable(step) -> dict[str, list[int]]:
    with step.graph.as_default():
        return {v.op.name: v.shape.as_list() for v in tf.compat.v1.trainable_variables()}


def test_tiny_graph_is_static_and_flat(built):
    name, mod, step = built
    assert isinstance(step, common.TrainingStep) and step.params == mod.TINY
    undefined = [t.name for op in _ops(step) for t in op.outputs if not t.shape.is_fully_defined()]
    assert undefined == []
    assert sorted({op.type for op in _ops(step)} & CONTROL_FLOW) == []
    step.graph.get_operation_by_name(step.train_op)
    step.graph.get_operation_by_name(step.init_op)


def test_every_forward_op_lies_in_one_block(built):
    name, _, step = built
    blocks = pe.benchmark_blocks(f"{name}-tiny")
    assert len(set(blocks)) == len(blocks) and blocks[0] == "inputs" and blocks[-1] == "loss"
    names = [op.name for op in _ops(step)]
    scopes = tuple(b + "/" for b in blocks)
    for block in blocks:
        assert any(n.startswith(block + "/") for n in names), block
        if block != "inputs":  # the random inputs have no gradient
            assert any(n.startswith(f"gradients/{block}/") for n in names), block
    stray = {n for n in names if not n.startswith(scopes) and n.split("/")[0] not in OUTSIDE_BLOCKS
             and not n.startswith("train_step")}
    assert stray == set()
    # gradient ops outside the blocks' scopes are co-located with a forward op
    for op in _ops(step):
        if op.name.startswith("gradients/") and not op.name[len("gradients/"):].startswith(scopes):
            assert any(c.startswith(b"loc:@") for c in op.node_def.attr["_class"].list.s), op.name


def test_blocks_follow_the_layer_count():
    assert pe.benchmark_blocks("gpt2") == ("inputs", "embedding", *(f"layer_{k}" for k in range(12)), "softmax",
                                           "loss")
    assert pe.benchmark_blocks("gpt2-tiny", layers=3)[2:5] == ("layer_0", "layer_1", "layer_2")
    assert len(pe.benchmark_blocks("transformer")) == 2 + 6 + 6 + 2
    assert pe.benchmark_blocks("bert-tiny")[-4:] == ("pooler", "masked_lm", "next_sentence", "loss")
    assert pe.benchmark_blocks("resnet50") == pe.benchmark_blocks("resnet50-tiny") == resnet50.BLOCKS
    assert len(resnet50.BLOCKS) == 3 + 16 + 2
    assert pe.benchmark_blocks("vgg16") == vgg16.BLOCKS == ("inputs", "conv1", "conv2", "conv3", "conv4", "conv5",
                                                            "fc6", "fc7", "fc8", "loss")
    assert pe.benchmark_blocks("mobilenet_v2-tiny") == mobilenet_v2.BLOCKS
    assert len(mobilenet_v2.BLOCKS) == 2 + 17 + 3 and mobilenet_v2.BLOCKS[-4:-2] == ("block7/unit_1", "conv_last")
    with pytest.raises(TypeError, match="'layer'"):
        pe.benchmark_blocks("gpt2", layer=3)


def test_deterministic_structure(built):
    _, mod, step = built
    again = mod.build(**mod.TINY)
    assert [(o.name, o.type, [t.name for t in o.inputs]) for o in _ops(step)] == \
        [(o.name, o.type, [t.name for t in o.inputs]) for o in _ops(again)]


def test_train_step_runs_and_updates(built):
    name, _, step = built
    graph = step.graph
    loss = graph.get_tensor_by_name(step.loss)
    with graph.as_default():
        variables = tf.compat.v1.trainable_variables()
    with tf.compat.v1.Session(graph=graph) as sess:
        sess.run(step.init_op)
        before = sess.run(variables)
        losses = [float(sess.run([loss, step.train_op])[0]) for _ in range(2)]
        after = sess.run(variables)
    assert all(np.isfinite(losses)), losses
    unchanged = [v.op.name for v, b, a in zip(variables, before, after) if np.array_equal(b, a)]
    assert unchanged == []  # every weight gets a gradient


def _attention_layer_params(d: int, d_ff: int, attentions: int) -> int:
    """Weights of one layer: per attention Q, K, V, output (d x d + d each) and a LayerNorm; the FFN
    and its LayerNorm."""
    return attentions * (4 * (d * d + d) + 2 * d) + (d * d_ff + d_ff + d_ff * d + d) + 2 * d


def test_parameter_counts_are_the_published_architectures():
    """The trainable parameters match the published models' closed forms, so PAPER has their sizes
    (Transformer base 63.1 M with a 37k vocabulary, GPT-2 small 124.4 M, BERT-base 110.1 M)."""
    def expected(name: str, p: dict) -> int:
        d, f, v = p["d_model"], p["d_ff"], p["vocab"]
        if name == "transformer":  # shared embedding, L encoder and L decoder layers (two attentions each)
            return v * d + p["layers"] * (_attention_layer_params(d, f, 1) + _attention_layer_params(d, f, 2))
        if name == "gpt2":  # tokens, positions, L pre-norm layers, final LayerNorm
            return (v + p["context"]) * d + p["layers"] * _attention_layer_params(d, f, 1) + 2 * d
        # BERT: words, positions, segments, embedding LayerNorm, layers, pooler, MLM transform +
        # LayerNorm + output bias, NSP classifier
        return ((v + p["seq_len"] + 2) * d + 2 * d + p["layers"] * _attention_layer_params(d, f, 1)
                + (d * d + d) + (d * d + d + 2 * d + v) + (2 * d + 2))

    for name in ("transformer", "gpt2", "bert"):
        counts = sum(int(np.prod(shape)) for shape in _trainable(tiny(name)).values())
        assert counts == expected(name, MODULES[name].TINY), name
    assert expected("transformer", transformer.PAPER) == 63_082_496
    assert expected("gpt2", gpt2.PAPER) == 124_439_808
    assert expected("bert", bert.PAPER) == 110_106_428


def test_tied_embeddings_feed_the_output_layer():
    """Transformer, GPT-2 and BERT reuse the input embedding table for the output logits."""
    cases = {"transformer": ("embedding/shared", "softmax/logits"), "gpt2": ("embedding/tokens", "softmax/logits"),
             "bert": ("embeddings/words", "masked_lm/logits")}
    for name, (table, logits) in cases.items():
        op = tiny(name).graph.get_operation_by_name(logits)
        assert op.type == "MatMul" and op.get_attr("transpose_b")
        producers = {t.op.name for t in op.inputs} | {t.op.inputs[0].op.name for t in op.inputs if t.op.inputs}
        assert table in producers or f"{table}/Read/ReadVariableOp" in producers, (name, producers)


def test_tiny_shapes():
    t = transformer.TINY
    graph = tiny("transformer").graph
    assert graph.get_tensor_by_name("softmax/logits:0").shape.as_list() == [t["batch"] * t["tgt_len"], t["vocab"]]
    scores = graph.get_tensor_by_name("decoder/layer_0/cross_attention/scores:0").shape.as_list()
    assert scores == [t["batch"], t["heads"], t["tgt_len"], t["src_len"]]
    b = bert.TINY
    graph = tiny("bert").graph
    assert graph.get_tensor_by_name("masked_lm/logits:0").shape.as_list() == [b["batch"] * b["masked"], b["vocab"]]
    assert graph.get_tensor_by_name("next_sentence/classifier/bias_add:0").shape.as_list() == [b["batch"], 2]
    r = resnet50.TINY
    graph = tiny("resnet50").graph
    assert graph.get_tensor_by_name("logits/squeeze:0").shape.as_list() == [r["batch"], r["num_classes"]]
    assert graph.get_tensor_by_name("block4/unit_3/relu:0").shape.as_list() == [r["batch"], 1, 1, 256]
    assert graph.get_tensor_by_name("block1/unit_3/relu:0").shape.as_list() == [r["batch"], 8, 8, 32]
    types = [op.type for op in graph.get_operations()]
    units = sum(units for _, units, _ in RESNET50_STAGES)
    assert types.count("Conv2D") == 1 + 3 * units + len(RESNET50_STAGES) + 1  # 54 at any width
    assert types.count("FusedBatchNorm") == 1 + 3 * units + len(RESNET50_STAGES)
    v = vgg16.TINY
    graph = tiny("vgg16").graph
    assert graph.get_tensor_by_name("fc8/dense/BiasAdd:0").shape.as_list() == [v["batch"], v["num_classes"]]
    assert graph.get_tensor_by_name("conv5/pool:0").shape.as_list() == [v["batch"], 1, 1, 64]
    forward = [op.type for op in graph.get_operations() if not op.name.startswith("gradients/")]
    assert forward.count("Conv2D") == sum(convs for convs, _ in VGG16_STAGES) == 13
    assert forward.count("MatMul") == 3 and "FusedBatchNorm" not in forward
    with_bn = [op.type for op in tiny("vgg16_bn").graph.get_operations() if not op.name.startswith("gradients/")]
    assert with_bn.count("Conv2D") == 13 and with_bn.count("MatMul") == 3
    assert with_bn.count("FusedBatchNormV3") + with_bn.count("FusedBatchNorm") == 13
    assert with_bn.count("BiasAdd") == 3  # the fully connected layers' only: batch norm's offset replaces a conv's


def test_vgg16_has_the_published_parameter_count():
    """Configuration D: 13 3x3 convolutions and 3 fully connected layers, all with biases, 138,357,544
    weights at 224x224 and 1000 classes (closed form here; TINY's trainable variables checked against it)."""
    def expected(p: dict) -> int:
        width = lambda d: max(int(d * p["depth_multiplier"]), p["min_depth"])  # noqa: E731
        count, channels = 0, 3
        for convs, out in VGG16_STAGES:
            for _ in range(convs):
                count += 9 * channels * width(out) + width(out)
                channels = width(out)
        side = p["image_size"] // 2 ** len(VGG16_STAGES)
        fc = width(4096)
        return (count + (side * side * channels * fc + fc) + (fc * fc + fc)
                + (fc * p["num_classes"] + p["num_classes"]))

    assert expected(vgg16.PAPER) == 138_357_544
    assert sum(int(np.prod(shape)) for shape in _trainable(tiny("vgg16")).values()) == expected(vgg16.TINY)
    # with batch norm: each convolution's bias replaced by an offset, plus a scale, per channel
    scales = lambda p: sum(convs * max(int(out * p["depth_multiplier"]), p["min_depth"])  # noqa: E731
                           for convs, out in VGG16_STAGES)
    assert expected(vgg16_bn.PAPER) + scales(vgg16_bn.PAPER) == 138_361_768
    assert (sum(int(np.prod(shape)) for shape in _trainable(tiny("vgg16_bn")).values())
            == expected(vgg16_bn.TINY) + scales(vgg16_bn.TINY))


def test_mlp_mixer_is_the_published_architecture():
    """Mixer-B/16: a patch embedding, 12 layers of token mixing (an MLP across the 196 tokens of each channel) and
    channel mixing, each pre-norm with a skip connection, a final LayerNorm, mean pooling and a linear head:
    59,880,472 weights (the paper's 59 M; closed form here, TINY's trainable variables checked against it)."""
    def expected(p: dict) -> int:
        c, s = p["d_model"], (p["image_size"] // p["patch"]) ** 2
        stem = p["patch"] ** 2 * 3 * c + c
        token = 2 * c + (s * p["token_mlp"] + p["token_mlp"]) + (p["token_mlp"] * s + s)
        channel = 2 * c + (c * p["channel_mlp"] + p["channel_mlp"]) + (p["channel_mlp"] * c + c)
        return stem + p["layers"] * (token + channel) + 2 * c + c * p["num_classes"] + p["num_classes"]

    assert expected(mlp_mixer.PAPER) == 59_880_472
    assert sum(int(np.prod(shape)) for shape in _trainable(tiny("mlp_mixer")).values()) == expected(mlp_mixer.TINY)
    m = mlp_mixer.TINY
    graph = tiny("mlp_mixer").graph
    tokens = (m["image_size"] // m["patch"]) ** 2
    # the token MLP runs across the tokens: one row per (image, channel)
    mixing = graph.get_tensor_by_name("layer_0/token_mixing/intermediate/matmul:0").shape.as_list()
    assert mixing == [m["batch"] * m["d_model"], m["token_mlp"]]
    assert graph.get_tensor_by_name("layer_1/channel_mixing/residual:0").shape.as_list() == \
        [m["batch"] * tokens, m["d_model"]]
    assert graph.get_tensor_by_name("head/logits/bias_add:0").shape.as_list() == [m["batch"], m["num_classes"]]
    forward = [op.type for op in graph.get_operations() if not op.name.startswith("gradients/")]
    assert "BatchMatMulV2" not in forward and forward.count("Conv2D") == 1  # no attention; only the patch embedding
    assert pe.benchmark_blocks("mlp_mixer") == ("inputs", "stem", *(f"layer_{k}" for k in range(12)), "head", "loss")


def test_dlrm_is_mlperf_shape_with_sparse_table_updates():
    """MLPerf's DLRM over Criteo Kaggle's 26 tables: 33,762,577 rows of 128 (the tables' 4,321,609,856 weights and
    the MLPs' 2,368,897, closed form; TINY's trainable variables checked against it); the interaction's 351 pair
    products beside the bottom MLP's 128 make the top MLP's 479 inputs. A table's update is a scatter of the batch's
    rows (no dense gradient, no optimiser slot), so the step holds the tables and little else."""
    def expected(p: dict) -> int:
        widths = (p["dense_features"], *p["bottom_mlp"])
        top = (dlrm.interaction_width(p["dim"], len(p["table_rows"])), *p["top_mlp"])
        mlps = sum(a * b + b for w in (widths, top) for a, b in zip(w, w[1:]))
        return sum(p["table_rows"]) * p["dim"] + mlps

    paper = dlrm.PAPER
    assert dlrm.interaction_width(128, 26) == 479
    assert sum(paper["table_rows"]) == 33_762_577 and len(paper["table_rows"]) == 26
    assert expected(paper) == 4_321_609_856 + 2_368_897
    step = tiny("dlrm")
    assert sum(int(np.prod(shape)) for shape in _trainable(step).values()) == expected(dlrm.TINY)
    m = dlrm.TINY
    graph = step.graph
    types = [op.type for op in graph.get_operations()]
    assert types.count("ResourceScatterAdd") == types.count("ResourceGather") == len(m["table_rows"])
    assert not any(t.startswith("ResourceApplyMomentum") for t in types)
    width = dlrm.interaction_width(m["dim"], len(m["table_rows"]))
    assert graph.get_tensor_by_name("interaction/features:0").shape.as_list() == [m["batch"], width]
    assert graph.get_tensor_by_name("top_mlp/logits:0").shape.as_list() == [m["batch"]]
    assert pe.benchmark_blocks("dlrm") == ("inputs", "bottom_mlp", *(f"table_{k}" for k in range(26)),
                                           "interaction", "top_mlp", "loss")


def test_dlrm_tables_past_one_die_stay_in_groups_of_their_own():
    """The grouping never merges two groups that each hold more than a GiB of variables (an embedding table has next
    to no FLOPs, so by FLOPs alone the 26 tables all joined the interaction's group: 16.1 GiB no device can hold)."""
    graph = pe.load_benchmark("dlrm")
    held = np.bincount(graph.group, weights=graph.persistent_bytes, minlength=graph.n_groups)
    rows = np.array(dlrm.PAPER["table_rows"])
    large = rows * dlrm.PAPER["dim"] * 4 > 2**30
    assert large.sum() == 5
    groups = [int(graph.group[graph.index_of(f"table_{k}/embeddings")]) for k in np.flatnonzero(large)]
    assert len(set(groups)) == 5  # one large table per group
    assert (held > 2**30).sum() == 5 and held.sum() == graph.persistent_bytes.sum()


def test_dlrm_tables_must_be_spread_over_the_dies():
    """On two K80 dies (10.5 GiB each) one die cannot hold DLRM's 16.1 GiB of tables; the tables spread by size over
    both (largest first onto the die with fewer bytes, the rest of the graph on the first) fit, and run within 10% of
    what one die would take if it had the memory (the tables cost next to no time)."""
    graph, cluster = pe.load_benchmark("dlrm"), pe.load_cluster("k80-2gpu")
    evaluator = pe.Evaluator(graph, cluster, "sim")
    gpus = np.flatnonzero(cluster.is_gpu)
    held = np.bincount(graph.group, weights=graph.persistent_bytes, minlength=graph.n_groups)
    one_die = np.full(graph.n_groups, gpus[0])
    spread = one_die.copy()
    load = np.zeros(len(gpus))
    for g in np.argsort(-held, kind="stable")[:8]:
        spread[g] = gpus[int(np.argmin(load))]
        load[np.argmin(load)] += held[g]
    alone, split = evaluator.batch(np.stack([one_die, spread]))
    assert alone.failure == "oom" and alone.peak_bytes.max() > 16 * 2**30
    assert split.ok and split.peak_bytes.max() < 10.5 * 2**30
    assert split.runtime_s < 1.1 * alone.runtime_s


def test_mobilenet_v2_is_the_published_architecture():
    """Table 2 of Sandler et al.: 17 inverted residual units, 10 of them with an identity shortcut, the first without
    an expansion; 3,504,872 trainable weights at 224x224 and 1000 classes (Keras' count; closed form here, TINY's
    trainable variables checked against it)."""
    def expected(p: dict) -> int:
        width = lambda d: max(int(d * p["depth_multiplier"]), p["min_depth"])  # noqa: E731
        channels = width(32)
        count = 9 * 3 * channels + 2 * channels  # conv1 and its batch norm's scale and offset
        for expansion, out, units, _ in MOBILENET_V2_STAGES:
            for _ in range(units):
                hidden = expansion * channels
                count += (channels * hidden + 2 * hidden if expansion != 1 else 0) + 9 * hidden + 2 * hidden
                count += hidden * width(out) + 2 * width(out)
                channels = width(out)
        last = width(1280)
        return count + channels * last + 2 * last + last * p["num_classes"] + p["num_classes"]

    assert expected(mobilenet_v2.PAPER) == 3_504_872
    assert sum(int(np.prod(shape)) for shape in _trainable(tiny("mobilenet_v2")).values()) == \
        expected(mobilenet_v2.TINY)
    m = mobilenet_v2.TINY
    graph = tiny("mobilenet_v2").graph
    forward = [op for op in graph.get_operations() if not op.name.startswith("gradients/")]
    types = [op.type for op in forward]
    units = sum(n for _, _, n, _ in MOBILENET_V2_STAGES)
    assert types.count("DepthwiseConv2dNative") == units == 17
    assert types.count("Conv2D") == 1 + 2 * units - 1 + 1 + 1  # conv1, expand (not in unit 1) and project, last, logits
    assert types.count("Relu6") == 1 + 2 * units - 1 + 1 and "Relu" not in types
    def shortcuts(p: dict) -> list[str]:  # units that keep the shape: stride 1 and as many channels out as in
        width = lambda d: max(int(d * p["depth_multiplier"]), p["min_depth"])  # noqa: E731
        names, channels = [], width(32)
        for s, (_, out, units, stride) in enumerate(MOBILENET_V2_STAGES, start=1):
            for u in range(units):
                if (u > 0 or stride == 1) and width(out) == channels:
                    names.append(f"block{s}/unit_{u + 1}/add")
                channels = width(out)
        return names

    assert len(shortcuts(mobilenet_v2.PAPER)) == 10 and "block1/unit_1/add" not in shortcuts(mobilenet_v2.PAPER)
    assert [op.name for op in forward if op.type in ("AddV2", "Add") and op.name.endswith("/add")] == \
        shortcuts(mobilenet_v2.TINY)  # at TINY's width, block1/unit_1 keeps 8 channels, so it has one too
    assert graph.get_tensor_by_name("logits/squeeze:0").shape.as_list() == [m["batch"], m["num_classes"]]
    assert graph.get_tensor_by_name("conv_last/relu6:0").shape.as_list() == [m["batch"], 2, 2, 160]
    assert mobilenet_v2.PAPER["batch"] == 96 and mobilenet_v2.PAPER["image_size"] == 224


def test_gpt2_attention_is_causal():
    """Changing a later token leaves the earlier positions' outputs unchanged."""
    p = {**gpt2.TINY, "dropout": 0.0}
    step = gpt2.build(**p)
    graph = step.graph
    source = graph.get_tensor_by_name("inputs/source:0")
    hidden = graph.get_tensor_by_name(f"layer_{p['layers'] - 1}/ffn/residual:0")
    ids = np.arange(p["batch"] * p["context"], dtype=np.int32).reshape(p["batch"], p["context"]) % p["vocab"]
    changed = ids.copy()
    changed[:, -1] = (changed[:, -1] + 1) % p["vocab"]
    with tf.compat.v1.Session(graph=graph) as sess:
        sess.run(step.init_op)
        first, second = (sess.run(hidden, {source: x}).reshape(p["batch"], p["context"], -1) for x in (ids, changed))
    np.testing.assert_allclose(first[:, :-1], second[:, :-1], rtol=1e-5, atol=1e-6)
    assert not np.allclose(first[:, -1], second[:, -1])


@pytest.mark.parametrize("name", MODELS)
def test_bad_parameters_name_the_parameter(name):
    mod = MODULES[name]
    with pytest.raises(TypeError, match="bogus_key"):
        mod.build(bogus_key=3)
    with pytest.raises(ValueError, match="batch=0"):
        mod.build(**{**mod.TINY, "batch": 0})
    if name in ("resnet50", "vgg16", "vgg16_bn", "mobilenet_v2"):
        with pytest.raises(ValueError, match="image_size=16"):
            mod.build(**{**mod.TINY, "image_size": 16})
        return
    if name == "mlp_mixer":
        with pytest.raises(ValueError, match="image_size=20 is not a multiple of patch=8"):
            mod.build(**{**mod.TINY, "image_size": 20})
        return
    if name == "dlrm":
        with pytest.raises(ValueError, match=r"bottom_mlp=\[16, 8\] ends in 8 units, but dim=4"):
            mod.build(**{**mod.TINY, "dim": 4})
        with pytest.raises(ValueError, match=r"top_mlp=\[16, 2\] ends in 2 units; expected 1"):
            mod.build(**{**mod.TINY, "top_mlp": (16, 2)})
        with pytest.raises(ValueError, match=r"table_rows\[1\]=0; expected an integer from 1"):
            mod.build(**{**mod.TINY, "table_rows": (50, 0)})
        with pytest.raises(ValueError, match="table_rows=5; expected a non-empty list"):
            mod.build(**{**mod.TINY, "table_rows": 5})
        return
    with pytest.raises(ValueError, match="d_model=16 is not a multiple of heads=3"):
        mod.build(**{**mod.TINY, "heads": 3})
    with pytest.raises(ValueError, match="dropout=1.0"):
        mod.build(**{**mod.TINY, "dropout": 1.0})


def test_sizes_tf_cannot_build_are_refused_before_building():
    """A transformer's positional encodings are [length, d_model] constants; past 2 GiB TF cannot hold them
    (before: the builder first allocated them, then failed in TF's proto code)."""
    with pytest.raises(ValueError, match=r"transformer: src_len=1048576 x d_model=1024 makes a constant of 4.0 GiB"):
        transformer.build(**{**transformer.TINY, "src_len": 2**20, "d_model": 1024, "heads": 2})
    with pytest.raises(ValueError, match=r"gpt2: d_model=1048577; expected an integer from 1 to 1,048,576"):
        gpt2.build(**{**gpt2.TINY, "d_model": 2**20 + 1})


def test_paper_params_are_the_published_base_sizes():
    assert {k: transformer.PAPER[k] for k in ("d_model", "layers", "heads", "d_ff")} == \
        {"d_model": 512, "layers": 6, "heads": 8, "d_ff": 2048}
    assert {k: gpt2.PAPER[k] for k in ("d_model", "layers", "heads", "context", "vocab")} == \
        {"d_model": 768, "layers": 12, "heads": 12, "context": 1024, "vocab": 50257}
    assert {k: bert.PAPER[k] for k in ("d_model", "layers", "heads", "seq_len", "vocab")} == \
        {"d_model": 768, "layers": 12, "heads": 12, "seq_len": 512, "vocab": 30522}
    assert resnet50.PAPER["image_size"] == 224 and resnet50.PAPER["depth_multiplier"] == 1.0
