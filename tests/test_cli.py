import subprocess
import sys

import pytest

import placement_env as pe
from placement_env.cli import main


def test_info_prints_the_summary(capsys):
    assert main(["info", "rnnlm-tiny", "--max-groups", "16", "--top", "3"]) == 0
    out = capsys.readouterr().out
    for expected in ("benchmark   rnnlm-tiny", "groups", "parameters", "activations", "op types (top 3",
                     "largest groups"):
        assert expected in out


def test_unknown_benchmark_is_a_clean_error(capsys):
    assert main(["info", "alexnet"]) == 2
    assert "unknown benchmark 'alexnet'" in capsys.readouterr().err


def test_cluster_listing_and_description(capsys):
    assert main(["cluster"]) == 0
    assert "paper-2gpu" in capsys.readouterr().out
    assert main(["cluster", "paper-4gpu"]) == 0
    assert "gpu:3" in capsys.readouterr().out
    assert main(["cluster", "nope"]) == 2


def test_module_entry_point():
    result = subprocess.run([sys.executable, "-m", "placement_env", "cluster"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0 and "paper-2gpu" in result.stdout


@pytest.mark.slow
def test_calibrate_command_writes_a_cluster(tmp_path):
    out = tmp_path / "local2.json"
    assert main(["calibrate", "synthetic-tiny", "-n", "8", "-o", str(out)]) == 0
    cluster = pe.load_cluster(str(out))
    assert cluster.n_devices == 2 and cluster.local_workers == 2


def test_calibrate_needs_enough_placements(capsys):
    from placement_env.cli import main

    assert main(["calibrate", "rnnlm-tiny", "-n", "0"]) == 2
    assert "n_placements = 0; expected an integer >= 4" in capsys.readouterr().err
