"""The ops a measured worker may run: an allowlist of the op families a training step needs.

Before a GraphDef goes to any TF server (:meth:`~.driver.DriverProcess.measure`),
:func:`refuse_unlisted_ops` checks the op type of every node -- of the graph, of every function in
its library, of every op or function a node's function attribute names (a call can name a bare op),
and of any graph a node would run from a constant string tensor (``DatasetFromGraph``) -- against
``op_allowlist.json``: families of TF ops (math, array, nn, random, control flow, variables and their
updates, ...), each with the reason it is allowed, derived from TF's op registry by
``python -m experiments.op_allowlist``. Everything else is refused, naming each node and op type; the
file also lists, with reasons, the families that are never allowed (host files, datasets, vocabulary
tables, summaries and printing, Python, network, process exit). A user may extend the list for a
trusted graph by naming op types explicitly (``allow_ops``); the workers' private root
(:mod:`.private_root`) still confines what such ops can reach.

Reads are refused as well as writes: a measured step is timed on random feeds (the graph's
placeholders), so it must depend on nothing but the graph, and a read brings host files into the
step, whose values can come back in error messages.
"""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, Iterable

from ..errors import SideEffectOpError

ALLOWLIST_FILE = Path(__file__).with_name("op_allowlist.json")
NOT_LISTED = "not on the allowlist of a training step's ops"
# op type -> index of the input that carries a serialised GraphDef the op runs
GRAPH_INPUTS = {"DatasetFromGraph": 0}


@functools.lru_cache(maxsize=1)
def allowlist() -> tuple[dict[str, str], dict[str, str]]:
    """(allowed op type -> its family, refused op type -> its family) from :data:`ALLOWLIST_FILE`."""
    content = json.loads(ALLOWLIST_FILE.read_text())
    families = lambda part: {op: family for family, entry in content[part].items() for op in entry["ops"]}  # noqa: E731
    return families("allowed"), families("refused")


def check_allow_ops(allow_ops: Any) -> frozenset[str]:
    """``allow_ops`` (op type names a user trusts beyond the allowlist) as a frozenset; a ValueError
    names a value that is not a collection of registered TF op type names."""
    if isinstance(allow_ops, (str, bytes)) or not isinstance(allow_ops, Iterable):
        raise ValueError(f"allow_ops = {allow_ops!r:.80}: expected a collection of TF op type names, e.g. "
                         "('WriteFile',), not one string")
    names = list(allow_ops)
    bad = [name for name in names if not isinstance(name, str) or not name]
    if bad:
        raise ValueError(f"allow_ops: {bad[0]!r:.80} is not an op type name (a non-empty string such as 'WriteFile')")
    if names:
        from tensorflow.python.framework import op_def_registry

        unknown = [name for name in names if op_def_registry.get(name) is None]
        if unknown:
            raise ValueError(f"allow_ops: {', '.join(map(repr, unknown[:8]))} {'is not a' if len(unknown) == 1 else 'are not'}"
                             " TF op type(s) registered in this TensorFlow; names are case-sensitive (e.g. 'WriteFile')")
    return frozenset(names)


def _graph_in_constant(nodes: dict[str, Any], node: Any, index: int) -> bytes | None:
    """The bytes of the string constant that feeds input ``index`` of ``node`` (through Identity ops),
    None if that input is computed at run time."""
    source = node.input[index] if index < len(node.input) else ""
    for _ in range(len(nodes) + 1):
        feeder = nodes.get(source.lstrip("^").split(":")[0])
        if feeder is None:
            return None
        if feeder.op == "Const":
            values = feeder.attr["value"].tensor.string_val
            return bytes(values[0]) if len(values) == 1 else None
        if feeder.op != "Identity" or not feeder.input:
            return None
        source = feeder.input[0]
    return None


def _unlisted(graph_def: Any, allow_ops: frozenset[str], prefix: str) -> list[tuple[str, str, str]]:
    from ..quiet_tf import import_tensorflow_quietly

    tf = import_tensorflow_quietly()
    allowed, refused = allowlist()
    library = {function.signature.name for function in graph_def.library.function}

    def verdict(op: str) -> str | None:
        if op in allowed or op in allow_ops:
            return None
        return refused.get(op, NOT_LISTED)

    scopes = [("", graph_def.node)] + [(f"{f.signature.name}/", f.node_def) for f in graph_def.library.function]
    found = []
    for scope, nodes in scopes:
        by_name = {node.name: node for node in nodes}
        for node in nodes:
            name = f"{prefix}{scope}{node.name}"
            why = verdict(node.op)
            if why is not None:
                found.append((name, node.op, why))
            for key, value in node.attr.items():  # a function attribute may name a bare op instead of a function
                called = [value.func.name] if value.HasField("func") else [f.name for f in value.list.func]
                for op in called:
                    why = None if op in library else verdict(op)
                    if why is not None:
                        found.append((f"{name} (calls it in attribute {key!r})", op, why))
            if node.op in GRAPH_INPUTS and node.op in allow_ops:
                carried = _graph_in_constant(by_name, node, GRAPH_INPUTS[node.op])
                try:
                    inner = tf.compat.v1.GraphDef.FromString(carried) if carried is not None else None
                except Exception:  # noqa: BLE001 - protobuf's DecodeError: not a graph, TF will fail on it
                    inner = None
                if inner is None:
                    found.append((name, node.op, "runs a graph that is computed at run time and cannot be checked"))
                else:
                    found.extend(_unlisted(inner, allow_ops, f"{name}/"))
    return found


@functools.lru_cache(maxsize=16)
def unlisted_nodes(graph_def: bytes, allow_ops: frozenset[str] = frozenset()) -> tuple[tuple[str, str, str], ...]:
    """(node, op type, why) of every node of the serialised GraphDef (its library's as ``function/node``,
    a carried graph's as ``node/inner``) whose op type is neither on the allowlist nor in ``allow_ops``;
    ``why`` is the refused family or :data:`NOT_LISTED`. ``()`` if none."""
    from ..quiet_tf import import_tensorflow_quietly

    tf = import_tensorflow_quietly()
    return tuple(_unlisted(tf.compat.v1.GraphDef.FromString(graph_def), allow_ops, ""))


def refuse_unlisted_ops(graph_def: bytes, allow_ops: frozenset[str] = frozenset(), what: str = "the graph",
                        shown: int = 8) -> None:
    """SideEffectOpError naming the first ``shown`` nodes of ``graph_def`` that a measured worker may not run."""
    found = unlisted_nodes(bytes(graph_def), frozenset(allow_ops))
    if not found:
        return
    listed = ", ".join(f"{name!r} ({op}: {why})" for name, op, why in found[:shown])
    more = f" and {len(found) - shown} more" if len(found) > shown else ""
    raise SideEffectOpError(
        f"{what} cannot be run on measured workers: {len(found)} op(s) are not on the allowlist of the ops a "
        f"training step needs ({ALLOWLIST_FILE.name}): {listed}{more}. Remove them (savers, summaries, prints, "
        "file or dataset inputs: feed placeholders instead), use runtime='sim', or, for a graph you trust, name "
        "their op types in the measured option allow_ops=(...); the workers' private file system still "
        "confines them.", found)
