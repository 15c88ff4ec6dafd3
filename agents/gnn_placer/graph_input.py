"""What the placer reads about one graph on one cluster: per-group features, the group graph's edges and the
devices each group may go to, as tensors (:class:`GraphInput`, built by :func:`graph_input`).

Features per group (``feature_dim`` columns, the same for every graph and cluster of up to ``DEVICE_SLOTS``
devices):

* the seq2seq agent's :func:`agents.reinforce_seq2seq.group_features` (the env's op-type histogram, output
  shapes, heaviest neighbours and their traffic, compute and memory shares, topological position), with its
  ``allowed`` columns padded to ``DEVICE_SLOTS``;
* ``POSITION_FREQUENCIES`` sine/cosine pairs of the topological position, so attention can tell early from late
  groups (the layer-wise splits that fit memory are contiguous in that order);
* the group's resident and produced bytes against one GPU's memory (log scale): the env's memory fields are
  shares of the largest device, the host's 256 GiB on the K80 machines, which hides what fits a GPU;
* where the group lies in the graph's memory and compute, for splits that carry over between graphs: with
  every group that may go on a GPU on the first GPU, the group's bytes alive at that GPU's sequential peak
  (:func:`placement_env.sequential_memory`) against its memory (log scale), and the shares of those bytes and
  of the GPU compute time held by the groups before it in topological order (a contiguous split balanced by
  memory over g GPUs puts the group on GPU floor(g x its memory share));
* graph-level context, the same on every row: the number of GPUs, the number of groups, the whole graph's
  resident and produced bytes against one GPU's memory, and that single-GPU sequential peak against one GPU's
  memory and against all the GPUs' together (does it fit one GPU, two, four?).

Edges are those of the core's group graph (:func:`placement_env.group_graph`), weighted by ``EDGE_FLOOR`` +
log10(1 + bytes) / 12 so dependency-only edges still pass messages.

What the sequential decoder (:mod:`.decoder`) adds up over the groups placed before each one (groups are
numbered in topological order, the order it places them in):

* ``earlier_src`` -> ``earlier_dst`` with ``earlier_share``: each pair of groups that exchange bytes (either
  way), from the earlier group to the later one, with the bytes between them as a share of all the bytes the
  later group exchanges with any group;
* ``compute_load``: the group's share of the graph's GPU compute time times the number of GPUs (a device whose
  groups sum to 1 holds an even share);
* ``memory_load``: the group's bytes alive at the single-GPU sequential peak (above) against one GPU's memory
  (the whole graph's sum is that peak against one GPU: a device past about 1 is full);
* ``gpu_slots``: which device slots are GPUs.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from agents.reinforce_seq2seq import group_features
from placement_env import Problem, graph_features, group_graph, sequential_memory

DEVICE_SLOTS = 9  # a CPU and up to 8 GPUs: device k of the cluster is output slot k
POSITION_FREQUENCIES = 4
EDGE_FLOOR = 0.1


@dataclass(frozen=True)
class GraphInput:
    """One graph on one cluster as tensors: ``features`` [n, F] float32, ``edge_src`` / ``edge_dst`` [E] int64,
    ``edge_weight`` [E] float32, ``allowed`` [n, DEVICE_SLOTS] bool (False on slots the cluster lacks); for the
    sequential decoder ``earlier_src`` / ``earlier_dst`` [P] int64 (earlier_src < earlier_dst),
    ``earlier_share`` [P], ``compute_load`` / ``memory_load`` [n] float32 and ``gpu_slots`` [DEVICE_SLOTS] bool."""

    features: torch.Tensor
    edge_src: torch.Tensor
    edge_dst: torch.Tensor
    edge_weight: torch.Tensor
    allowed: torch.Tensor
    earlier_src: torch.Tensor
    earlier_dst: torch.Tensor
    earlier_share: torch.Tensor
    compute_load: torch.Tensor
    memory_load: torch.Tensor
    gpu_slots: torch.Tensor

    @property
    def n_groups(self) -> int:
        return int(self.features.shape[0])


def _log_ratio(values: np.ndarray, unit: float) -> np.ndarray:
    """log10(values / unit) mapped from [1e-6, 1e2] to about [0, 1]."""
    return ((np.log10(1e-6 + np.asarray(values, np.float64) / unit) + 6.0) / 8.0).astype(np.float32)


def _before(share: np.ndarray) -> np.ndarray:
    """[n] float32: the sum of ``share`` over the groups before each one (an exclusive prefix sum)."""
    return (np.cumsum(share) - share).astype(np.float32)


def _single_gpu_shares(problem: Problem, fields: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per group, with every group that may go on a GPU on the first GPU (the rest on the CPU): its share of the
    bytes alive at that GPU's sequential peak, its share of the graph's GPU compute time, and those bytes.
    With no GPU, the first device stands in for it."""
    cluster = problem.cluster
    gpu = next((k for k, d in enumerate(cluster.devices) if d.kind == "GPU"), 0)
    allowed = np.asarray(problem.allowed, bool)
    placement = np.where(allowed[:, gpu], gpu, np.argmax(allowed, axis=1))
    peak = sequential_memory(problem.graph, cluster, placement).at_peak_bytes[:, gpu].astype(np.float64)
    compute = np.asarray(fields["compute"], np.float64)[:problem.graph.n_groups, 1]
    return peak / max(peak.sum(), 1.0), compute / max(compute.sum(), 1e-12), peak


