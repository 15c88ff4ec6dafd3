"""``python -m agents.gnn_placer.memory_margin [CHECKPOINT] [--write]``: the memory margin a placer checkpoint
carries (:mod:`.memory_fit`), and with ``--write`` the margin measured again on the suite the checkpoint was
trained on and stored in it (:func:`.training.remeasure_margin`, as pre-training measures it when it writes a
checkpoint): for a checkpoint whose margin was measured against another memory estimate, which the harness
methods refuse. Bad arguments exit 2 naming them, before anything is built.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agents.common.arguments import add_threads_argument
from agents.common.torch_threads import start_command


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m agents.gnn_placer.memory_margin", description=(
        "Show a GNN placer checkpoint's memory margin and the estimate it was measured against; with --write, "
        "measure it again on the checkpoint's train suite and store it in the checkpoint."))
    p.add_argument("checkpoint", nargs="?", default=None,
                   help="the checkpoint (default: $GNN_PLACER_CHECKPOINT or the committed one)")
    p.add_argument("--write", action="store_true", help="measure the margin again and store it in the checkpoint")
    add_threads_argument(p, default=1)
    return p


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    from placement_env import CheckpointMismatchError

    from .checkpoint import checkpoint_path, load_network

    path = Path(args.checkpoint) if args.checkpoint else checkpoint_path()
    try:
        meta = load_network(path)[2]
    except (FileNotFoundError, CheckpointMismatchError) as error:
        p.error(str(error))
    print(f"{path}: memory margin {meta.get('memory_margin', 'none')}, measured against the estimate "
          f"{meta.get('memory_estimate', 'sequential, index order')!r}")
    if args.write:
        from .training import remeasure_margin

        start_command(args.threads)
        print(f"stored in {path}: memory margin {remeasure_margin(path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
