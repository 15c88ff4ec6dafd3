"""Every public name the README uses is importable from where it says, and errors share one base."""
from __future__ import annotations

import importlib
import os
import re
from pathlib import Path

import placement_env as pe

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_every_pe_name_in_the_readme_exists():
    names = sorted(set(re.findall(r"\bpe\.([A-Za-z_][A-Za-z0-9_]*)", README)))
    assert names, "the README uses no pe.* names"
    missing = [name for name in names if not hasattr(pe, name)]
    assert not missing, f"README names pe.{missing} that placement_env does not export"


def test_every_module_path_in_the_readme_exists():
    root = Path(__file__).resolve().parents[1]
    paths = sorted(set(re.findall(r"`((?:placement_env|agents|baselines|experiments|docs|tests)/[A-Za-z0-9_./]*)`", README)))
    missing = [path for path in paths if not (root / path).exists()]
    assert not missing, f"README points to {missing}, which are not in the tree"


def test_every_python_m_command_in_the_readme_resolves():
    for module in sorted(set(re.findall(r"python -m ((?:placement_env|agents|experiments)[A-Za-z0-9_.]*)", README))):
        assert importlib.util.find_spec(module) is not None, f"README runs python -m {module}, which is not a module"


def test_every_public_error_is_a_placement_env_error_and_exported():
    for name in pe.errors.__all__:
        error = getattr(pe, name)
        assert issubclass(error, pe.PlacementEnvError), name


def test_a_bad_argument_is_both_a_value_error_and_a_type_error():
    assert issubclass(pe.ArgumentError, ValueError) and issubclass(pe.ArgumentError, TypeError)
    assert "ArgumentError" in pe.errors.__all__


def test_making_the_env_prints_no_tensorflow_start_up_lines_and_imports_tensorflow_only_to_build(tmp_path):
    """Quiet by default: no absl / oneDNN / CPU-feature notices, unless the user's TF_CPP_MIN_LOG_LEVEL asks. An
    empty graph cache makes the env build its benchmark and its costs, which imports TensorFlow; once they are
    cached, making the env and taking a step do not import it."""
    import subprocess
    import sys

    script = ("import sys, gymnasium as gym, placement_env\n"
              "env = gym.make('DevicePlacement-v0', benchmark='rnnlm-tiny')\nenv.reset(seed=0)\n"
              "env.step(env.action_space.sample())\nprint('made', 'tensorflow' in sys.modules)")
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}

    def run(cache: str, **extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                              env={**env, "PLACEMENT_ENV_CACHE": str(tmp_path / cache), **extra})

    quiet = run("cache")
    assert quiet.returncode == 0 and quiet.stdout.strip() == "made True", quiet.stderr[-2000:]
    assert "cpu_feature_guard" not in quiet.stderr and "absl::InitializeLog" not in quiet.stderr, quiet.stderr
    cached = run("cache")
    assert cached.returncode == 0 and cached.stdout.strip() == "made False", cached.stderr[-2000:]
    asked = run("another_cache", TF_CPP_MIN_LOG_LEVEL="0")
    assert asked.returncode == 0 and "cpu_feature_guard" in asked.stderr
