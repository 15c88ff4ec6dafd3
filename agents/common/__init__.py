"""What the agents share, each agent keeping its own network and trainer:

* ``advantages``: the reward baselines and advantages of REINFORCE updates;
* ``checkpoint``: writing and reading torch checkpoints (``weights_only=True``: tensors and plain data only);
* ``run_files``: the run folder (``log.csv``, ``tensorboard/``, ``best_placement.json``, the placed graph);
* ``arguments``: the argument checks and flags of the agents' command lines;
* ``report``: the learning-curve plot and the table against the baselines at the end of a run;
* ``local_moves``: moves around the best placement so far, guided by a policy;
* ``torch_threads``: torch's thread count and the caller's float mode around training.
"""
