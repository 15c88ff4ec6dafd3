"""Train SB3's PPO with a message-passing features extractor on the env's graph observation.

``DevicePlacement-v0`` with ``graph_observation=True`` adds the group graph as a padded edge list
(``edge_index``, ``edge_bytes``, ``edge_mask``) to its ``Dict`` observation. ``GroupGraphExtractor``
embeds every group from its own fields, then runs ``rounds`` of message passing over the edges in
plain torch: each group averages messages from its predecessors and, through separate weights,
from its successors, every message made from the neighbour's embedding and the edge's bytes.
The policy sees every group's final embedding (the oneshot action has one device per group) plus
their masked mean and the device features.

    python examples/sb3_graph_extractor.py --timesteps 512      # rnnlm-tiny on paper-2gpu, ~30 s of CPU

Needs the ``agents`` extra (torch, stable-baselines3). On a busy machine ``OMP_NUM_THREADS=1`` is
faster: networks this small gain nothing from more torch threads.
"""
from __future__ import annotations

import argparse
import sys
from typing import Sequence

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn

import placement_env  # noqa: F401  (registers the env ids)
from agents.sb3 import batch_action_distribution

# Per-group fields that describe a group itself; its neighbourhood comes from the edges instead.
NODE_FIELDS = ("op_types", "output_shapes", "compute", "memory", "position", "placement", "current")


def gather_rows(h: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """h [B, S, H] at index [B, E] -> [B, E, H]."""
    return torch.gather(h, 1, index.unsqueeze(-1).expand(-1, -1, h.shape[-1]))


def sum_into(messages: torch.Tensor, index: torch.Tensor, slots: int) -> torch.Tensor:
    """Add messages [B, E, H] into their target rows index [B, E] -> [B, S, H]."""
    batch, _, hidden = messages.shape
    return messages.new_zeros(batch, slots, hidden).scatter_add_(1, index.unsqueeze(-1).expand(-1, -1, hidden),
                                                                 messages)


class EdgeMessages(nn.Module):
    """relu(W h[neighbour] + w * edge_bytes + b) per real edge, averaged into the receiving groups.

    W is applied to the groups before the gather: S rows of work rather than E.
    """

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.linear = nn.Linear(hidden, hidden)
        self.bytes_weight = nn.Parameter(torch.zeros(hidden))

    def forward(self, h: torch.Tensor, sender: torch.Tensor, receiver: torch.Tensor, edge_bytes: torch.Tensor,
                edge_mask: torch.Tensor, degree: torch.Tensor) -> torch.Tensor:
        messages = torch.relu(gather_rows(self.linear(h), sender) + edge_bytes.unsqueeze(-1) * self.bytes_weight)
        return sum_into(messages * edge_mask.unsqueeze(-1), receiver, h.shape[1]) / degree


class GroupGraphExtractor(BaseFeaturesExtractor):
    """Message passing over the env's padded group graph (see the module docstring)."""

    def __init__(self, observation_space: gym.spaces.Dict, hidden: int = 32, group_dim: int = 8,
                 rounds: int = 2) -> None:
        fields = [k for k in NODE_FIELDS if k in observation_space.spaces]
        slots = observation_space["group_mask"].shape[0]
        width = sum(int(np.prod(observation_space[k].shape[1:])) for k in fields)
        devices = int(np.prod(observation_space["devices"].shape))
        super().__init__(observation_space, slots * group_dim + group_dim + devices)
        self.fields, self.slots = fields, slots
        self.embed = nn.Linear(width, hidden)
        self.from_predecessors = nn.ModuleList(EdgeMessages(hidden) for _ in range(rounds))
        self.from_successors = nn.ModuleList(EdgeMessages(hidden) for _ in range(rounds))
        self.update = nn.ModuleList(nn.Linear(3 * hidden, hidden) for _ in range(rounds))
        self.out = nn.Linear(hidden, group_dim)

    def forward(self, observations: dict[str, torch.Tensor]) -> torch.Tensor:
        batch = observations["group_mask"].shape[0]
        group_mask = observations["group_mask"].unsqueeze(-1)
        nodes = torch.cat([observations[k].reshape(batch, self.slots, -1) for k in self.fields], dim=2)
        h = torch.relu(self.embed(nodes)) * group_mask
        edges = observations["edge_index"].long()  # SB3 hands every Box over as float
        src, dst = edges[..., 0], edges[..., 1]
        edge_bytes, edge_mask = observations["edge_bytes"], observations["edge_mask"]
        ones = edge_mask.unsqueeze(-1)
        in_degree = sum_into(ones, dst, self.slots).clamp(min=1.0)
        out_degree = sum_into(ones, src, self.slots).clamp(min=1.0)
        for predecessors, successors, update in zip(self.from_predecessors, self.from_successors, self.update):
            incoming = predecessors(h, src, dst, edge_bytes, edge_mask, in_degree)
            outgoing = successors(h, dst, src, edge_bytes, edge_mask, out_degree)
            h = torch.relu(update(torch.cat([h, incoming, outgoing], -1))) * group_mask
        groups = torch.relu(self.out(h)) * group_mask
        pooled = groups.sum(1) / group_mask.sum(1).clamp(min=1.0)
        return torch.cat([groups.flatten(1), pooled, observations["devices"].flatten(1)], dim=1)


def train(timesteps: int, benchmark: str = "rnnlm-tiny", cluster: str = "paper-2gpu", seed: int = 0) -> PPO:
    """PPO (oneshot mode) with ``GroupGraphExtractor`` for ``timesteps`` env steps."""
    env = Monitor(gym.make("DevicePlacement-v0", benchmark=benchmark, cluster=cluster, graph_observation=True))
    model = PPO("MultiInputPolicy", env, n_steps=64, batch_size=64, learning_rate=3e-3, gamma=1.0, seed=seed,
                device="cpu", policy_kwargs={"features_extractor_class": GroupGraphExtractor})
    batch_action_distribution(model.policy)  # same samples as SB3's, drawn in one call instead of one per group
    model.learn(total_timesteps=timesteps)
    return model


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--timesteps", type=int, default=512, help="env steps (oneshot: one per episode)")
    parser.add_argument("--benchmark", default="rnnlm-tiny")
    parser.add_argument("--cluster", default="paper-2gpu")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.timesteps < 1:
        parser.error(f"--timesteps {args.timesteps}: expected a positive number of env steps")
    model = train(args.timesteps, args.benchmark, args.cluster, args.seed)
    env = model.get_env()
    rewards = env.envs[0].get_episode_rewards()  # the Monitor's record of every episode
    print(f"{model.num_timesteps} steps, {len(rewards)} episodes; mean episode reward of the first 64 "
          f"{np.mean(rewards[:64]):.4f}, of the last 64 {np.mean(rewards[-64:]):.4f}")
    env.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
