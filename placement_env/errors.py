"""Every public error of placement_env, its baselines and agents; each message names the bad value and what is accepted."""

__all__ = [
    "PlacementEnvError",
    "GraphImportError",
    "NoTrainingOpError",
    "UnknownShapeError",
    "UnknownBenchmarkError",
    "UnknownClusterError",
    "ClusterConfigError",
    "GraphFormatError",
    "InvalidPlacementError",
    "InvalidActionError",
    "ArgumentError",
    "GraphMismatchError",
    "ClusterUnreachableError",
    "IsolationError",
    "DriverError",
    "SideEffectOpError",
    "InfrastructureError",
    "RayUnreachableError",
    "WorkerStartError",
    "BudgetExhausted",
    "UnknownMethodError",
    "MethodConfigError",
    "MethodArgumentError",
    "MethodFileNotFoundError",
    "ResultsFormatError",
    "ResultsBusyError",
    "UnknownSuiteError",
    "SuiteFileError",
    "MapperNotFoundError",
    "MapperError",
    "NoExpertPlacementError",
    "CheckpointMismatchError",
    "CheckpointFieldError",
    "OutputPathError",
    "LinkRunsError",
    "SolverError",
]


class PlacementEnvError(Exception):
    """Base class of every error placement_env raises on purpose."""


class GraphImportError(PlacementEnvError, ValueError):
    """A TensorFlow graph could not be read or turned into an OpGraph."""


class NoTrainingOpError(GraphImportError):
    """A graph has nothing that looks like one training step to fetch."""


class UnknownShapeError(GraphImportError):
    """Some op outputs have no static shape, so their size in bytes is unknown."""


class UnknownBenchmarkError(PlacementEnvError, KeyError):
    """A benchmark name that is not one of the registered ones."""

    def __str__(self) -> str:  # KeyError would print the message quoted
        return str(self.args[0]) if self.args else ""


class UnknownClusterError(PlacementEnvError, KeyError):
    """A cluster name that is not a preset, a `local:N` spec or a JSON file."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class ClusterConfigError(PlacementEnvError, ValueError):
    """A cluster description with a missing or out-of-range field."""


class GraphFormatError(PlacementEnvError, ValueError):
    """A serialised OpGraph file that is corrupt or from an incompatible version."""


class InvalidPlacementError(PlacementEnvError, ValueError):
    """A placement array of the wrong length, dtype or device range for its graph and cluster."""


class InvalidActionError(PlacementEnvError, ValueError):
    """An env action of the wrong shape, type or range for the env's action space."""


class ArgumentError(PlacementEnvError, ValueError, TypeError):
    """A keyword or argument of a public function (an env keyword, a budget, a seed, a runtime name) of
    the wrong type or outside its accepted range; a ValueError and a TypeError, so that either except
    clause catches it."""


class GraphMismatchError(PlacementEnvError, ValueError):
    """A placement was applied to a TF graph that does not hold the OpGraph's ops."""


# ---- cluster and runtimes ----
class ClusterUnreachableError(PlacementEnvError, ConnectionError):
    """A server of a TF cluster (``cluster_from_spec``) did not answer in time."""


class IsolationError(PlacementEnvError, RuntimeError):
    """Local workers cannot be kept off the network here: no private network namespace for the TF
    workers, or a local Ray node that would not stay on 127.0.0.1."""


class DriverError(PlacementEnvError, RuntimeError):
    """The driver process failed to start or broke the protocol."""


class SideEffectOpError(PlacementEnvError, ValueError):
    """A graph sent to measured workers holds ops that are not on the allowlist of a training step's ops
    (among them those that write or read host files, print, run Python, open network connections or
    end the process); ``ops`` lists them as (node, op type, refused family or why not listed)."""

    def __init__(self, message: str, ops: tuple[tuple[str, str, str], ...] = ()) -> None:
        super().__init__(message)
        self.ops = tuple(ops)


