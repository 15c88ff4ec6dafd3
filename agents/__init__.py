"""Agents that learn placements on ``placement_env``: the seed paper's seq2seq REINFORCE agent
(:mod:`agents.reinforce_seq2seq`), a GNN placer that generalises across graphs (:mod:`agents.gnn_placer`) and
Stable-Baselines3 agents on the Gymnasium env (:mod:`agents.sb3`), with what they share in :mod:`agents.common`."""
