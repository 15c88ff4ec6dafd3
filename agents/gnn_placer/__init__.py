"""A placer that generalises across graphs: a graph neural network over the group graph, self-attention over
the groups, and one device choice per group, pre-trained with REINFORCE on several graphs and then used on a
graph it has never seen, zero-shot or fine-tuned.

Ideas taken (no code) from two successors of the seed paper: Placeto (Addanki et al., NeurIPS 2019) embeds
the graph with message passing along its edges, in both directions, so that a policy trained on some graphs
transfers to others; GDP (Zhou et al., "GDP: Generalized Device Placement for Dataflow Graphs", 2019)
adds attention over all nodes after GraphSAGE-style aggregation, decodes every node's device in one shot (the
default here; ``--decoder sequential`` places one group after another, as Placeto does),
and reports that a policy pre-trained on a set of graphs places held-out ones zero-shot and fine-tunes in
far fewer steps than training from scratch. What is ours: the group graph and features of ``placement_env``,
memory against one GPU's capacity as an input, device *slots* (device k of the cluster is output k, so one
network serves 2 and 4 GPUs through the ``allowed`` mask), and the reward scaled per graph.

The modules, in the order they build on each other:

* ``graph_input``: :class:`GraphInput`, the tensors the network reads about one graph on one cluster;
* ``decoder``: the sequential decoder's placement-aware head, its features and its compiled sampling loop;
* ``network``: :class:`GnnPlacerNet`, message passing, self-attention, the masked device logits, and drawing
  and scoring placements with either decoder;
* ``policy``: sampling, scoring, greedy decoding and the likeliest of several labellings of a placement;
* ``rewards``: rewards on one scale for every graph;
* ``task``: :class:`PlacementTask`, a counted Problem with its input and reward scale;
* ``trainer``: :class:`Config` and :class:`Trainer`, REINFORCE over several graphs per update;
* ``checkpoint``: saving and loading the network (plain tensors, ``weights_only`` loading);
* ``curve``, ``training``: :func:`pretrain` across a suite, with its log, curve and checkpoint;
* ``cost_model``: :class:`CostNet`, a learned cost model that predicts a placement's step time from the group
  graph, and its inputs; ``cost_data``, ``cost_training``: the train tasks' measured placements it learns from
  and its training; ``refine``: local search on it, which improves a zero-shot placement without evaluations;
* ``transfer_prior``: :func:`smooth`, the greedy placement decoded again with a cost for the tensors that cross
  devices;
* ``harness``: :func:`place`, the ``method(problem)`` adapter: zero-shot, smoothed, refined on the cost model or
  fine-tuned, as its arguments ask (presets ``place_zero_shot`` ... ``place_fine_tune`` in ``placement_env.PRESETS``);
* ``cli``: ``python -m agents.gnn_placer`` (``--help``); ``train_cost_model``: ``python -m
  agents.gnn_placer.train_cost_model``; ``memory_margin``: ``python -m agents.gnn_placer.memory_margin``, a
  checkpoint's memory margin, shown or measured again.
"""
from .checkpoint import (CHECKPOINT_ENV, COST_MODEL_ENV, PRETRAINED, PRETRAINED_COST_MODEL, load_cost_model,
                         load_network, save_checkpoint, save_cost_model)
from .cost_model import CostInput, CostNet, cost_input
from .graph_input import DEVICE_SLOTS, GraphInput, graph_input
from .harness import place
from .network import GnnPlacerNet
from .task import PlacementTask, make_task
from .trainer import Config, Trainer

__all__ = [
    "CHECKPOINT_ENV", "COST_MODEL_ENV", "Config", "CostInput", "CostNet", "DEVICE_SLOTS", "GnnPlacerNet", "GraphInput",
    "PRETRAINED", "PRETRAINED_COST_MODEL", "PlacementTask", "Trainer", "cost_input", "graph_input", "load_cost_model",
    "load_network", "make_task", "place", "save_checkpoint", "save_cost_model",
]
