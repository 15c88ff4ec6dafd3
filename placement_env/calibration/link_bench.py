"""The link microbenchmark on real local TF workers (``placement-env linkbench``): the step time of one worker
sending one large tensor to others, against the same step on one worker.

Each graph has a producer on worker 0 (``payload * 1.5``, a variable of the given size) and one consumer per
destination on workers 1..k (``reduce_sum`` of the product, added into a scalar variable there: a stateful end,
so grappler cannot prune the consumer); a step sends the product once to each destination. Each row of the result
is one graph: its tensor ``bytes``, its ``destinations``, the measured step time split over the workers
(``measured_s``) and on worker 0 alone (``one_worker_s``), medians after warm-up.

:func:`.link_rows.host_bandwidth_from_links` reads the host transfer's bandwidth from the one-destination rows,
which ``placement-env calibrate --link-runs FILE`` then takes instead of fitting it. Run it on an otherwise idle
machine: anything else running on the cores changes the times.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..cluster import load_cluster
from ..opgraph import OpGraph
from ..output_paths import write_output_file
from ..runtime.measured import MeasuredRuntime

__all__ = ["fanout_graph", "fanout_placement", "measure_links", "write_link_runs"]

DEFAULT_MEGABYTES = (4.0, 16.0, 64.0)
DEFAULT_WORKERS = 3
DEFAULT_STEPS = 12


def fanout_graph(n_bytes: int, destinations: int) -> OpGraph:
    """The OpGraph of one step: a producer of an ``n_bytes`` tensor and ``destinations`` consumers of it."""
    import tensorflow as tf

    from ..tf_import import from_tf

    graph = tf.Graph()
    with graph.as_default():
        payload = tf.compat.v1.get_variable("payload", [n_bytes // 4], initializer=tf.compat.v1.zeros_initializer())
        product = tf.multiply(payload, 1.5, name="product")
        updates = []
        for i in range(destinations):
            with tf.compat.v1.variable_scope(f"consumer_{i}"):
                total = tf.compat.v1.get_variable("total", [], initializer=tf.compat.v1.zeros_initializer())
                updates.append(total.assign_add(tf.reduce_sum(product), read_value=False))
        train_op = tf.group(*updates, name="train_op")
        tf.compat.v1.add_to_collection("train_op", train_op)
        tf.compat.v1.global_variables_initializer()
    init = [op.name for op in graph.get_operations() if op.type == "NoOp" and op.name.startswith("init")][0]
    return from_tf(graph, name=f"fanout-{destinations}x{n_bytes}", init_op=init, max_groups=10_000)


def fanout_placement(graph: OpGraph, destinations: int) -> np.ndarray:
    """The groups of consumer i's ops on worker i + 1; everything else on worker 0."""
    placement = np.zeros(graph.n_groups, dtype=np.int64)
    for i in range(destinations):
        ops = [k for k, name in enumerate(graph.op_names) if str(name).startswith(f"consumer_{i}/")]
        placement[np.unique(graph.group[ops])] = i + 1
    return placement


def measure_links(megabytes: Sequence[float] = DEFAULT_MEGABYTES, workers: int = DEFAULT_WORKERS,
                  steps: int = DEFAULT_STEPS, progress: bool = True) -> list[dict[str, Any]]:
    """One row per tensor size in ``megabytes`` and number of destinations (1 to ``workers - 1``), measured on
    ``workers`` local TF workers over ``steps`` steps (a third more as warm-up): ``bytes``, ``destinations``,
    ``measured_s``, ``one_worker_s``, and the ``graph`` and ``placement`` measured (for a simulation to compare)."""
    from tqdm import tqdm

    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 2:
        raise ValueError(f"workers={workers!r}; expected an integer >= 2 (a sender and a receiver)")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps={steps!r}; expected a positive integer")
    if not megabytes or not all(isinstance(mb, (int, float)) and 0 < mb < 1e5 for mb in megabytes):
        raise ValueError(f"megabytes={list(megabytes)!r}; expected tensor sizes in MB above 0 (and below 100,000)")
    cases = [(int(mb * 1e6) // 4 * 4, k) for mb in megabytes for k in range(1, workers)]
    rows = []
    with MeasuredRuntime(load_cluster(f"local:{workers}"), steps=steps, warmup=steps // 3) as runtime:
        for n_bytes, k in tqdm(cases, desc="measure", unit="graph", disable=not progress):
            graph = fanout_graph(n_bytes, k)
            placement = fanout_placement(graph, k)
            split, local = runtime.measure(graph, placement), runtime.measure(graph, np.zeros_like(placement))
            rows.append({"bytes": n_bytes, "destinations": k, "measured_s": split.runtime_s,
                         "one_worker_s": local.runtime_s, "graph": graph, "placement": placement})
    return rows


def write_link_runs(path: str | os.PathLike, rows: Sequence[dict[str, Any]], **fields: Any) -> Path:
    """Write the rows (without their graphs and placements) to ``path`` as the JSON that
    ``placement-env calibrate --link-runs`` reads, ``{"rows": [...], **fields}``."""
    kept = [{k: v for k, v in row.items() if k not in ("graph", "placement")} for row in rows]
    return write_output_file(path, json.dumps({**fields, "rows": kept}, indent=1).encode("utf-8"))
