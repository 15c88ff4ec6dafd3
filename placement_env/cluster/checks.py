"""Value rules shared by every part of the cluster package, each failing with a message that says what.

Every check raises ``ClusterConfigError`` naming the path of the bad value (``devices[1].kind``),
the value as JSON would show it, where it sits (``device "gpu:0"``) and the rule it breaks, so a
user can fix a cluster JSON file, a constructor call or a TF cluster spec from the message alone.
"""
from __future__ import annotations

import json
import math
import numbers
import re
from collections.abc import Mapping

import numpy as np

from ..errors import ClusterConfigError

BANDWIDTH_RULE = "a positive number of bytes/s"
LATENCY_RULE = "a finite number of seconds >= 0"
ADDRESS_RULE = 'a "host:port" string with a port from 1 to 65535'


def show(value: object) -> str:
    """A value as it would look in JSON where possible, else its repr."""
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def bad(path: str, value: object, rule: str, where: str = "") -> ClusterConfigError:
    """The error for ``value`` at ``path`` (in ``where``), which must be ``rule``."""
    loc = f" ({where})" if where else ""
    return ClusterConfigError(f"{path} = {show(value)}{loc}: must be {rule}")


def is_real(value: object) -> bool:
    """A real number, not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def is_int(value: object) -> bool:
    """An integer, not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def positive(value: object, path: str, rule: str, where: str = "") -> float:
    """``value`` as a float if it is a finite number > 0."""
    if not is_real(value) or not math.isfinite(value) or value <= 0:
        raise bad(path, value, rule, where)
    return float(value)


def seconds(value: object, path: str, where: str = "") -> float:
    """``value`` as a float if it is a finite number of seconds >= 0."""
    if not is_real(value) or not math.isfinite(value) or value < 0:
        raise bad(path, value, LATENCY_RULE, where)
    return float(value)


def nonempty_str(value: object, path: str, rule: str = "a non-empty string", where: str = "") -> str:
    """``value`` if it is a string with something other than whitespace."""
    if not isinstance(value, str) or not value.strip():
        raise bad(path, value, rule, where)
    return value


def split_address(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of a "host:port" address ("[v6]:port" too), or None if it is not one."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdecimal() or not 1 <= int(port) <= 65535 or any(c.isspace() for c in address):
        return None
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return (host, int(port)) if host else None


def remote_jobs(value: object, path: str) -> dict[str, tuple[str, ...]]:
    """A TF cluster spec as ``{job: ("host:port", ...)}``: task i is the i-th address.

    Accepts a mapping of job name to a list of addresses or to ``{task index: address}`` with
    indices 0..n-1 (the sparse form of ``ClusterSpec.as_dict``).
    """
    if not isinstance(value, Mapping):
        raise bad(path, value, 'a mapping {job name: ["host:port", ...]}')
    jobs: dict[str, tuple[str, ...]] = {}
    for job, tasks in value.items():
        if not isinstance(job, str) or not re.fullmatch(r"[A-Za-z0-9_.\-]+", job):
            raise bad(f"{path} job name", job, "a non-empty string of letters, digits, _ . -")
        where = f'job "{job}"'
        if isinstance(tasks, Mapping):
            if sorted(tasks) != list(range(len(tasks))):
                raise bad(f"{path}.{job}", {str(k): v for k, v in tasks.items()}, "tasks numbered 0..n-1", where)
            tasks = [tasks[i] for i in range(len(tasks))]
        if isinstance(tasks, str) or not isinstance(tasks, (list, tuple)) or not tasks:
            raise bad(f"{path}.{job}", tasks, 'a non-empty list of "host:port" addresses', where)
        for i, address in enumerate(tasks):
            if not isinstance(address, str) or split_address(address) is None:
                raise bad(f"{path}.{job}[{i}]", address, ADDRESS_RULE, f"{where} task {i}")
        jobs[job] = tuple(tasks)
    return jobs
