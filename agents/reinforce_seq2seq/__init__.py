"""The seed paper's agent: a seq2seq policy trained with REINFORCE (Mirhoseini et al., 2017).

Every update samples K placements from the policy, measures them in one batch, and takes an Adam step on
REINFORCE with a moving-average baseline of the successful samples' rewards, R = -sqrt(runtime) (the
failing signal for a failed placement); gradients are clipped to norm 1.0. The deviations from the paper
are switchable in :class:`Config` (README, "Deviations from the paper"): normalised and clipped advantages,
logits noise early on, and, off by default, a warm start from a baseline, self-imitation, an exploration
floor and local moves around the best placement.

The modules, in the order they build on each other:

* ``config``: :class:`Config` and the presets ``SELF_IMITATION`` and ``FINE_TUNING``;
* ``recurrence``: the decoder LSTM's steps, recorded, and its backward pass from that record;
* ``decoding``: the decoder's two passes, sampling group by group and batched scoring with gradients;
* ``policy``: :class:`Seq2SeqPolicy` (encoder, attention decoder) and its input, :func:`group_features`;
* ``trainer``: :class:`Trainer` (sampling, the REINFORCE update, local moves, imitation);
* ``checkpoint``: the checkpoint format, saving, loading, and the checks before a resume;
* ``warm_start``: imitating a baseline's placement before training;
* ``training``: :func:`train` on a benchmark, with its run folder;
* ``harness``: :func:`place`, the ``method(problem)`` adapter (``placement-env run --methods
  agents.reinforce_seq2seq:place``; its presets ``:place_self_imitation`` and ``:place_warm_start`` are in
  ``placement_env.PRESETS``);
* ``cli``: ``python -m agents.reinforce_seq2seq`` (``--help``).
"""
from .checkpoint import CHECKPOINT, CHECKPOINT_FORMAT, load_checkpoint
from .cli import main
from .config import FINE_TUNING, SELF_IMITATION, Config
from .harness import place
from .policy import Seq2SeqPolicy, group_features, problem_features
from .trainer import Trainer
from .training import TrainResult, train
from .warm_start import WARM_START_CANDIDATES, warm_start

__all__ = [
    "CHECKPOINT", "CHECKPOINT_FORMAT", "FINE_TUNING", "SELF_IMITATION", "WARM_START_CANDIDATES", "Config",
    "Seq2SeqPolicy", "TrainResult", "Trainer", "group_features", "load_checkpoint", "main", "place",
    "problem_features", "train", "warm_start",
]