def _earlier_pairs(n: int, src: np.ndarray, dst: np.ndarray, volume: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pairs (earlier, later) of groups that exchange bytes either way, and those bytes as a share of all the
    bytes the later group exchanges."""
    src, dst, volume = np.asarray(src, np.int64), np.asarray(dst, np.int64), np.asarray(volume, np.float64)
    exchanged = np.bincount(src, volume, n) + np.bincount(dst, volume, n)
    keep = (src != dst) & (volume > 0)
    early, late = np.minimum(src, dst)[keep], np.maximum(src, dst)[keep]
    pair, index = np.unique(late * n + early, return_inverse=True)
    bytes_between = np.bincount(index, volume[keep], pair.size)
    later = pair // n
    return pair % n, later, (bytes_between / exchanged[later]).astype(np.float32)


def graph_input(problem: Problem) -> GraphInput:
    """The :class:`GraphInput` of ``problem``'s graph and cluster (no evaluation is spent)."""
    graph, cluster = problem.graph, problem.cluster
    n, n_devices = graph.n_groups, len(cluster.devices)
    if n_devices > DEVICE_SLOTS:
        raise ValueError(f"cluster {cluster.name!r} has {n_devices} devices; the GNN placer has {DEVICE_SLOTS} "
                         f"device slots (a CPU and up to {DEVICE_SLOTS - 1} GPUs)")
    allowed = np.zeros((n, DEVICE_SLOTS), bool)
    allowed[:, :n_devices] = problem.allowed
    fields = graph_features(graph, cluster, problem.costs.seconds, n).fields
    gpus = [d for d in cluster.devices if d.kind == "GPU"]
    gpu_memory = float(min(d.memory_bytes for d in gpus)) if gpus else float(max(d.memory_bytes for d in cluster.devices))
    groups = group_graph(graph, cluster, problem.costs)
    resident = groups.resident_bytes.astype(np.float64)
    produced = groups.output_bytes.astype(np.float64)
    memory_share, compute_share, peak = _single_gpu_shares(problem, fields)
    angle = np.pi * np.asarray(fields["position"], np.float64)[:n].reshape(n, 1) * 2.0 ** np.arange(POSITION_FREQUENCIES)
    context = np.array([len(gpus) / (DEVICE_SLOTS - 1), np.log10(n) / 4.0,
                        *_log_ratio([resident.sum(), produced.sum(), peak.sum()], gpu_memory),
                        min(peak.sum() / (gpu_memory * max(len(gpus), 1)), 4.0) / 4.0], np.float32)
    features = np.concatenate([
        group_features(fields, n, allowed),
        np.sin(angle).astype(np.float32), np.cos(angle).astype(np.float32),
        _log_ratio(np.stack([resident, produced], axis=1), gpu_memory),
        _log_ratio(peak, gpu_memory)[:, None], _before(memory_share)[:, None], _before(compute_share)[:, None],
        np.broadcast_to(context, (n, context.size)),
    ], axis=1)
    src, dst, volume = np.array(groups.src), np.array(groups.dst), groups.bytes  # torch takes writable arrays
    weight = EDGE_FLOOR + groups.log_bytes()
    earlier_src, earlier_dst, earlier_share = _earlier_pairs(n, src, dst, volume)
    gpu_slots = np.zeros(DEVICE_SLOTS, bool)
    gpu_slots[:n_devices] = cluster.is_gpu
    return GraphInput(features=torch.from_numpy(np.ascontiguousarray(features, np.float32)),
                      edge_src=torch.from_numpy(src), edge_dst=torch.from_numpy(dst),
                      edge_weight=torch.from_numpy(weight.astype(np.float32)),
                      allowed=torch.from_numpy(allowed),
                      earlier_src=torch.from_numpy(earlier_src), earlier_dst=torch.from_numpy(earlier_dst),
                      earlier_share=torch.from_numpy(earlier_share),
                      compute_load=torch.from_numpy((compute_share * max(len(gpus), 1)).astype(np.float32)),
                      memory_load=torch.from_numpy((peak / gpu_memory).astype(np.float32)),
                      gpu_slots=torch.from_numpy(gpu_slots))
