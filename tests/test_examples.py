"""Every script in examples/ runs, at a tiny size, as a user would run it; README.md stays a short front door."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted(p.name for p in (ROOT / "examples").glob("*.py"))

# Per script: tiny arguments (besides --out) and a line its output must have.
RUNS = {
    "train_paper_agent.py": (["--budget", "64"],
                             r"rnnlm-tiny on paper-2gpu: agent best [\d.e-]+ s after 64 evaluations .*single GPU [\d.e-]+ s; "
                             r"lower bound [\d.e-]+ s"),
    "evaluate_my_agent.py": (["--budget", "20"], r"rnnlm-tiny-2gpu +evaluate_my_agent:greedy +budget 20 +[\d.e-]+ s"),
    "place_my_model.py": (["--width", "64", "--layers", "2", "--batch", "32", "--budget", "20"],
                          r"hill_climbing: [\d.]+ ms per step; single GPU [\d.]+ ms"),
    "sb3_graph_extractor.py": (["--timesteps", "64"], r"64 steps, 64 episodes; mean episode reward"),
}
NO_OUT = {"sb3_graph_extractor.py"}  # writes nothing


def test_every_example_has_a_run():
    assert set(EXAMPLES) == set(RUNS)


# The SB3 training run is "slow" as the other SB3 training tests are (`-m "not slow"` skips them).
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n == "sb3_graph_extractor.py" else n
                                  for n in EXAMPLES])
def test_example_runs(name, tmp_path):
    args, expected = RUNS[name]
    out = [] if name in NO_OUT else ["--out", str(tmp_path / "out")]
    # Run from a folder outside the checkout: an example may rely only on the installed packages.
    done = subprocess.run([sys.executable, str(ROOT / "examples" / name), *args, *out], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(expected, done.stdout), done.stdout
    if name == "evaluate_my_agent.py":
        assert (tmp_path / "out" / "results.jsonl").is_file()
        assert "## Methods at equal budgets" in (tmp_path / "out" / "report" / "report.md").read_text()
    if name == "place_my_model.py":
        assert (tmp_path / "out" / "my_mlp-placed.pb").stat().st_size > 0


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_has_help(name):
    if name == "sb3_graph_extractor.py":
        pytest.importorskip("stable_baselines3")
    done = subprocess.run([sys.executable, str(ROOT / "examples" / name), "--help"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and "usage:" in done.stdout, done.stderr[-2000:]


def test_readme_is_a_short_front_door():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    lines = readme.splitlines()
    block = lines.index("```bash")  # the first code block: the two commands CI and .ci/run rely on
    assert lines[block + 1].startswith("bash setup.sh && .venv/bin/python -m agents.reinforce_seq2seq")
    assert lines[block + 2].startswith("bash setup.sh --dev && .venv/bin/python -m pytest")
    named = set(re.findall(r"examples/(\w+\.py)", readme))
    assert named >= {"train_paper_agent.py", "evaluate_my_agent.py", "place_my_model.py"}
    assert named <= set(EXAMPLES), named - set(EXAMPLES)
    for link in re.findall(r"\]\(((?:docs|examples)/[^)#]+)", readme):
        if link.startswith("examples/"):
            assert (ROOT / link).is_file(), link
