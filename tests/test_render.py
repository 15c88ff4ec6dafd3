"""Render modes: the Gantt chart image (drawn exactly from the simulated Schedule), its PNG file and the text table."""
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from placement_env.cluster import Cluster
from placement_env.costs import analytical_costs
from placement_env.placement import Measurement
from placement_env.render.gantt import gantt_figure, gantt_rgb, save_gantt
from placement_env.render.table import ansi_table
from placement_env.render.units import fmt_bytes
from placement_env.runtime.simulated import simulate


@pytest.fixture(scope="module")
def seconds(tiny, paper2):
    return analytical_costs(tiny, paper2).seconds


def placement(graph, cluster, seed):
    rng = np.random.default_rng(seed)
    result = rng.integers(0, cluster.n_devices, graph.n_groups)
    result[(graph.group_device_mask & 0b10) == 0] = 0  # CPU-only groups on cpu:0
    return result


def small_memory(cluster, gpu_bytes):
    data = cluster.to_dict()
    for device in data["devices"]:
        if device["kind"] == "GPU":
            device["memory_bytes"] = gpu_bytes
    return Cluster.from_dict(data)


def test_gantt_image_shape_dtype_and_content(tiny, paper2, seconds):
    m = simulate(tiny, paper2, seconds, placement(tiny, paper2, 0), schedule=True)
    image = gantt_rgb(tiny, paper2, m, width=900, height=600)
    assert image.shape == (600, 900, 3) and image.dtype == np.uint8
    assert (image < 250).any(axis=2).mean() > 0.05  # not blank
    assert len(np.unique(image.reshape(-1, 3), axis=0)) > 20  # many colours: bars by group
    default = gantt_rgb(tiny, paper2, m)
    assert default.shape[1] == 1200 and default.shape[0] >= 360 and default.dtype == np.uint8


def test_rendering_is_deterministic_and_placements_differ(tiny, paper2, seconds):
    a = simulate(tiny, paper2, seconds, placement(tiny, paper2, 1), schedule=True)
    b = simulate(tiny, paper2, seconds, placement(tiny, paper2, 2), schedule=True)
    image_a = gantt_rgb(tiny, paper2, a, width=800, height=500)
    assert np.array_equal(image_a, gantt_rgb(tiny, paper2, a, width=800, height=500))
    assert not np.array_equal(image_a, gantt_rgb(tiny, paper2, b, width=800, height=500))
    by_type = gantt_rgb(tiny, paper2, a, width=800, height=500, color_by="type")
    assert by_type.shape == image_a.shape and not np.array_equal(by_type, image_a)
    with pytest.raises(ValueError, match="color_by"):
        gantt_rgb(tiny, paper2, a, color_by="device")


def test_rendering_is_fast(tiny, paper2, seconds):
    m = simulate(tiny, paper2, seconds, placement(tiny, paper2, 3), schedule=True)
    gantt_rgb(tiny, paper2, m)  # first call imports matplotlib
    start = time.perf_counter()
    gantt_rgb(tiny, paper2, m)
    assert time.perf_counter() - start < 2.0  # well under 1 s on an idle machine


def test_drawing_is_exactly_the_schedule(tiny, paper2, seconds):
    """Every bar and memory step drawn is the Schedule's own number: render derives nothing."""
    names = [d.name for d in paper2.devices]
    for seed in range(4):
        m = simulate(tiny, paper2, seconds, placement(tiny, paper2, seed), schedule=True)
        s = m.schedule
        fig = gantt_figure(tiny, paper2, m, width=900, height=600)
        timeline, memory = fig.axes[:2]
        bars = {c.get_gid(): np.array([p.vertices[:4] for p in c.get_paths()]) for c in timeline.collections}
        for gid, start, end, row in (("ops", s.op_start, s.op_end, s.op_device),
                                     ("transfers", s.transfer_start, s.transfer_end, s.transfer_link)):
            x0, x1, y0 = bars[gid][:, 0, 0], bars[gid][:, 1, 0], bars[gid][:, 0, 1]
            assert len(x0) == len(start) > 0
            np.testing.assert_array_equal(x0, start)
            assert np.all(x1 >= end) and np.all((x1 == end) | (x1 - x0 < 1e-3 * s.makespan))  # hairlines widened
            if gid == "ops":
                np.testing.assert_array_equal(np.floor(y0).astype(int), row)  # device d's row is [d, d + 0.8]
            else:  # one row per link of the Schedule, in its order
                np.testing.assert_array_equal(np.unique(y0, return_inverse=True)[1], row)
        labels = [t.get_text() for t in timeline.get_yticklabels()][paper2.n_devices:]
        assert labels == [f"{names[a]}\u2192{names[b]} {fmt_bytes(n)}" for (a, b), n in zip(s.links, s.link_bytes)]
        for d in range(paper2.n_devices):
            (curve,) = [line for line in memory.get_lines() if line.get_gid() == f"memory {d}"]
            np.testing.assert_array_equal(np.asarray(curve.get_xdata())[:-1], s.memory_time)
            np.testing.assert_array_equal(np.asarray(curve.get_ydata())[:-1], s.memory_in_use[d])
            assert max(curve.get_ydata()) == m.peak_bytes[d]


