"""The run folder every agent's command line writes: its file names, atomic writes, the CSV log (written and
read back on resume), the TensorBoard log, ``best_placement.json`` and the placed TF graph of the best placement.

Writes go through a temporary file and a rename, so a run killed mid-write never leaves half a file.
"""
from __future__ import annotations

import csv
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any, Callable, Collection, Sequence

# the files every agent's run folder gets
LOG = "log.csv"
BEST_JSON = "best_placement.json"
BEST_PB = "best_placement.pb"
CURVE = "learning_curve.png"
TENSORBOARD = "tensorboard"
FLOAT32_MAX = 3.4028234663852886e38  # TensorBoard stores float32 scalars: inf, NaN and larger values are left out


def atomic_write(path: Path, write: Callable[[Any], None], binary: bool = False) -> None:
    """Write ``path`` through a temporary file in its folder and a rename, so a crash never leaves half a file;
    a write that fails leaves ``path`` as it was and removes the temporary file."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb" if binary else "w", **({} if binary else {"newline": ""})) as handle:
            write(handle)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_png(path: Path, figure: Any) -> None:
    """Write the matplotlib ``figure`` to ``path`` as PNG, atomically."""
    import io

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    atomic_write(path, lambda handle: handle.write(buffer.getvalue()), binary=True)


def write_json(path: Path, record: Any) -> None:
    """Write ``record`` to ``path`` as indented JSON, atomically (e.g. ``best_placement.json``)."""
    atomic_write(path, lambda handle: json.dump(record, handle, indent=1))


def run_dir(agent: str, *parts: str) -> Path:
    """Default output folder of an agent's run: ``runs/<agent>/<part>-<part>-...`` with unsafe characters as ``_``."""
    return Path("runs") / agent / re.sub(r"[^A-Za-z0-9_.-]+", "_", "-".join(parts))


def write_log(path: Path, rows: Sequence[dict[str, float]], columns: Sequence[str]) -> None:
    """The CSV log ``path``: a header of ``columns``, then one line per row (other keys are left out)."""
    def write(handle: Any) -> None:
        writer = csv.DictWriter(handle, fieldnames=list(columns), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)

    atomic_write(path, write)


def read_log(path: Path, counts: Collection[str] = ()) -> list[dict[str, float]]:
    """The rows of the CSV log ``path`` ([] if there is none): the ``counts`` columns as int, the rest as float."""
    if not path.exists():
        return []
    with open(path, newline="") as handle:
        return [{k: int(v) if k in counts else float(v) for k, v in row.items()} for row in csv.DictReader(handle)]


class TensorBoardLog:
    """The log rows as TensorBoard scalars in ``directory`` (``tensorboard --logdir <out dir>``), one point per row
    at step ``row[step]``, for each value that float32 holds. Written with ``tf.summary`` (which needs the
    tensorboard package, in the ``agents`` extra). Opening it replaces the folder's event files by ``rows`` (a
    resumed run's history), so steps never double."""

    def __init__(self, directory: Path, rows: Sequence[dict[str, float]] = (), step: str = "evaluations") -> None:
        import tensorflow as tf

        shutil.rmtree(directory, ignore_errors=True)
        self._tf, self._step = tf, step
        self._writer = tf.summary.create_file_writer(str(directory))
        for row in rows:
            self.write(row)

    def write(self, row: dict[str, float]) -> None:
        with self._writer.as_default(step=int(row[self._step])):
            for key, value in row.items():
                if key != self._step and isinstance(value, (int, float)) and abs(value) <= FLOAT32_MAX:
                    self._tf.summary.scalar(key, value)

    def close(self) -> None:
        self._writer.flush()
        self._writer.close()


def export_best(benchmark: str, cluster: str, placement: Any, path: Path) -> str:
    """Write the placed TF graph of ``placement``; a line saying where, or why not."""
    try:
        from placement_env import export_placed_graph, load_benchmark, load_cluster

        export_placed_graph(load_benchmark(benchmark), load_cluster(cluster), placement, str(path))
        return f"placed TF graph: {path}"
    except Exception as error:  # noqa: BLE001 - e.g. a synthetic graph without a GraphDef
        return f"note: no placed TF graph written ({type(error).__name__}: {error})"


def export_written_best(benchmark: str, cluster: str, out: Path) -> str | None:
    """:func:`export_best` of the placement in the run folder ``out``'s ``best_placement.json`` to its
    ``best_placement.pb``; None if the run has written no best placement."""
    if not (out / BEST_JSON).exists():
        return None
    return export_best(benchmark, cluster, json.loads((out / BEST_JSON).read_text())["placement"], out / BEST_PB)
