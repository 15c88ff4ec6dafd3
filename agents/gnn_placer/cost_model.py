"""A learned cost model: a graph neural network that reads a group graph and placements of it and predicts each
placement's step time, log(runtime / lower bound), without running anything.

Why: the placer's own output carries patterns over from the train families, right or wrong (on ResNet-50 /
4 GPUs it alternates devices as it learned to on Inception-V3's parallel branches, README). A cost model sees
what a placement costs in seconds (each group's compute on the device it is given, each edge's transfer time
when it crosses devices), quantities whose effect on the step time is the same on every graph, and is trained by
regression on simulated runtimes of the train tasks' placements only (:mod:`.cost_training`). Local search on it
(:mod:`.refine`) then corrects the placer's zero-shot answer with no evaluation on the new graph. The idea of a
cost network trained on measured costs and used in place of measurements is DreamShard's (Zha et al., NeurIPS
2022, for embedding-table placement); the network here is ours.

Inputs (:class:`CostInput`, from the core's group graph, :func:`placement_env.group_graph`; seconds are divided by
the graph's lower bound, so graphs of every size share one scale):

* per group: its compute seconds on the device it is given and on its fastest GPU, whether that device is a GPU,
  its resident and output bytes against one GPU's memory, its position in topological order;
* per edge (every pair of groups that exchange bytes, in the direction the bytes go, back edges included): the
  bytes (log scale) and the transfer time (link latency + bytes / bandwidth) when the two groups are on different
  devices, zero when they share one;
* per device: the summed compute, the transfer time in and out, and whether it is a GPU.

Network: an embedding of each group's inputs, ``layers`` rounds of message passing in which each edge's message
is a function of the sending group and the edge's inputs (so a message says how much time crossing that edge
costs), sums of the groups' states per device, and a readout of the devices' max and sum, the graph's mean and
the largest device load (compute plus transfers in). Device slots are pooled with max and sum, so relabelling
devices of one kind does not change the prediction.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.nn import functional

from placement_env import Problem, group_graph

NODE_INPUTS = 7
EDGE_INPUTS = 3
DEVICE_INPUTS = 5
READOUT_INPUTS = 3
# predict() runs placements in chunks whose [placements, edges, width] message tensors hold about this many bytes:
# the messages are memory-bound, and chunks that stay in cache are the fastest (one core of this VM, the committed
# cost model: Transformer, 782 edges, 1.1 ms per placement in chunks of 8-16 against 3.6 in chunks of 512;
# ResNet-50, 286 edges, 0.34 ms in chunks of 32 against 0.63; the same predictions to the last bit).
CHUNK_BYTES = 2**21


@dataclass(frozen=True)
class CostInput:
    """One graph on one cluster as the cost model reads it: ``seconds`` [n, D] each group's compute time on each
    device and ``fastest_gpu`` [n] on its fastest GPU (seconds / ``lower_bound``), ``memory`` [n] its resident and
    output bytes against one GPU's memory, ``position`` [n], the edges ``src`` / ``dst`` [E] with ``log_bytes`` [E]
    and ``transfer`` [E, D, D] (seconds / ``lower_bound`` from device i to j), and ``is_gpu`` [D]."""

    seconds: torch.Tensor
    fastest_gpu: torch.Tensor
    memory: torch.Tensor
    position: torch.Tensor
    src: torch.Tensor
    dst: torch.Tensor
    log_bytes: torch.Tensor
    transfer: torch.Tensor
    is_gpu: torch.Tensor
    lower_bound: float

    @property
    def n_groups(self) -> int:
        return int(self.seconds.shape[0])

    @property
    def n_devices(self) -> int:
        return int(self.seconds.shape[1])


def cost_input(problem: Problem) -> CostInput:
    """The :class:`CostInput` of ``problem``'s graph and cluster (no evaluation is spent)."""
    cluster = problem.cluster
    groups = group_graph(problem.graph, cluster, problem.costs)
    n = groups.n_groups
    is_gpu = cluster.is_gpu
    if not is_gpu.any():
        raise ValueError(f"cluster {cluster.name!r} has no GPU; the cost model places on GPU machines")
    lower = float(problem.lower_bound())
    order = np.lexsort((groups.src, groups.dst))  # by receiving group, then sender
    src, dst = groups.src[order], groups.dst[order]
    volume = groups.bytes[order].astype(np.float64)
    latency = np.asarray(cluster.latency, np.float64)
    bandwidth = np.asarray(cluster.bandwidth, np.float64)
    transfer = (latency[None] + volume[:, None, None] / bandwidth[None]) / lower
    gpu_memory = float(np.asarray(cluster.memory_bytes, np.float64)[is_gpu].min())
    seconds = groups.seconds

    def tensor(values: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(values, np.float32))

    return CostInput(seconds=tensor(seconds / lower), fastest_gpu=tensor(seconds[:, is_gpu].min(axis=1) / lower),
                     memory=tensor(groups.memory_bytes.astype(np.float64) / gpu_memory),
                     position=tensor(np.arange(n) / n),
                     src=torch.from_numpy(src), dst=torch.from_numpy(dst),
                     log_bytes=tensor(np.log10(1.0 + volume) / 12.0), transfer=tensor(transfer),
                     is_gpu=tensor(is_gpu), lower_bound=lower)


