"""Exceptions raised by placement_env; each message names the bad value and what is accepted."""


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


class GraphMismatchError(PlacementEnvError, ValueError):
    """A placement was applied to a TF graph that does not hold the OpGraph's ops."""
