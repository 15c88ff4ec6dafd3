"""Shared fixtures: a private graph cache per test session, one torch thread per test, and small TF graphs."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

# Property-based tests: no example database in the checkout, the same examples on every run (so a
# failure in CI reproduces here), each test's examples bounded by its own settings.
settings.register_profile("placement_env", database=None, derandomize=True)
settings.load_profile("placement_env")


@pytest.fixture(scope="session", autouse=True)
def _private_cache(tmp_path_factory):
    """Builds in tests go to a fresh cache, so cold builds are exercised and user caches untouched. The test
    processes of one run share it (entries are written atomically), so each graph is built once per run."""
    if os.environ.get("PYTEST_XDIST_WORKER"):  # basetemp is this run's pytest-N/popen-gwK: share pytest-N/graph_cache
        cache = tmp_path_factory.getbasetemp().parent / "graph_cache"
        cache.mkdir(exist_ok=True)
    else:
        cache = tmp_path_factory.mktemp("graph_cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PLACEMENT_ENV_CACHE", str(cache))
        yield


@pytest.fixture(scope="session", autouse=True)
def _harness_methods_on_one_torch_thread():
    """The agents' harness methods train on one torch thread here (their default two, beside the other
    test process, wait on each other: 20 s -> 70 s for one seq2seq row); a test of the default unsets it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AGENT_TORCH_THREADS", "1")
        yield


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Every test starts on one torch thread, whatever the machine's cores and the tests before it did
    (a command line run in-process sets its ``--threads``).

    The training tests assert what a seeded run learns, and a run's float sums, so its trajectory,
    depend on torch's thread count (MaskablePPO on the tiny env: 1.40 ms with one thread, 2.37 ms with
    two, against 2.33 ms for random placements). The networks are small, so extra threads only wait
    on each other on a shared CPU; the suite runs one test process per core. Denormals are not flushed
    at the start (a test that builds a seq2seq Trainer itself leaves its thread flushing them, which
    Hypothesis' float strategies refuse to run under).
    """
    try:
        import torch
    except ImportError:  # a set-up without the agents' extra: the tests that need torch skip themselves
        yield
        return
    from agents.common.torch_threads import torch_threads

    torch.set_flush_denormal(False)
    with torch_threads(1):
        yield


@pytest.fixture()
def tf1_mlp():
    """A TF1-style two-layer MLP training step (momentum SGD, co-located gradients)."""
    import tensorflow as tf

    graph = tf.Graph()
    with graph.as_default():
        x = tf.random.uniform([16, 32], name="x")
        w1 = tf.compat.v1.get_variable("w1", [32, 64])
        w2 = tf.compat.v1.get_variable("w2", [64, 8])
        hidden = tf.nn.relu(tf.matmul(x, w1))
        loss = tf.reduce_mean(tf.square(tf.matmul(hidden, w2)), name="loss")
        train = tf.compat.v1.train.MomentumOptimizer(0.1, 0.9).minimize(loss, colocate_gradients_with_ops=True)
        tf.compat.v1.add_to_collection("train_op", train)
        init = tf.compat.v1.global_variables_initializer()
    return graph, train.name, init.name


@pytest.fixture(scope="module")
def tiny():
    """The tiny RNNLM benchmark graph."""
    import placement_env as pe

    return pe.load_benchmark("rnnlm-tiny")


@pytest.fixture(scope="module")
def paper2():
    """The paper's CPU + 2 GPU machine."""
    import placement_env as pe

    return pe.load_cluster("paper-2gpu")


@pytest.fixture(scope="module")
def local2():
    """Two local TF worker processes (the measured runtime's cluster)."""
    import placement_env as pe

    return pe.load_cluster("local:2")


@pytest.fixture(scope="module")
def synth():
    """The tiny synthetic benchmark graph."""
    import placement_env as pe

    return pe.load_benchmark("synthetic-tiny")
