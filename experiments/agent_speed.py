"""Where the seq2seq agent's update time goes, and the floor its matrix products set:
``python -m experiments.agent_speed`` (NMT on ``paper-2gpu``, the default Config, K = 16; run it on an
otherwise idle machine).

It takes a few warm-up updates, then times (median over ``--updates`` updates):

* the whole ``Trainer.update``;
* the sampling pass (``decoding.unroll``: the decoder group by group, no gradients);
* the scoring pass and the backward pass (``decode`` with gradients minus the sampling pass, plus
  ``loss.backward()``);
* the evaluation of K placements the policy samples (one simulator batch) and the Adam step.

Then the matrix products no implementation of this update can skip, at its shapes (n groups, K rows,
hidden H), each timed alone with the same threads, in the faster of its two layouts (A B or (B^T A^T)^T): per group, the decoder LSTM's recurrent product
[K, H] x [H, 4H] when sampling and [K, 4H] x [4H, H] when backpropagating through time; once, the
recurrent weights' gradient [4H, nK] x [nK, H]; and the attention scores over all groups
[n, H] x [H, nK], forward and its two backward products. Their sum plus the evaluation is a lower bound
of one update's time: an update cannot run faster than its products and its simulations.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Callable


def _median_seconds(function: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _product_seconds(a, b, repeats: int) -> float:
    """The faster of ``a @ b`` and its transpose ``b.T @ a.T`` (operands made contiguous first): the
    product's cost in the layout that suits the BLAS best."""
    at, bt = a.T.contiguous(), b.T.contiguous()
    return min(_median_seconds(lambda: a @ b, repeats), _median_seconds(lambda: bt @ at, repeats))


def _product_floor(n: int, k: int, hidden: int, repeats: int) -> dict[str, float]:
    """Seconds of the update's unavoidable matrix products (see the module docstring), each in its faster
    layout."""
    import torch

    generator = torch.Generator().manual_seed(0)

    def rand(*shape: int):
        return torch.randn(*shape, generator=generator)

    step = repeats * 50
    return {
        "recurrent products, sampling (n x [K,H]x[H,4H])":
            n * _product_seconds(rand(k, hidden), rand(hidden, 4 * hidden), step),
        "recurrent products, backprop through time (n x [K,4H]x[4H,H])":
            n * _product_seconds(rand(k, 4 * hidden), rand(4 * hidden, hidden), step),
        "recurrent weights' gradient ([4H,nK]x[nK,H])":
            _product_seconds(rand(4 * hidden, n * k), rand(n * k, hidden), repeats),
        "attention scores, forward and backward (3 x [n,H]x[H,nK])":
            3 * _product_seconds(rand(n, hidden), rand(hidden, n * k), repeats),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", default="nmt")
    parser.add_argument("--cluster", default="paper-2gpu")
    parser.add_argument("--updates", type=int, default=30, help="timed updates (default: %(default)s)")
    parser.add_argument("--target", type=float, default=0.059, metavar="SECONDS",
                        help="seconds per update to compare with (default: %(default)s, 4x faster than 118ed7c's "
                             "0.236 s on this machine)")
    args = parser.parse_args(argv)
    from placement_env.quiet_tf import import_tensorflow_quietly

    import_tensorflow_quietly()
    import torch

    from agents.reinforce_seq2seq.config import Config
    from agents.reinforce_seq2seq.decoding import Sampling, unroll
    from agents.reinforce_seq2seq.policy import problem_features
    from agents.reinforce_seq2seq.trainer import Trainer
    from placement_env import Problem, load_benchmark, load_cluster

    problem = Problem.make(load_benchmark(args.benchmark), load_cluster(args.cluster), seed=0)
    config = Config()
    trainer = Trainer(problem_features(problem), problem.allowed, config, seed=0)
    evaluate = problem.evaluator.batch
    for _ in range(5):
        trainer.update(evaluate)
    policy, k = trainer.policy, config.samples
    n, hidden = trainer.features.shape[0], config.hidden
    print(f"{args.benchmark} on {args.cluster}: {n} groups, K = {k}, hidden {hidden}, torch threads "
          f"{torch.get_num_threads()}")

    def decode_and_backward() -> None:
        _, log_prob, entropy, _ = policy.decode(trainer.features, trainer.allowed, samples=k, noise_std=0.5,
                                                generator=trainer.generator)
        (log_prob.mean() + entropy.mean()).backward()

    encoded, (h0, c0) = policy.encode(trainer.features)
    tables = policy.decoder_tables(encoded).detached()
    how = Sampling(samples=k, temperature=1.0, noise_std=0.5, explore=0.0, generator=trainer.generator, greedy=False)
    with torch.no_grad():  # placements as the policy samples them
        placements = policy.decode(trainer.features, trainer.allowed, samples=k, generator=trainer.generator)[0].numpy()
    with torch.no_grad():
        sampling = _median_seconds(lambda: unroll(tables, h0.detach(), c0.detach(), trainer.allowed, None, how),
                                   args.updates)
    parts = {
        "whole update": _median_seconds(lambda: trainer.update(evaluate), args.updates),
        "sampling pass": sampling,
        "scoring + backward passes": _median_seconds(decode_and_backward, args.updates) - sampling,
        "evaluation of K placements": _median_seconds(lambda: evaluate(placements), args.updates),
        "Adam step": _median_seconds(trainer.optimizer.step, args.updates),
    }
    for name, seconds in parts.items():
        print(f"  {name:<64} {seconds * 1e3:8.1f} ms")
    floor = _product_floor(n, k, hidden, repeats=max(5, args.updates // 3))
    print("matrix products no update can skip:")
    for name, seconds in floor.items():
        print(f"  {name:<64} {seconds * 1e3:8.1f} ms")
    bound = sum(floor.values()) + parts["evaluation of K placements"]
    print(f"lower bound (products + evaluation): {bound * 1e3:.1f} ms per update; measured "
          f"{parts['whole update'] * 1e3:.1f} ms; target {args.target * 1e3:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
