"""Derive the measured workers' op allowlist (``placement_env/runtime/op_allowlist.json``) from TF's op registry.

    python -m experiments.op_allowlist            # print what would change against the shipped file
    python -m experiments.op_allowlist --write    # rewrite the shipped file for the installed TF

Every op TensorFlow registers has a Python wrapper in one ``gen_*_ops`` module (``tf.raw_ops.X.__module__``),
which groups ops by what they do. A family below is a set of those modules plus named ops, minus named
exceptions, with the reason it is allowed (a training step needs it and it touches nothing outside the
step) or refused (it reads or writes host files, prints, runs Python, talks to the network, ends the
process, or runs a graph carried in a tensor). The file lists every op by name, so what a worker may
run is reviewed data, not a rule evaluated at run time; rerun this after upgrading TF and read the diff.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

from placement_env.quiet_tf import import_tensorflow_quietly

ALLOWLIST_FILE = Path(__file__).resolve().parents[1] / "placement_env" / "runtime" / "op_allowlist.json"

# family -> (reason, gen modules, extra op names, op names taken out of those modules)
ALLOWED: dict[str, tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "math": ("element-wise arithmetic, reductions, matrix products, comparisons and casts: the body of every "
             "layer and of its gradient", ("gen_math_ops", "gen_special_math_ops", "gen_bitwise_ops"), (), ()),
    "array": ("constants, placeholders, shapes, slices, gathers, concatenation and transposes: moving tensors "
              "within the step", ("gen_array_ops", "gen_manip_ops"), (),
              ("ImmutableConst",)),  # ImmutableConst memory-maps a host file
    "nn": ("convolutions, pooling, normalisation, activations, recurrent cells, losses and their gradients",
           ("gen_nn_ops", "gen_rnn_ops", "gen_cudnn_rnn_ops", "gen_ctc_ops"), (), ()),
    "linalg": ("decompositions, solves and FFTs used by some layers and losses", ("gen_linalg_ops", "gen_spectral_ops"),
               (), ()),
    "random": ("initialisers, dropout and noise, stateful or seeded", (
        "gen_random_ops", "gen_stateless_random_ops", "gen_stateless_random_ops_v2", "gen_stateful_random_ops",
        "gen_random_index_shuffle_ops"), (), ()),
    "sampled losses": ("candidate samplers of sampled-softmax losses that draw from built-in distributions", (),
                       ("UniformCandidateSampler", "LogUniformCandidateSampler", "LearnedUnigramCandidateSampler",
                        "ThreadUnsafeUnigramCandidateSampler", "AllCandidateSampler", "ComputeAccidentalHits"), ()),
    "control flow": ("conditionals, loops and calls of functions of the graph's own library (whose bodies are checked "
                     "like the graph); Assert only fails the step", ("gen_control_flow_ops", "gen_functional_ops"),
                     ("Assert",), ("Abort", "RemoteCall")),
    "variables": ("variables, their reads, assignments and scatter updates", ("gen_state_ops", "gen_resource_variable_ops"),
                  (), ()),
    "optimizer updates": ("the fused update kernels of the optimizers (SGD, momentum, Adam, Adagrad, RMSProp, ...)",
                          ("gen_training_ops",), (), ()),
    "sparse": ("sparse tensors and their arithmetic, as sparse gradients and embeddings use them", ("gen_sparse_ops",),
               (), ()),
    "tensor lists and arrays": ("tensor lists and arrays of loops and recurrent layers, and stitching of partitions",
                                ("gen_list_ops",),
                                ("DynamicStitch", "ParallelDynamicStitch", "DynamicPartition"), ()),
    "collectives": ("all-reduce, gather and broadcast between the cluster's own devices (data-parallel steps)",
                    ("gen_collective_ops", "gen_nccl_ops"), (), ()),
}
TENSOR_ARRAY_PREFIX = "TensorArray"  # gen_data_flow_ops' TensorArray* ops join "tensor lists and arrays"

REFUSED: dict[str, tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "host files": ("read or write files of the host: file I/O, readers, checkpoints, memory-mapped constants, "
                   "proto descriptors and vocabulary files named in attributes",
                   ("gen_io_ops", "gen_checkpoint_ops", "gen_filesystem_ops", "gen_decode_proto_ops",
                    "gen_encode_proto_ops"),
                   ("ImmutableConst", "FixedUnigramCandidateSampler", "DumpTensor", "CalibrationStatisticsSaver",
                    "DTensorRestoreV2"), ()),
    "datasets": ("input pipelines: they read and write files (readers, cache, snapshot, save), run functions on threads "
                 "of their own, and can carry a whole graph in a string tensor (DatasetFromGraph); a measured step is "
                 "fed placeholders instead", ("gen_dataset_ops", "gen_experimental_dataset_ops", "gen_optional_ops"),
                 (), ()),
    "vocabulary tables": ("lookup tables, which initialise from host text files", ("gen_lookup_ops",), (), ()),
    "summaries and printing": ("print to the worker's output or write summary files",
                               ("gen_summary_ops", "gen_logging_ops"), (), ("Assert",)),
    "python": ("run Python code in the worker", ("gen_script_ops",), (), ()),
    "network": ("open connections or send tensors to addresses of their own (RPC, debugger URLs, explicit send/receive, "
                "remote calls)", ("gen_debug_ops", "gen_sendrecv_ops"),
                ("RemoteCall", "RpcServer", "RpcServerRegister", "RpcServerStart", "RpcClient", "RpcCall",
                 "RpcCheckStatus", "RpcGetValue", "DeleteRpcFutureResource"), ()),
    "process": ("end the worker process", (), ("Abort",), ()),
}


def registered_ops() -> dict[str, str]:
    """Every op type TF registers -> the ``gen_*_ops`` module of its Python wrapper ("" if it has none)."""
    tf = import_tensorflow_quietly()
    from tensorflow.core.framework import op_def_pb2
    from tensorflow.python.client import pywrap_tf_session

    ops = op_def_pb2.OpList()
    ops.ParseFromString(pywrap_tf_session.TF_GetBuffer(pywrap_tf_session.TF_GetAllOpList()))
    found = {}
    for op in ops.op:
        wrapper = getattr(tf.raw_ops, op.name, None)
        found[op.name] = wrapper.__module__.rsplit(".", 1)[-1] if wrapper is not None else ""
    return found


def _families(spec: dict, registry: dict[str, str]) -> dict[str, dict]:
    by_module: dict[str, list[str]] = defaultdict(list)
    for name, module in registry.items():
        by_module[module].append(name)
    families = {}
    for family, (reason, modules, extra, taken_out) in spec.items():
        ops = {name for module in modules for name in by_module.get(module, [])}
        ops |= {name for name in extra if name in registry}
        if family == "tensor lists and arrays":
            ops |= {name for name in by_module.get("gen_data_flow_ops", []) if name.startswith(TENSOR_ARRAY_PREFIX)}
        families[family] = {"reason": reason, "ops": sorted(ops - set(taken_out))}
    return families


def derive() -> dict:
    """The allowlist file's content for the installed TF."""
    tf = import_tensorflow_quietly()
    registry = registered_ops()
    allowed, refused = _families(ALLOWED, registry), _families(REFUSED, registry)
    refused_names = {name for family in refused.values() for name in family["ops"]}
    for family in allowed.values():  # a refused op is never allowed, whatever module it sits in
        family["ops"] = [name for name in family["ops"] if name not in refused_names]
    return {"tensorflow": tf.__version__, "derived_by": "python -m experiments.op_allowlist --write",
            "allowed": allowed, "refused": refused}


def _names(content: dict, part: str) -> set[str]:
    return {name for family in content[part].values() for name in family["ops"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"rewrite {ALLOWLIST_FILE.name}")
    args = parser.parse_args(argv)
    derived = derive()
    shipped = json.loads(ALLOWLIST_FILE.read_text()) if ALLOWLIST_FILE.exists() else {"allowed": {}, "refused": {}}
    for part in ("allowed", "refused"):
        added, removed = _names(derived, part) - _names(shipped, part), _names(shipped, part) - _names(derived, part)
        print(f"{part}: {len(_names(derived, part))} ops; +{len(added)} {sorted(added)[:20]} "
              f"-{len(removed)} {sorted(removed)[:20]}")
    if args.write:
        ALLOWLIST_FILE.write_text(json.dumps(derived, indent=1) + "\n")
        print(f"wrote {ALLOWLIST_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
