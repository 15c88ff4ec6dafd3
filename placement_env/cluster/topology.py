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
from .checks import MAX_SWITCHES, MAX_TOPOLOGY_LINKS, bad, bytes_per_s, nonempty_str, seconds


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
        object.__setattr__(self, "bandwidth", bytes_per_s(self.bandwidth, "link.bandwidth", where))
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
        for key, most in (("switches", MAX_SWITCHES), ("links", MAX_TOPOLOGY_LINKS)):
            if not isinstance(getattr(self, key), (list, tuple)):
                raise bad(f"topology.{key}", getattr(self, key), "a list of " + ("names" if key == "switches" else "Link"))
            object.__setattr__(self, key, tuple(getattr(self, key)))
            if len(getattr(self, key)) > most:
                raise ClusterConfigError(f"topology.{key}: {len(getattr(self, key)):,} {key}; a topology has at most "
                                         f"{most:,} (every device's routes are searched over them)")
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
            hops = self._hops(self._adjacency(nodes), 0)
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

    @staticmethod
    def _hops(adjacent: list[list[tuple[int, int, int]]], source: int) -> list[int]:
        """Per node: the fewest links from ``source`` (-1 where unreachable)."""
        hops = [-1] * len(adjacent)
        hops[source] = 0
        queue = deque([source])
        while queue:
            node = queue.popleft()
            for neighbour, _, _ in adjacent[node]:
                if hops[neighbour] < 0:
                    hops[neighbour] = hops[node] + 1
                    queue.append(neighbour)
        return hops

    def _routes_to(self, adjacent: list[list[tuple[int, int, int]]],
                   dst: int) -> tuple[list[list[int]], list[float], list[float]]:
        """Per node: its route to node ``dst`` as resources (``2 * link + direction``), the route's bottleneck
        bandwidth and its largest link latency (``[]``, inf and 0 at ``dst``).

        Each hop leads one step closer (fewest hops); among those, to the widest bottleneck over the rest of
        the route; then the first in link order. Nodes are visited nearest first, so the rest of the route
        from the next hop is known when a node takes its hop.
        """
        to_dst = self._hops(adjacent, dst)
        link_bandwidth = [link.bandwidth for link in self.links]
        link_latency = [link.latency for link in self.links]
        path: list[list[int]] = [[] for _ in adjacent]
        widest = [0.0] * len(adjacent)
        slowest = [0.0] * len(adjacent)
        widest[dst] = math.inf
        for node in sorted(range(len(adjacent)), key=to_dst.__getitem__):
            if to_dst[node] <= 0:
                continue
            options = [(n, k, d) for n, k, d in adjacent[node] if to_dst[n] == to_dst[node] - 1]
            neighbour, link, direction = max(options, key=lambda o: (min(link_bandwidth[o[1]], widest[o[0]]), -o[1]))
            path[node] = [2 * link + direction, *path[neighbour]]
            widest[node] = min(link_bandwidth[link], widest[neighbour])
            slowest[node] = max(link_latency[link], slowest[neighbour])
        return path, widest, slowest

    def route(self, device_names: Sequence[str], src: int, dst: int) -> list[tuple[int, int]]:
        """(link index, direction) along the route from device ``src`` to device ``dst``.

        Fewest hops; among those, the widest bottleneck; then the first in link order.
        """
        path = self._routes_to(self._adjacency([*device_names, *self.switches]), dst)[0][src]
        return [divmod(resource, 2) for resource in path]

    def routes(self, device_names: Sequence[str]) -> Routes:
        """Every ordered device pair's route, bottleneck bandwidth and largest link latency, as arrays."""
        n = len(device_names)
        adjacent = self._adjacency([*device_names, *self.switches])
        bandwidth = np.empty((n, n))
        latency = np.empty((n, n))
        paths = []
        for dst in range(n):
            path, widest, slowest = self._routes_to(adjacent, dst)
            paths.append(path)
            bandwidth[:, dst], latency[:, dst] = widest[:n], slowest[:n]
        lengths = np.array([[len(paths[dst][src]) for dst in range(n)] for src in range(n)], np.int64).reshape(-1)
        pointer = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        resources = np.array([r for src in range(n) for dst in range(n) for r in paths[dst][src]], np.int64)
        names = tuple(f"{end_a} -> {end_b}" for link in self.links
                      for end_a, end_b in ((link.a, link.b), (link.b, link.a)))
        resource_bandwidth = np.repeat([link.bandwidth for link in self.links], 2).astype(np.float64)
        resource_latency = np.repeat([link.latency for link in self.links], 2).astype(np.float64)
        return Routes(_frozen(pointer), _frozen(resources), _frozen(bandwidth), _frozen(latency),
                      _frozen(resource_bandwidth), _frozen(resource_latency), names)

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
