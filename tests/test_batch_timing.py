"""The simulator's compiled batch saved with its placements and timed from the saved arrays, without TensorFlow."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import placement_env as pe
from experiments import batch_timing
from placement_env.costs import analytical_costs
from placement_env.runtime.simulated import SimulationPlan


@pytest.fixture()
def saved(tiny, paper2, tmp_path):
    plan = SimulationPlan(tiny, paper2, analytical_costs(tiny, paper2).seconds)
    allowed = pe.allowed_devices(tiny, paper2)
    rng = np.random.default_rng(0)
    drawn = rng.integers(0, paper2.n_devices, (6, tiny.n_groups))
    random = np.where(allowed[np.arange(tiny.n_groups), drawn], drawn, 0)
    batches = {"random placements": random, "one GPU": np.ones((2, tiny.n_groups), np.int64)}
    batch_timing.save(tmp_path / "paper-2gpu.npz", plan, batches)
    return plan, batches, tmp_path


def test_the_saved_batches_give_the_plans_runtimes(saved):
    plan, batches, folder = saved
    arguments, loaded = batch_timing.load(folder / "paper-2gpu.npz")
    assert list(loaded) == list(batches)
    for label, placements in batches.items():
        expected = np.array([m.runtime_s for m in plan.run_batch(placements)])
        np.testing.assert_array_equal(loaded[label][0], placements)
        np.testing.assert_array_equal(loaded[label][1], expected)
        for threads in (1, 2):
            np.testing.assert_array_equal(batch_timing.run(arguments, placements, threads), expected)
    times = batch_timing.per_placement(arguments, batches["one GPU"], 1, repeats=2)
    assert len(times) == 2 and min(times) > 0


def test_the_timing_runs_without_tensorflow(saved):
    _, _, folder = saved
    code = ("import sys; sys.modules['tensorflow'] = None\n"  # any import of TensorFlow fails
            "from experiments.batch_timing import main\n"
            f"sys.exit(main([{str(folder)!r}, '--threads', '1', '2', '--repeats', '1']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split(" (")[0] for line in lines] == ["paper-2gpu, random placements", "paper-2gpu, one GPU"]
    assert all("1 thread(s): best" in line and "2 thread(s): best" in line and "DIFFER" not in line
               for line in lines)


def test_a_folder_without_batches_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="no .npz files"):
        batch_timing.main([str(tmp_path)])
