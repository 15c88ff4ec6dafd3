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


def test_cluster_pictures_of_a_topology_and_of_pairwise_links(tmp_path, capsys):
    from placement_env.render.topology import _tree_positions

    for name in ("k80-4gpu", "paper-2gpu"):
        picture = tmp_path / f"{name}.png"
        assert main(["cluster", name, "--plot", str(picture)]) == 0
        assert f"picture written to {picture}" in capsys.readouterr().out
        assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and picture.stat().st_size > 10_000
    # the K80 machine as a tree: the host switch on top, the boards below it, every die below its board
    positions = _tree_positions(pe.load_cluster("k80-4gpu"))
    assert positions["host"][1] == 0 and positions["k80:0"][1] == positions["k80:1"][1] == -1
    assert {positions[f"gpu:{i}"][1] for i in range(4)} == {-2.0}
    assert positions["k80:0"][0] == (positions["gpu:0"][0] + positions["gpu:1"][0]) / 2
    assert main(["cluster", "--plot", str(tmp_path / "x.png")]) == 2
    assert "--plot needs a cluster" in capsys.readouterr().err
    assert main(["cluster", "k80-2gpu", "--plot", str(tmp_path)]) == 2  # a folder, not a file
    assert "--plot" in capsys.readouterr().err


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
    assert "-n/--placements 0: expected an integer >= 4" in capsys.readouterr().err


def test_output_paths_that_cannot_be_written_are_a_sentence_before_any_work(tmp_path, capsys):
    """A file where a folder is asked, or a path under a file: exit 2 naming the flag, the path and what is
    accepted, before calibrating (minutes of measuring) or running anything."""
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    results = tmp_path / "results.jsonl"
    results.write_text("")
    cases = [
        (["calibrate", "rnnlm-tiny", "-o", f"{a_file}/c.json"],
         f"argument -o/--output: {a_file}/c.json: {a_file} is a file, so nothing can be made under it"),
        (["run", "--suite", "tiny", "--methods", "single_gpu", "-o", f"{a_file}/r.jsonl"],
         f"argument -o/--results: {a_file}/r.jsonl: {a_file} is a file"),
        (["run", "--suite", "tiny", "--methods", "single_gpu", "-o", str(tmp_path)],
         f"argument -o/--results: {tmp_path} is a folder; give a file path"),
        (["report", str(results), "-o", str(a_file)], f"argument -o/--out-dir: {a_file} is a file; give a folder"),
        (["report", str(results), "-o", f"{a_file}/report"], f"argument -o/--out-dir: {a_file}/report: {a_file} is"),
    ]
    for argv, message in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file", "results.jsonl"]


def test_a_file_that_cannot_be_made_after_all_is_a_sentence(tmp_path, capsys):
    """Paths the checks may pass but the OS refuses (here: a file in /proc, for root too) end in one line."""
    assert main(["run", "--suite", "tiny", "--methods", "single_gpu", "-o", "/proc/placement_env_results.jsonl"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("placement-env: error: ") and err.count("\n") == 1, err
    assert "/proc/placement_env_results.jsonl" in err
