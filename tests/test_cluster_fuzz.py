"""Property-based tests of what enters from outside: cluster JSON (random objects, mutated presets, random
bytes) either loads into a Cluster whose every field is in its physical range or fails with
ClusterConfigError / UnknownClusterError; a placement of any dtype, shape and values either evaluates
or fails with InvalidPlacementError. Never another exception."""
from __future__ import annotations

import copy
import json
import os
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import placement_env as pe
from placement_env.cluster import PRESETS, Cluster
from placement_env.cluster.checks import (BANDWIDTH_RANGE, CONCURRENCY_RANGE, FLOPS_RANGE, FRACTION_RANGE,
                                          MAX_DEVICES, MEMORY_RANGE, SECONDS_RANGE)
from placement_env.cluster.schema import (CLUSTER_OPTIONAL, CLUSTER_REQUIRED, DEVICE_OPTIONAL, DEVICE_REQUIRED,
                                          LINK_OPTIONAL, LINK_REQUIRED, TOPOLOGY_LINK_OPTIONAL, TOPOLOGY_LINK_REQUIRED)

# Each property runs in a few seconds; no example database is written into the checkout.
FEW = settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
LOADER_ERRORS = (pe.ClusterConfigError, pe.UnknownClusterError)

KEYS = sorted({*CLUSTER_REQUIRED, *CLUSTER_OPTIONAL, *DEVICE_REQUIRED, *DEVICE_OPTIONAL, *LINK_REQUIRED,
               *LINK_OPTIONAL, *TOPOLOGY_LINK_REQUIRED, *TOPOLOGY_LINK_OPTIONAL, "switches", "per_tensor_s"})
# Numbers at and past the edges of every range, and past what a float holds.
EDGES = [0, -1, 1, 0.5, 1e-4, 1e-5, 60, 61.0, 1e3, 999.0, 1e16, 1e17, 1e18, 1e19, 2**50, 2**50 + 1, 4096, 4097,
         1e308, -0.0, 5e-324, 10**400, float("nan"), float("inf"), float("-inf"), True, False]
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.sampled_from(EDGES),
                    st.text(max_size=8), st.sampled_from(["CPU", "GPU", "cpu:0", "gpu:0", "gpu:1", "/device:GPU:0"]))
keys = st.one_of(st.sampled_from(KEYS), st.text(max_size=6))
PRESET_DICTS = {name: json.loads(make().to_json()) for name, make in PRESETS.items()}
PRESET_TEXTS = [make().to_json().encode() for make in PRESETS.values()]
json_values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                            st.dictionaries(keys, inner, max_size=5)), max_leaves=25)


def assert_in_range(cluster: Cluster) -> None:
    """Every numeric field of ``cluster`` lies in the range its check states."""
    def within(value, limits):
        return limits[0] <= value <= limits[1]

    assert 1 <= cluster.n_devices <= MAX_DEVICES
    for d in cluster.devices:
        assert within(d.peak_flops, FLOPS_RANGE) and within(d.memory_bandwidth, BANDWIDTH_RANGE)
        assert within(d.memory_bytes, MEMORY_RANGE) and within(d.concurrency, CONCURRENCY_RANGE)
        assert within(d.op_overhead_s, SECONDS_RANGE)
        assert all(within(getattr(d, key), FRACTION_RANGE)
                   for key in ("compute_efficiency", "memory_efficiency", "op_share"))
    off = ~np.eye(cluster.n_devices, dtype=bool)
    assert np.all((cluster.bandwidth[off] >= BANDWIDTH_RANGE[0]) & (cluster.bandwidth[off] <= BANDWIDTH_RANGE[1]))
    assert np.all((cluster.latency[off] >= SECONDS_RANGE[0]) & (cluster.latency[off] <= SECONDS_RANGE[1]))
    assert within(cluster.transfer_overhead_s, SECONDS_RANGE)
    if cluster.host_transfer is not None:
        assert within(cluster.host_transfer.per_tensor_s, SECONDS_RANGE)
        assert within(cluster.host_transfer.bandwidth, BANDWIDTH_RANGE)
    if cluster.topology is not None:
        for link in cluster.topology.links:
            assert within(link.bandwidth, BANDWIDTH_RANGE) and within(link.latency, SECONDS_RANGE)
    assert Cluster.from_json(cluster.to_json()) == cluster


def load_or_refuse(spec) -> None:
    """``load_cluster(spec)`` loads a cluster in range or raises one of the loader's errors."""
    try:
        cluster = pe.load_cluster(spec)
    except LOADER_ERRORS:
        return
    assert_in_range(cluster)


