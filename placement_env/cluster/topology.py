"""The interconnect of a machine: which ports, switches and links a transfer between two devices uses.

A :class:`Topology` is a graph whose nodes are the cluster's devices plus named switches (a PCIe
root complex, a board's PCIe switch, an NVSwitch, a network switch) and whose edges are
full-duplex :class:`Link` s, each with its own bandwidth per direction and a latency. A transfer
from device a to device b follows the route with the fewest hops (ties: the widest bottleneck,
then the links' order) and streams through every link of that route at once (cut-through). Each
directed link serves the transfers that cross it one after another, in the order they arrive,
each for its own latency (the per-transfer setup during which it carries nothing else) + bytes /
bandwidth; a transfer ends when the last link of its route has served it. So transfers that share a link direction share it (a GPU's one PCIe port, a board's
one slot), a fast link crossed by slow transfers (the host memory behind two PCIe slots) delays
them only by its own short service, and opposite directions never interfere (full duplex).

The simulator needs the routes as arrays: :meth:`Topology.routes` gives, for every ordered device
pair, the directed link "resources" on the route (``2 * link + direction``), the bottleneck
bandwidth and the summed latency. A cluster without a topology is the ideal machine in which every
ordered device pair has a private link of its own (one resource per ordered pair).
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..errors import ClusterConfigError
from .checks import BANDWIDTH_RULE, bad, nonempty_str, positive, seconds


@dataclass(frozen=True)
class Link:
    """A full-duplex link between nodes ``a`` and ``b`` (device or switch names).

    ``bandwidth``: bytes/s in each direction; ``latency``: seconds to cross it; ``label``: what it
    is (e.g. "PCIe 3.0 x16"), for people.
    """

    a: str
    b: str
    bandwidth: float
    latency: float = 0.0
    label: str = ""

    def __post_init__(self) -> None:
        where = f'link "{self.a}" - "{self.b}"'
        nonempty_str(self.a, "link.a", where=where)
        nonempty_str(self.b, "link.b", where=where)
        if self.a == self.b:
            raise bad("link.b", self.b, "a node other than link.a (a link joins two nodes)", where)
        object.__setattr__(self, "bandwidth", positive(self.bandwidth, "link.bandwidth", BANDWIDTH_RULE, where))
        object.__setattr__(self, "latency", seconds(self.latency, "link.latency", where))
        if not isinstance(self.label, str):
            raise bad("link.label", self.label, "a string", where)


@dataclass(frozen=True)
class Routes:
    """Every ordered device pair's route as arrays (pair ``p = src * n_devices + dst``).

    ``resources[pointer[p]:pointer[p + 1]]`` are the directed links the transfer occupies;
    ``bandwidth[src, dst]`` its bottleneck (bytes/s) and ``latency[src, dst]`` its slowest link's
    latency (links stream at once, so the longest setup decides). Per resource r: ``resource_bandwidth[r]``, ``resource_latency[r]`` and
    ``names[r]``, what it is (e.g. ``"gpu:0 -> plx:0"``).
    """

    pointer: np.ndarray
    resources: np.ndarray
    bandwidth: np.ndarray
    latency: np.ndarray
    resource_bandwidth: np.ndarray
    resource_latency: np.ndarray
    names: tuple[str, ...]


@dataclass(frozen=True)
class Topology:
    """Switches and full-duplex links that join a cluster's devices (see the module docstring)."""

    switches: tuple[str, ...]
    links: tuple[Link, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "switches", tuple(self.switches))
        object.__setattr__(self, "links", tuple(self.links))
        for i, name in enumerate(self.switches):
            nonempty_str(name, f"topology.switches[{i}]")
        if len(set(self.switches)) != len(self.switches):
            duplicate = next(s for s in self.switches if self.switches.count(s) > 1)
            raise bad("topology.switches", list(self.switches), f"unique names (\"{duplicate}\" appears twice)")
        for i, link in enumerate(self.links):
            if not isinstance(link, Link):
                raise bad(f"topology.links[{i}]", link, "a Link")

    def check(self, device_names: Sequence[str]) -> None:
        """Fail unless the links join known nodes and every device can reach every other."""
        clash = set(device_names) & set(self.switches)
        if clash:
            raise ClusterConfigError(f"topology.switches: {sorted(clash)} are also device names; "
                                     "a switch needs a name of its own")
        nodes = [*device_names, *self.switches]
        for i, link in enumerate(self.links):
            for end in ("a", "b"):
                if getattr(link, end) not in nodes:
                    raise bad(f"topology.links[{i}].{end}", getattr(link, end),
                              f"a device or switch of this cluster: {', '.join(nodes)}")
        if device_names:
            hops = self._hops(nodes, 0)
            unreachable = [name for k, name in enumerate(device_names) if hops[k] < 0]
            if unreachable:
                raise ClusterConfigError(f"topology: no route from device \"{device_names[0]}\" to "
                                         f"{', '.join(map(repr, unreachable))}; link every device")

    def _adjacency(self, nodes: Sequence[str]) -> list[list[tuple[int, int, int]]]:
        """Per node: (neighbour, link index, direction) in link order; direction 0 is a -> b."""
        index = {name: k for k, name in enumerate(nodes)}
        adjacent: list[list[tuple[int, int, int]]] = [[] for _ in nodes]
        for k, link in enumerate(self.links):
            a, b = index[link.a], index[link.b]
            adjacent[a].append((b, k, 0))
            adjacent[b].append((a, k, 1))
        return adjacent

    def _hops(self, nodes: Sequence[str], source: int) -> list[int]:
        hops = [-1] * len(nodes)
        hops[source] = 0
        queue = deque([source])
        adjacent = self._adjacency(nodes)
        while queue:
            node = queue.popleft()
            for neighbour, _, _ in adjacent[node]:
                if hops[neighbour] < 0:
                    hops[neighbour] = hops[node] + 1
                    queue.append(neighbour)
        return hops

    def route(self, device_names: Sequence[str], src: int, dst: int) -> list[tuple[int, int]]:
        """(link index, direction) along the route from device ``src`` to device ``dst``.

        Fewest hops; among those, the widest bottleneck; then the first in link order.
        """
        nodes = [*device_names, *self.switches]
        adjacent = self._adjacency(nodes)
        to_dst = self._hops(nodes, dst)
        # Walk from src towards dst, one hop closer each step; at a fork keep the path whose
        # bottleneck (over the whole remaining route) is widest, found by a widest-path pass.
        widest = self._widest_to(dst, nodes, adjacent, to_dst)
        path, node = [], src
        while node != dst:
            options = [(n, k, d) for n, k, d in adjacent[node] if to_dst[n] == to_dst[node] - 1]
            best = max(options, key=lambda o: (min(self.links[o[1]].bandwidth, widest[o[0]]), -o[1]))
            path.append((best[1], best[2]))
            node = best[0]
        return path

    def _widest_to(self, dst: int, nodes: Sequence[str], adjacent: list, to_dst: list[int]) -> list[float]:
        """Per node: the widest bottleneck over its shortest routes to ``dst``."""
        widest = [0.0] * len(nodes)
        widest[dst] = math.inf
        for node in sorted(range(len(nodes)), key=lambda k: to_dst[k]):
            if to_dst[node] <= 0:
                continue
            widest[node] = max((min(self.links[k].bandwidth, widest[n]) for n, k, _ in adjacent[node]
                                if to_dst[n] == to_dst[node] - 1), default=0.0)
        return widest

    def routes(self, device_names: Sequence[str]) -> Routes:
        """Every ordered device pair's route, bottleneck bandwidth and largest link latency, as arrays."""
        n = len(device_names)
        pointer = np.zeros(n * n + 1, np.int64)
        resources: list[int] = []
        bandwidth = np.full((n, n), np.inf)
        latency = np.zeros((n, n))
        for src in range(n):
            for dst in range(n):
                if src != dst:
                    path = self.route(device_names, src, dst)
                    resources.extend(2 * k + d for k, d in path)
                    bandwidth[src, dst] = min(self.links[k].bandwidth for k, _ in path)
                    latency[src, dst] = max(self.links[k].latency for k, _ in path)
                pointer[src * n + dst + 1] = len(resources)
        names = tuple(f"{end_a} -> {end_b}" for link in self.links
                      for end_a, end_b in ((link.a, link.b), (link.b, link.a)))
        resource_bandwidth = np.repeat([link.bandwidth for link in self.links], 2).astype(np.float64)
        resource_latency = np.repeat([link.latency for link in self.links], 2).astype(np.float64)
        return Routes(_frozen(pointer), _frozen(np.array(resources, np.int64)), _frozen(bandwidth),
                      _frozen(latency), _frozen(resource_bandwidth), _frozen(resource_latency), names)

    def describe(self, device_names: Sequence[str]) -> list[str]:
        """Lines for ``placement-env cluster``: the links, then each device's route to the others."""
        lines = ["  topology (full-duplex links; bandwidth per direction):"]
        for link in self.links:
            lines.append(f"    {link.a:>14} <-> {link.b:<14} {link.bandwidth / 1e9:7.1f} GB/s "
                         f"{link.latency * 1e6:6.1f} us  {link.label}")
        lines.append("  routes:")
        for src in range(len(device_names)):
            for dst in range(len(device_names)):
                if src != dst:
                    hops = [device_names[src]]
                    for k, d in self.route(device_names, src, dst):
                        link = self.links[k]
                        hops.append(link.b if d == 0 else link.a)
                    lines.append(f"    {' -> '.join(hops)}")
        return lines


def pairwise_routes(n_devices: int, bandwidth: np.ndarray, latency: np.ndarray,
                    device_names: Sequence[str]) -> Routes:
    """The ideal machine's routes: a private link per ordered pair (resource ``src * n + dst``)."""
    n = n_devices
    pointer = np.zeros(n * n + 1, np.int64)
    resources = []
    for src in range(n):
        for dst in range(n):
            if src != dst:
                resources.append(src * n + dst)
            pointer[src * n + dst + 1] = len(resources)
    names = tuple(f"{device_names[p // n]} -> {device_names[p % n]}" for p in range(n * n))
    return Routes(_frozen(pointer), _frozen(np.array(resources, np.int64)), bandwidth, latency,
                  _frozen(np.array(bandwidth, np.float64).reshape(-1)), _frozen(np.array(latency, np.float64).reshape(-1)),
                  names)


def _frozen(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array