def _mean_by(index: torch.Tensor, values: torch.Tensor, n: int) -> torch.Tensor:
    """[B, n, H]: the mean of ``values`` [B, E, H] over the edges that share ``index`` (0 where none)."""
    total = values.new_zeros((values.shape[0], n, values.shape[2])).index_add_(1, index, values)
    count = values.new_zeros(n).index_add_(0, index, values.new_ones(values.shape[1])).clamp_min(1.0)
    return total / count[None, :, None]


class CostNet(nn.Module):
    """(:class:`CostInput`, placements [B, n]) -> [B] predicted log(runtime / lower bound)."""

    def __init__(self, hidden: int = 64, layers: int = 3) -> None:
        super().__init__()
        if hidden < 1 or layers < 1:
            raise ValueError(f"hidden={hidden!r}, layers={layers!r}; expected positive integers")
        self.hidden, self.layers = hidden, layers
        self.embed = nn.Sequential(nn.Linear(NODE_INPUTS, hidden), nn.ReLU(), nn.Linear(hidden, hidden))
        # a message is ReLU(W [state of the other group, edge inputs] + b), computed as ReLU((W_h h)[other] + W_e e + b):
        # the same function, with the group-state product taken once per group instead of once per edge
        self.message_in = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(layers))
        self.message_out = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(layers))
        self.edge_in = nn.ModuleList(nn.Linear(EDGE_INPUTS, hidden, bias=False) for _ in range(layers))
        self.edge_out = nn.ModuleList(nn.Linear(EDGE_INPUTS, hidden, bias=False) for _ in range(layers))
        self.update = nn.ModuleList(nn.Sequential(nn.Linear(3 * hidden, hidden), nn.ReLU(), nn.Linear(hidden, hidden))
                                    for _ in range(layers))
        self.norms = nn.ModuleList(nn.LayerNorm(hidden) for _ in range(layers))
        self.device = nn.Sequential(nn.Linear(hidden + DEVICE_INPUTS, hidden), nn.ReLU(), nn.Linear(hidden, hidden))
        self.readout = nn.Sequential(nn.Linear(3 * hidden + READOUT_INPUTS, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, inputs: CostInput, placements: torch.Tensor) -> torch.Tensor:
        P = placements
        if P.dim() != 2 or P.shape[1] != inputs.n_groups:
            raise ValueError(f"placements have shape {tuple(P.shape)}; expected [B, {inputs.n_groups}]")
        B, n, D = P.shape[0], inputs.n_groups, inputs.n_devices
        on_device = functional.one_hot(P, D).float()  # [B, n, D]
        own = inputs.seconds.gather(1, P.T).T  # [B, n]: each group's compute on its device
        nodes = torch.stack([own, inputs.fastest_gpu.expand(B, n), inputs.is_gpu[P], inputs.memory.expand(B, n),
                             inputs.position.expand(B, n), own * 10.0, torch.log10(1e-4 + own)], dim=2)
        sender, receiver = P[:, inputs.src], P[:, inputs.dst]
        crosses = (sender != receiver).float()
        transfer = inputs.transfer[torch.arange(inputs.src.numel())[None], sender, receiver] * crosses  # [B, E]
        edges = torch.stack([inputs.log_bytes.expand(B, -1) * crosses, crosses, transfer * 10.0], dim=2)
        h = self.embed(nodes)
        for k, (update, norm) in enumerate(zip(self.update, self.norms)):
            incoming = torch.relu(self.message_in[k](h)[:, inputs.src] + self.edge_in[k](edges))
            outgoing = torch.relu(self.message_out[k](h)[:, inputs.dst] + self.edge_out[k](edges))
            h = norm(h + update(torch.cat([h, _mean_by(inputs.dst, incoming, n), _mean_by(inputs.src, outgoing, n)], 2)))
        compute = torch.einsum("bn,bnd->bd", own, on_device)
        received = torch.zeros(B, D).scatter_add_(1, receiver, transfer)
        sent = torch.zeros(B, D).scatter_add_(1, sender, transfer)
        load = compute + received
        devices = self.device(torch.cat([torch.einsum("bnh,bnd->bdh", h, on_device) / n, compute[..., None],
                                         received[..., None], sent[..., None], load[..., None],
                                         inputs.is_gpu.expand(B, D)[..., None]], 2))
        summary = torch.cat([devices.max(1).values, devices.sum(1), h.mean(1), compute.max(1, keepdim=True).values,
                             transfer.sum(1, keepdim=True), load.max(1, keepdim=True).values], 1)
        return self.readout(summary)[:, 0]

    def predict(self, inputs: CostInput, placements: np.ndarray, chunk: int | None = None) -> np.ndarray:
        """[B] predicted log(runtime / lower bound) of ``placements`` [B, n] (no gradients, ``chunk`` placements at
        a time; by default as many as keep a message tensor near ``CHUNK_BYTES``)."""
        placements = torch.as_tensor(np.asarray(placements, np.int64))
        if chunk is None:
            chunk = max(1, CHUNK_BYTES // (max(1, inputs.src.numel()) * self.hidden * 4))
        with torch.no_grad():
            return torch.cat([self(inputs, placements[i:i + chunk]) for i in range(0, len(placements), chunk)]
                             ).numpy().astype(np.float64)
