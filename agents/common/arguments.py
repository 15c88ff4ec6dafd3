"""Argument checks shared by the agents' command lines: argparse ``type=`` checkers for counts and numbers,
:func:`check_task_arguments` for the flags that name a task (``--benchmark``, ``--cluster``, ``--seed``) and
``--timeout`` of the measured runtime (:func:`add_timeout_argument`, :func:`measured_options`).

A bad value ends the command with argparse's usage error (exit 2) naming the flag, the value and what is
accepted, before anything is built or written."""
from __future__ import annotations

import argparse
import math
from typing import Any


def _integer(text: str, least: int, kind: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid {kind}: {text!r}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"expected a {kind}, got {text}")
    return value


def positive_int(text: str) -> int:
    return _integer(text, 1, "positive integer")


def non_negative_int(text: str) -> int:
    return _integer(text, 0, "whole number >= 0")


def _finite_number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text}")
    return value


def positive_float(text: str) -> float:
    value = _finite_number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text}")
    return value


def non_negative_float(text: str) -> float:
    value = _finite_number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text}")
    return value


def check_task_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """``parser.error`` (exit 2, naming the flag) for an unknown ``--benchmark`` or ``--cluster``, or a negative
    ``--seed``."""
    from placement_env import benchmark_names, load_cluster

    if args.seed < 0:
        parser.error(f"argument --seed: expected an integer >= 0, got {args.seed}")
    if args.benchmark not in benchmark_names() and not args.benchmark.startswith("synthetic:"):
        parser.error(f"argument --benchmark: unknown benchmark {args.benchmark!r}; "
                     f"choose from {', '.join(benchmark_names())} or synthetic:N")
    try:
        load_cluster(args.cluster)
    except Exception as error:  # noqa: BLE001
        parser.error(f"argument --cluster: {error}")


def add_threads_argument(parser: argparse.ArgumentParser, default: int) -> None:
    """``--threads``: torch's thread count, on which a seeded run depends (``agents.common.torch_threads``)."""
    parser.add_argument("--threads", type=positive_int, default=default,
                        help="torch threads; a seed gives the same run for the same count (default: %(default)s)")


def add_timeout_argument(parser: argparse.ArgumentParser) -> None:
    """``--timeout SECONDS``: the measured runtime's limit on one try at measuring a placement."""
    parser.add_argument("--timeout", type=positive_float, default=None, metavar="SECONDS",
                        help="with --runtime measured: the limit on measuring one placement on running workers "
                             "(import, session, init, steps); a placement past it fails as 'timeout' (default: "
                             "scaled to the graph, 60 s + 10 x its estimated single-device step per run)")


def measured_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, Any] | None:
    """The ``measured_options`` that ``--timeout`` asks for (None without it); ``parser.error`` if it is given
    with a runtime other than ``measured``."""
    if args.timeout is None:
        return None
    if args.runtime != "measured":
        parser.error(f"argument --timeout: is for --runtime measured, not --runtime {args.runtime}")
    return {"timeout_s": args.timeout}


def check_out_dir(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """``parser.error`` (exit 2) for an ``--out-dir`` that is a file or cannot be made, before any training."""
    from placement_env import OutputPathError, check_output_folder

    if args.out_dir is not None:
        try:
            check_output_folder(args.out_dir, "--out-dir")
        except OutputPathError as error:
            parser.error(str(error))