@FEW
@given(st.dictionaries(keys, json_values, max_size=8))
def test_random_json_objects_load_in_range_or_are_refused(data):
    load_or_refuse(data)


def paths(node, path=()):
    """The path (keys and indices) of every value inside ``node``, ``node`` itself first."""
    yield path
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in items:
        yield from paths(value, (*path, key))


def mutate(data, draw):
    """``data`` with one value inside it scaled by a power of ten (a unit slip: often still in range, often
    not), replaced (often by a number at or past a range's edge), removed, or given a key."""
    *head, last = draw(st.sampled_from(list(paths(data))[1:]))
    parent = data
    for key in head:
        parent = parent[key]
    node = parent[last]
    action = draw(st.sampled_from(["scale"] * 3 + ["replace"] * 3 + ["remove", "add"]))
    if action == "scale" and isinstance(node, (int, float)) and not isinstance(node, bool) and abs(node) < 1e300:
        parent[last] = node * 10.0 ** draw(st.integers(-4, 4))
    elif action == "remove":
        del parent[last]
    elif action == "add" and isinstance(node, dict):
        node[draw(st.one_of(st.sampled_from(KEYS), keys))] = draw(json_values)
    else:
        parent[last] = draw(st.one_of(st.sampled_from(EDGES), json_values))
    return data


@FEW
@given(st.sampled_from(sorted(PRESETS)), st.data())
def test_mutated_presets_load_in_range_or_are_refused(name, data):
    mutated = copy.deepcopy(PRESET_DICTS[name])
    for _ in range(data.draw(st.integers(1, 3))):
        mutated = mutate(mutated, data.draw)
    load_or_refuse(mutated)



def load_bytes(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "cluster.json")
        with open(path, "wb") as file:
            file.write(data)
        load_or_refuse(path)


@FEW
@given(st.binary(max_size=2000))
def test_random_bytes_are_refused(data):
    load_bytes(data)


@FEW
@given(st.sampled_from(PRESET_TEXTS), st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=4),
       st.integers(0, 10**6))
def test_preset_files_with_bytes_changed_or_cut_load_in_range_or_are_refused(text, changes, cut):
    data = bytearray(text)
    for position, byte in changes:
        data[position % len(data)] = byte
    load_bytes(bytes(data[: max(cut % (len(data) + 1), 1)]))


# ---- placements --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny():
    return pe.load_benchmark("rnnlm-tiny", max_groups=6), pe.load_cluster("paper-2gpu")


dtypes = st.one_of(hnp.integer_dtypes(), hnp.unsigned_integer_dtypes(), hnp.floating_dtypes(), hnp.boolean_dtypes(),
                   hnp.complex_number_dtypes(), hnp.datetime64_dtypes(), hnp.timedelta64_dtypes(),
                   hnp.byte_string_dtypes(max_len=3),
                   hnp.unicode_string_dtypes(max_len=3))


def placements(n_groups: int):
    """Arrays of any dtype and shape (most of them one row of ``n_groups``), plain lists of mixed values, and
    integer rows with devices in and out of range."""
    shapes = st.one_of(st.just((n_groups,)), hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=8))
    return st.one_of(
        hnp.arrays(dtypes, shapes),
        hnp.arrays(st.sampled_from([np.int8, np.int32, np.int64]), st.just((n_groups,)), elements=st.integers(-2, 4)),
        hnp.arrays(np.uint64, st.just((n_groups,)), elements=st.sampled_from([0, 1, 2, 3, 2**63, 2**64 - 1])),
        st.lists(st.one_of(st.integers(-3, 5), st.floats(), st.text(max_size=2), st.none(), st.booleans()),
                 max_size=n_groups + 2),
    )


@settings(FEW, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_placement_evaluates_or_is_an_invalid_placement(tiny, data):
    graph, cluster = tiny
    placement = data.draw(placements(graph.n_groups))
    try:
        checked = pe.check_placement(graph, cluster, placement)
    except pe.InvalidPlacementError:
        checked = None
    try:
        measurement = pe.evaluate(graph, cluster, placement)
    except pe.InvalidPlacementError:
        assert checked is None, "check_placement accepted what evaluate refused"
        return
    assert checked is not None and np.array_equal(measurement.placement, checked)
    assert measurement.ok or measurement.failure in ("oom", "no_kernel")


def test_a_timedelta_placement_is_invalid(tiny):
    graph, cluster = tiny
    with pytest.raises(pe.InvalidPlacementError, match="dtype timedelta64"):
        pe.evaluate(graph, cluster, np.full(graph.n_groups, np.timedelta64("NaT")))