class InfrastructureError(PlacementEnvError, RuntimeError):
    """The machinery that measures placements failed on every try (a worker died or stopped, the
    driver hung or did not start): the placement has no runtime, good or bad, and is charged
    nothing. ``measurement`` is the failed Measurement (``failure="infrastructure"``)."""

    def __init__(self, message: str, measurement: object = None) -> None:
        super().__init__(message)
        self.measurement = measurement


class RayUnreachableError(PlacementEnvError, ConnectionError):
    """The Ray cluster at the given address does not answer."""


class WorkerStartError(PlacementEnvError, RuntimeError):
    """The parallel workers could not be started (or did not become ready in time)."""


# ---- methods and the harness ----
class BudgetExhausted(PlacementEnvError, RuntimeError):
    """A method asked for more runtime evaluations than its budget allows."""


class UnknownMethodError(PlacementEnvError, KeyError):
    """A method name that is neither built in nor an importable ``module:callable``."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class MethodConfigError(PlacementEnvError, ValueError):
    """A method cannot run as it is configured (e.g. the checkpoint named by an environment variable is
    unreadable): no result of the method on the task. The harness records the row apart, as not finished
    work, so a rerun after the configuration is fixed does it again."""


class MethodArgumentError(MethodConfigError):
    """A method spec (``name@key=value,...`` or ``pe.method(name, key=value)``) that is malformed, or has a key the
    method does not take or a value it does not accept; the message names the key or value and what is accepted.
    Raised when the spec is read, before any run starts."""


class MethodFileNotFoundError(MethodConfigError, FileNotFoundError):
    """A file a method is configured to read (e.g. its checkpoint) does not exist."""


class OutputPathError(PlacementEnvError, ValueError):
    """A file or folder a command is to write that cannot be written (a file where a folder is asked,
    a path under a file, a folder without write permission)."""


class LinkRunsError(PlacementEnvError, ValueError):
    """A link microbenchmark results file (``calibrate --link-runs``) that is missing, not JSON, has no
    usable rows, or whose rows give no host transfer bandwidth."""


class ResultsFormatError(PlacementEnvError, ValueError):
    """A results file line that is not a valid row (bad JSON, a missing column, a bad value)."""


class ResultsBusyError(PlacementEnvError, RuntimeError):
    """Another run is writing the same results file (its advisory lock is held)."""


class UnknownSuiteError(PlacementEnvError, KeyError):
    """A suite name that is not defined."""

    def __str__(self) -> str:
        return str(self.args[0])


class SuiteFileError(PlacementEnvError, ValueError):
    """A suite file (TOML or JSON) that cannot be read as one: the message names the file, the line, the field and
    what it accepts."""


# ---- raised by the baselines and agents (defined here so that every public error is in one place) ----
class MapperNotFoundError(MethodConfigError, FileNotFoundError):
    """The Scotch mapper (``scotch_gmap`` / ``gmap``) is not installed: the method cannot run on this
    machine, so the harness redoes its rows once it is."""


class MapperError(PlacementEnvError, RuntimeError):
    """The Scotch mapper (or ``amk_grf``) failed, timed out or wrote an unreadable mapping."""


class NoExpertPlacementError(PlacementEnvError, ValueError):
    """The problem's benchmark has no expert placement (or the cluster has no GPU for it)."""


class CheckpointMismatchError(PlacementEnvError, ValueError):
    """``--resume`` with a checkpoint that cannot be used: unreadable, or of another version, benchmark,
    cluster, runtime or graph shape."""


class CheckpointFieldError(CheckpointMismatchError):
    """``--resume`` with a checkpoint whose field ``field`` holds a value of the wrong type or range for
    this run, or whose stored best placement does not re-evaluate to its recorded runtime."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field


class SolverError(PlacementEnvError, RuntimeError):
    """The exact solver's process crashed, overran its time limit or wrote no result (the caller's process and
    everything it holds are untouched)."""