def test_out_of_memory_schedule_renders_in_red(tiny, paper2, seconds):
    cluster = small_memory(paper2, 20 * 2**10)
    m = simulate(tiny, cluster, analytical_costs(tiny, cluster).seconds, placement(tiny, cluster, 4), schedule=True)
    assert not m.ok and m.failure == "oom"
    image = gantt_rgb(tiny, cluster, m, width=800, height=500)
    red = (image[..., 0] > 150) & (image[..., 1] < 80) & (image[..., 2] < 80)
    assert red[:40].sum() > 50  # the title
    table = ansi_table(tiny, cluster, m)
    assert "FAILED (oom)" in table and "OOM" in table and m.message in table


def test_failed_measurement_without_schedule_renders_a_text_panel(tiny, paper2, seconds):
    failed = Measurement(runtime_s=float("nan"), ok=False, failure="no_kernel",
                         message="group 3 is placed on gpu:0 (GPU), but its op 'x' has no GPU kernel",
                         peak_bytes=np.zeros(3, np.int64), busy_s=np.zeros(3), placement=np.zeros(tiny.n_groups, int),
                         runtime="sim")
    image = gantt_rgb(tiny, paper2, failed, width=700, height=400)
    assert image.shape == (400, 700, 3) and (image < 250).any(axis=2).mean() > 0.01
    crashed = Measurement(runtime_s=float("nan"), ok=False, failure="crash", message="worker 1 died")
    assert gantt_rgb(tiny, paper2, crashed, width=700, height=400).shape == (400, 700, 3)
    table = ansi_table(tiny, paper2, crashed)
    assert "FAILED (crash)" in table and "worker 1 died" in table and "n/a" in table
    ok_without_schedule = simulate(tiny, paper2, seconds, placement(tiny, paper2, 0))
    assert not np.array_equal(gantt_rgb(tiny, paper2, ok_without_schedule, width=700, height=400), image)


def test_ansi_table_lists_devices_and_numbers(tiny, paper2, seconds):
    p = placement(tiny, paper2, 5)
    m = simulate(tiny, paper2, seconds, p, schedule=True)
    table = ansi_table(tiny, paper2, m)
    lines = table.splitlines()
    for d, device in enumerate(paper2.devices):
        row = next(line for line in lines if line.startswith(device.name + " "))
        cells = row.split()
        assert cells[1] == device.kind
        assert int(cells[2]) == int((p == d).sum())
        assert int(cells[3]) == int((p[tiny.group] == d).sum())
        assert float(cells[4]) == pytest.approx(m.busy_s[d], rel=1e-5)
        assert f"{device.memory_bytes / 2**30:.2f} GiB" in row
    assert "status: ok" in table and f"bytes moved: {m.bytes_moved}" in table
    assert f"{m.runtime_s * 1e3:.3f} ms" in table


def test_save_gantt_writes_a_png(tiny, paper2, seconds, tmp_path):
    m = simulate(tiny, paper2, seconds, placement(tiny, paper2, 6), schedule=True)
    path = save_gantt(tiny, paper2, m, tmp_path / "gantt.png", width=640, height=400)
    data = (tmp_path / "gantt.png").read_bytes()
    assert path == tmp_path / "gantt.png" and data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (640, 400)


def test_renders_headless_without_touching_pyplot():
    code = (
        "import sys, numpy as np, placement_env as pe\n"
        "from placement_env.render.gantt import gantt_rgb\n"
        "from placement_env.runtime.simulated import simulate\n"
        "g = pe.load_benchmark('rnnlm-tiny'); c = pe.load_cluster('paper-2gpu')\n"
        "m = simulate(g, c, np.full((g.n_ops, 3), 1e-5), np.arange(g.n_groups) % 3, schedule=True)\n"
        "assert 'matplotlib.pyplot' not in sys.modules\n"
        "image = gantt_rgb(g, c, m, width=400, height=300)\n"
        "assert image.shape == (300, 400, 3), image.shape\n"
        "assert 'matplotlib.pyplot' not in sys.modules\n"
        "import matplotlib\n"
        "print('backend', matplotlib.rcParams._get_backend_or_none())\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "MPLBACKEND")}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "backend None" in result.stdout  # the user's backend choice is left unresolved
