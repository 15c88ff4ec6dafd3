"""The expert as TF 1.x placed it (``expert(problem, gradients="first_gpu")``, preset ``expert_tf1``): gradient groups
on the first GPU, forward groups and variable updates where the colocated expert puts them."""
import numpy as np
import pytest

import placement_env as pe
from baselines.expert import _gradient_groups, expert, gradient_ops, tf1_op_devices
from placement_env import MethodArgumentError, Problem, solve

TINY = ("rnnlm-tiny", "nmt-tiny", "inception_v3-tiny")


@pytest.fixture(scope="module")
def problems():
    cluster = pe.load_cluster("paper-2gpu")
    return {name: Problem.make(pe.load_benchmark(name, max_groups=10**6), cluster, benchmark=name) for name in TINY}


def _first_gpu(cluster):
    return next(d for d, device in enumerate(cluster.devices) if device.kind == "GPU")


@pytest.mark.parametrize("name", TINY)
def test_gradient_groups_go_to_the_first_gpu_and_the_rest_stays(problems, name):
    problem = problems[name]
    graph = problem.graph
    colocated, tf1 = expert(problem), expert(problem, gradients="first_gpu")
    moved = _gradient_groups(graph)
    gpu0 = _first_gpu(problem.cluster)
    gpu_ok = problem.allowed[:, gpu0]
    assert moved.any() and (colocated[moved & gpu_ok] != gpu0).any()  # the option changes something
    assert (tf1[moved & gpu_ok] == gpu0).all()
    assert np.array_equal(tf1[~moved], colocated[~moved])  # forward groups and variables' groups unchanged
    assert problem.allowed[np.arange(graph.n_groups), tf1].all()
    # Every group that holds a variable or its update is one the option leaves alone.
    names = graph.op_names.astype(str)
    update_groups = np.unique(graph.group[[n.startswith("train_step/update_") for n in names]])
    assert len(update_groups) and not moved[update_groups].any()
    # A group is moved when most of its ops are gradient ops.
    share = np.bincount(graph.group, weights=gradient_ops(names)) / np.bincount(graph.group)
    assert (share[moved] > 0.5).all()


def test_gradient_ops_are_those_under_gradients():
    assert gradient_ops(["gradients/lstm_0/t0/MatMul_grad/MatMul", "gradients_1/x", "lstm_0/t0/MatMul",
                         "train_step/update_lstm_0/kernel/ResourceApplyMomentum", "x/gradients/y"]).tolist() == \
        [True, True, False, False, False]


def test_tf1_op_devices_put_every_gradient_op_on_the_first_gpu_or_a_cpu(problems):
    problem = problems["rnnlm-tiny"]
    graph = problem.graph
    devices = tf1_op_devices(problem)
    gradient = gradient_ops(graph.op_names)
    gpu_kernel = (graph.device_mask & 2) > 0
    assert (devices[gradient & gpu_kernel] == _first_gpu(problem.cluster)).all()
    assert (devices[gradient & ~gpu_kernel] == 0).all()  # paper-2gpu's CPU is device 0
    assert np.array_equal(devices[~gradient], expert(problem)[graph.group][~gradient])


def test_the_preset_and_the_spec_give_the_same_placement(problems):
    problem = problems["nmt-tiny"]
    assert pe.PRESETS["expert_tf1"] == pe.MethodSpec("expert", {"gradients": "first_gpu"})
    by_preset = solve("expert_tf1", problem).placement
    assert np.array_equal(by_preset, solve(pe.method("expert", gradients="first_gpu"), problem).placement)
    assert np.array_equal(solve(pe.method("expert", gradients="colocated"), problem).placement, expert(problem))


def test_a_bad_value_is_refused(problems):
    with pytest.raises(MethodArgumentError, match="gradients=last_gpu; expert accepts one of colocated, first_gpu"):
        pe.method("expert", gradients="last_gpu")
    with pytest.raises(ValueError, match=r"gradients='last_gpu'; expected one of 'colocated', 'first_gpu'"):
        expert(problems["rnnlm-tiny"], gradients="last_gpu")
    with pytest.raises(MethodArgumentError, match="sets gradients itself"):
        pe.method("expert_tf1", gradients="colocated")
