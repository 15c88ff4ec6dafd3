"""The placer network: a graph neural network over the group graph, self-attention over all groups, and one
categorical device choice per group.

* Embedding: a two-layer MLP of each group's features (:mod:`.graph_input`).
* Message passing (``layers`` rounds, as Placeto's and GDP's GraphSAGE-style encoders): each group averages a
  projection of its predecessors and, separately, of its successors, weighted by the bytes on the edge; the
  update is a residual MLP of [own, from predecessors, from successors] with layer norm. Rounds reach
  ``layers`` hops; the attention below reaches the rest of the graph.
* Self-attention (one pre-norm Transformer block, as GDP's attention placer): every group attends to every
  other, so groups far apart in the graph can coordinate (e.g. which chunk of the layers goes to which GPU).
  It is O(n^2) in memory: 1,261 groups take about 6 MB per head.
* Head: per-group logits over ``DEVICE_SLOTS`` device slots, -inf where the group may not go (no kernel, or
  a slot the cluster lacks), so a disallowed device is never chosen.
* Decoding (``decoder``, one of ``DECODERS``): ``"independent"``, each group's choice independent given the
  encoding (GDP's one-shot decoding), or ``"sequential"``, groups placed one after another with the logits
  adjusted by where the groups before went (:mod:`.decoder`, in the spirit of Placeto's step by step). Either
  way one batched pass scores any number of given placements (:meth:`GnnPlacerNet.group_log_probs`).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .decoder import PlacementAwareHead, decode, placement_features
from .graph_input import DEVICE_SLOTS, GraphInput

DECODERS = ("independent", "sequential")


@dataclass(frozen=True)
class Encoding:
    """One graph encoded: its ``inputs``, the masked ``logits`` [n, DEVICE_SLOTS] of the encoder and, for the
    sequential decoder, each group's ``context`` [n, width] for the placement-aware head (else None)."""

    inputs: GraphInput
    logits: torch.Tensor
    context: torch.Tensor | None


def _mean_by(index: torch.Tensor, values: torch.Tensor, weight: torch.Tensor, n: int) -> torch.Tensor:
    """[n, H]: the ``weight``-weighted mean of ``values`` [E, H] over the rows that share ``index`` (0 where none)."""
    total = values.new_zeros((n, values.shape[1])).index_add_(0, index, values * weight[:, None])
    mass = weight.new_zeros(n).index_add_(0, index, weight)
    return total / mass.clamp_min(1e-6)[:, None]


class MessagePassing(nn.Module):
    """One round: h <- LayerNorm(h + MLP([h, mean over predecessors, mean over successors]))."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.from_predecessor = nn.Linear(hidden, hidden)
        self.from_successor = nn.Linear(hidden, hidden)
        self.update = nn.Sequential(nn.Linear(3 * hidden, hidden), nn.ReLU(), nn.Linear(hidden, hidden))
        self.norm = nn.LayerNorm(hidden)

    def forward(self, h: torch.Tensor, inputs: GraphInput) -> torch.Tensor:
        n, src, dst, w = h.shape[0], inputs.edge_src, inputs.edge_dst, inputs.edge_weight
        incoming = _mean_by(dst, self.from_predecessor(h)[src], w, n)
        outgoing = _mean_by(src, self.from_successor(h)[dst], w, n)
        return self.norm(h + self.update(torch.cat([h, incoming, outgoing], dim=1)))


class GnnPlacerNet(nn.Module):
    """Group features and edges -> an :class:`Encoding`; placements drawn from it (:meth:`draw`) and scored
    (:meth:`group_log_probs`) by its decoder."""

    def __init__(self, feature_dim: int, *, hidden: int = 64, layers: int = 3, heads: int = 4,
                 decoder: str = "independent") -> None:
        super().__init__()
        if hidden < 1 or hidden % heads:
            raise ValueError(f"hidden={hidden!r}, heads={heads!r}: hidden must be a positive multiple of heads")
        if layers < 0:
            raise ValueError(f"layers={layers!r}; expected a number of message-passing rounds >= 0")
        if decoder not in DECODERS:
            raise ValueError(f"decoder={decoder!r}; expected one of {', '.join(DECODERS)}")
        self.feature_dim = feature_dim
        self.embed = nn.Sequential(nn.Linear(feature_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden))
        self.rounds = nn.ModuleList(MessagePassing(hidden) for _ in range(layers))
        self.attention_norm = nn.LayerNorm(hidden)
        self.attention = nn.MultiheadAttention(hidden, heads, batch_first=True)
        self.feed_forward = nn.Sequential(nn.LayerNorm(hidden), nn.Linear(hidden, 2 * hidden), nn.ReLU(),
                                          nn.Linear(2 * hidden, hidden))
        self.head = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.ReLU(), nn.Linear(hidden, DEVICE_SLOTS))
        self.placement_aware = PlacementAwareHead(2 * hidden) if decoder == "sequential" else None

    @property
    def decodes_independently(self) -> bool:
        """Each group's device log-probabilities are the same whatever the other groups' devices."""
        return self.placement_aware is None

    def forward(self, inputs: GraphInput) -> Encoding:
        """The encoding of ``inputs``: logits [n, DEVICE_SLOTS], -inf where ``inputs.allowed`` is False."""
        if inputs.features.shape[1] != self.feature_dim:
            raise ValueError(f"features have {inputs.features.shape[1]} columns; this network takes {self.feature_dim}")
        h = self.embed(inputs.features)
        for layer in self.rounds:
            h = layer(h, inputs)
        x = self.attention_norm(h)[None]
        g = h + self.attention(x, x, x, need_weights=False)[0][0]
        g = g + self.feed_forward(g)
        encodings = torch.cat([h, g], dim=1)
        logits = self.head(encodings).masked_fill(~inputs.allowed, float("-inf"))
        context = self.placement_aware.context(encodings) if self.placement_aware is not None else None
        return Encoding(inputs, logits, context)

    def draw(self, encoding: Encoding, k: int, generator: torch.Generator | None = None, *,
             greedy: bool = False, override: torch.Tensor | None = None) -> torch.Tensor:
        """[k, n] int64 placements sampled from the policy (or, with ``greedy``, its likeliest: each group's
        likeliest device, given the groups before it when decoding is sequential); no gradients. ``override``
        [k, n]: where >= 0, the device a group takes instead of the policy's (later groups of a sequential decoder
        see it)."""
        if k < 1:
            raise ValueError(f"k={k!r}; expected at least one placement")
        if self.placement_aware is not None:
            return decode(self.placement_aware, encoding.context, encoding.logits, encoding.inputs, k, generator,
                          greedy, override)
        probs = torch.log_softmax(encoding.logits.detach(), dim=1).exp()
        if greedy:
            actions = probs.argmax(dim=1).expand(k, -1).clone()
        else:
            actions = torch.multinomial(probs, k, replacement=True, generator=generator).T
        return actions if override is None else torch.where(override >= 0, override, actions)

    def group_log_probs(self, encoding: Encoding, actions: torch.Tensor) -> torch.Tensor:
        """[K, n, DEVICE_SLOTS]: each group's device log-probabilities (-inf where masked) when ``actions``
        [K, n] placed the groups before it (the same for every K when decoding is independent)."""
        if not bool(torch.isfinite(encoding.logits).any(dim=1).all()):
            raise ValueError("some group has no allowed device")
        logits = encoding.logits[None].expand(actions.shape[0], -1, -1)
        if self.placement_aware is not None:
            features = placement_features(encoding.inputs, actions, DEVICE_SLOTS)
            logits = logits + self.placement_aware(encoding.context, features)
        return torch.log_softmax(logits, dim=2)
