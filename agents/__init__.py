"""Agents that learn placements on ``placement_env``: the seed paper's seq2seq REINFORCE agent
(:mod:`agents.reinforce_seq2seq`) and Stable-Baselines3 agents on the Gymnasium env (:mod:`agents.sb3`), with
what their command lines share (:mod:`agents.arguments`, :mod:`agents.run_files`, :mod:`agents.report`)."""
