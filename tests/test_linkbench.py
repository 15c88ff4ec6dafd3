"""placement-env linkbench: its flags, and the file it writes, which calibrate --link-runs reads."""
from __future__ import annotations

import json

import numpy as np
import pytest

from placement_env.calibration.link_bench import fanout_graph, fanout_placement, measure_links, write_link_runs
from placement_env.calibration.link_rows import host_bandwidth_from_files
from placement_env.cli import main


@pytest.mark.parametrize("flags, message", [
    (["--workers", "1"], "--workers 1: expected an integer >= 2"),
    (["--steps", "0"], "--steps 0: expected an integer >= 1"),
    (["--megabytes", "0"], "--megabytes 0.0: expected a finite number > 0"),
])
def test_bad_flags_exit_2_before_any_worker_starts(flags, message, capsys):
    assert main(["linkbench", *flags]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("kwargs, message", [({"workers": 1}, "workers=1"), ({"steps": 0}, "steps=0"),
                                             ({"megabytes": ()}, r"megabytes=\[\]")])
def test_measure_links_refuses_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        measure_links(**kwargs)


def test_the_written_rows_give_calibrate_its_bandwidth(tmp_path):
    bandwidth = 2e9  # each end of a host transfer: the extra time grows by 2 / bandwidth per byte
    rows = [{"bytes": n, "destinations": k, "measured_s": 0.01 + k * 2 * n / bandwidth, "one_worker_s": 0.01,
             "graph": None, "placement": None} for n in (4_000_000, 16_000_000) for k in (1, 2)]
    path = write_link_runs(tmp_path / "runs" / "links.json", rows, workers=3)
    written = json.loads(path.read_text())
    assert written["workers"] == 3 and set(written["rows"][0]) == {"bytes", "destinations", "measured_s",
                                                                    "one_worker_s"}
    assert host_bandwidth_from_files([path]) == pytest.approx(bandwidth)


def test_each_consumer_is_placed_on_its_own_worker():
    graph = fanout_graph(4_000, 2)
    placement = fanout_placement(graph, 2)
    for i in range(2):
        ops = [k for k, name in enumerate(graph.op_names) if str(name).startswith(f"consumer_{i}/")]
        assert ops and set(placement[graph.group[ops]]) == {i + 1}
    assert np.count_nonzero(placement) < graph.n_groups  # the producer stays on worker 0
