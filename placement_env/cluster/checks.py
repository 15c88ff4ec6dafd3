"""Value rules shared by every part of the cluster package, and the argument checks of the layers above it.

Every check raises a ``ClusterConfigError`` (:func:`bad`) naming the path of the bad value
(``devices[1].kind``), the value as JSON would show it, where it sits (``device "gpu:0"``) and the rule
it breaks, so a user can fix a cluster JSON file, a constructor call or a TF cluster spec from the
message alone. :func:`check_bool` and :func:`check_number` are the one boolean and the one numeric
range check of the package; the layers above (the env, ``Problem``, ``evaluate``) call them with
``error=bad_argument``, which raises ``ArgumentError`` as ``name=value; expected rule``.

The physical limits below bound every numeric field of a cluster. They are generous (orders of
magnitude past any machine built, and past what calibration may fit: it scales rates by up to 1,000 either
way) and exist so that a typo or a fuzzed value (``peak_flops: 1e308``) fails here, naming the field,
rather than as an overflow or an infinite time deep in the simulator or in TF's cost model.
"""
from __future__ import annotations

import json
import math
import numbers
import re
from collections.abc import Callable, Mapping

import numpy as np

from ..errors import ArgumentError, ClusterConfigError

# One device's fp32 FLOP/s: from 1 kFLOP/s to 1 EFLOP/s (today's largest chips reach about 1e15).
FLOPS_RANGE = (1e3, 1e18)
# Bytes/s of a device's memory, a link or one thread's copies: from 1 kB/s (slower than a modem) to
# 10 PB/s (HBM3e gives about 8e12).
BANDWIDTH_RANGE = (1e3, 1e16)
# Seconds of a latency or a fixed cost (per op, per tensor): up to a minute; the failing signal of a
# placement that does not run is 100 s, so a fixed cost past a minute is a unit mistake.
SECONDS_RANGE = (0.0, 60.0)
# Bytes of one device's memory: from 1 byte to 1 PiB (the largest hosts have a few TiB).
MEMORY_RANGE = (1, 2**50)
# Ops one device runs at once (a CPU's inter-op threads, a GPU's streams): 1 to 4,096.
CONCURRENCY_RANGE = (1, 4096)
# Achieved shares of peak (compute_efficiency, memory_efficiency) and one op's share of a device
# (op_share): from 1/10,000 (one core of a 10,000-core device) to 1.
FRACTION_RANGE = (1e-4, 1.0)
# Devices in one cluster: the simulator keeps n x n link matrices and routes every ordered pair,
# so 40,000 devices would ask for gigabytes before any check; the largest preset has 9.
MAX_DEVICES = 1024
# Switches and links of one topology: every device's routes are searched over all of them (1,024 devices on
# one switch take seconds), and real machines have a few links per device.
MAX_SWITCHES = MAX_DEVICES
MAX_TOPOLOGY_LINKS = 8 * MAX_DEVICES

BANDWIDTH_RULE = "a positive number of bytes/s"
LATENCY_RULE = "a finite number of seconds"
ADDRESS_RULE = 'a "host:port" string with a port from 1 to 65535'
SHOWN_CHARS = 200  # a value longer than this as JSON is cut in messages


def _cut(text: str) -> str:
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "..."


def show(value: object) -> str:
    """A value as it would look in JSON where possible, else its repr; cut after SHOWN_CHARS characters."""
    try:
        return _cut(json.dumps(value))
    except (TypeError, ValueError, RecursionError):
        return _cut(repr(value))


def bad(path: str, value: object, rule: str, where: str = "") -> ClusterConfigError:
    """The error for ``value`` at ``path`` of a cluster (in ``where``), which must be ``rule``."""
    loc = f" ({where})" if where else ""
    return ClusterConfigError(f"{path} = {show(value)}{loc}: must be {rule}")


def bad_argument(name: str, value: object, rule: str, where: str = "") -> ArgumentError:
    """The error for keyword argument ``name`` (of ``where``) given ``value``, which must be ``rule``."""
    loc = f" (of {where})" if where else ""
    return ArgumentError(f"{name}={_cut(repr(value))}{loc}; expected {rule}")


def is_real(value: object) -> bool:
    """A real number, not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def is_int(value: object) -> bool:
    """An integer, not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


Failure = Callable[[str, object, str, str], Exception]  # (path, value, rule, where) -> the error to raise


def check_bool(value: object, path: str, where: str = "", error: Failure = bad) -> bool:
    """``value`` as a bool if it is a Python or numpy bool (a string such as ``"no"`` is refused, not truthy)."""
    if not isinstance(value, (bool, np.bool_)):
        raise error(path, value, "True or False", where)
    return bool(value)


def _limit(x: float) -> str:
    """A range limit as a person writes it: ``4,096``, ``1e16``, ``0.0001``."""
    if isinstance(x, int) or (float(x).is_integer() and abs(x) < 1e7):
        return f"{int(x):,}"
    return f"{x:g}".replace("e+0", "e").replace("e+", "e").replace("e-0", "e-")


def number_rule(what: str, low: float, high: float | None = None, low_open: bool = False) -> str:
    """The text of a range rule: ``"<what> >= low and <= high"`` (``> low`` when ``low_open``)."""
    rule = f"{what} {'>' if low_open else '>='} {_limit(low)}"
    return rule if high is None else f"{rule} and <= {_limit(high)}"


def check_number(value: object, path: str, low: float, high: float | None = None, *, what: str = "",
                 integer: bool = False, low_open: bool = False, rule: str = "", where: str = "",
                 error: Failure = bad) -> float | int:
    """``value`` as a float (an int with ``integer``) if it is a finite real number (an integer) from ``low``
    to ``high`` (no upper limit when None; above ``low`` when ``low_open``), else ``error(path, value, rule,
    where)``; ``rule`` defaults to ``number_rule(what, low, high)``."""
    rule = rule or number_rule(what or ("an integer" if integer else "a finite number"), low, high, low_open)
    if not (is_int(value) if integer else is_real(value)):
        raise error(path, value, rule, where)
    try:
        number = float(value)
    except OverflowError:  # an int too large for a float: past any limit
        raise error(path, value, rule, where) from None
    if not math.isfinite(number) or number < low or (low_open and number == low) \
            or (high is not None and number > high):
        raise error(path, value, rule, where)
    return int(value) if integer else number


def bytes_per_s(value: object, path: str, where: str = "") -> float:
    """``value`` as a float if it is a bandwidth in BANDWIDTH_RANGE."""
    return check_number(value, path, *BANDWIDTH_RANGE, what=BANDWIDTH_RULE, where=where)


def seconds(value: object, path: str, where: str = "") -> float:
    """``value`` as a float if it is a number of seconds in SECONDS_RANGE."""
    return check_number(value, path, *SECONDS_RANGE, what=LATENCY_RULE, where=where)


def check_device_count(n: int, path: str = "devices") -> None:
    """Fail when a cluster would have more than MAX_DEVICES devices (checked before any per-device work)."""
    if n > MAX_DEVICES:
        raise ClusterConfigError(f"{path}: {n:,} devices; a cluster has at most {MAX_DEVICES:,} (the simulator "
                                 "keeps n x n link matrices and a route per ordered device pair)")


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
