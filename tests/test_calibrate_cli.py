"""`placement-env calibrate`: bad arguments are one clear line before any worker starts; several
benchmarks and link runs give one pooled fit (the slow test measures on real local workers)."""
import dataclasses
import json
import os
from pathlib import Path

import pytest

import placement_env as pe
from placement_env.calibration import host_bandwidth_from_files
from placement_env.cli import main

from tf_helpers import child_pids, needs_netns

LINK_RUN = str(Path(__file__).resolve().parents[1] / "docs/measurements/link_microbenchmark_run1.json")


def _row(n_bytes, destinations=1, extra_s=0.004):
    return {"bytes": n_bytes, "destinations": destinations, "measured_s": 0.001 + extra_s, "one_worker_s": 0.001}


@pytest.fixture()
def bad_files(tmp_path):
    """Link run files that are wrong in each way a user can get them wrong, by name."""
    files = {"not_json": "{ not json", "no_rows": json.dumps({"bandwidth": 1e9}),
             "row_without_bytes": json.dumps({"rows": [{"destinations": 1, "measured_s": 0.1, "one_worker_s": 0.0}]}),
             "one_size": json.dumps({"rows": [_row(4e6), _row(4e6)]}),
             "shrinking": json.dumps({"rows": [_row(4e6, extra_s=0.01), _row(64e6, extra_s=0.001)]})}
    paths = {}
    for name, text in files.items():
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(text)
    no_host = tmp_path / "links_only.json"
    dataclasses.replace(pe.load_cluster("local:2"), host_transfer=None).save(no_host)
    paths["links_only_cluster"] = no_host
    return paths


def test_bad_calibrate_arguments_are_one_line_before_any_worker(bad_files, tmp_path, capsys):
    out = tmp_path / "cluster.json"
    f = {name: str(path) for name, path in bad_files.items()}
    cases = [
        (["synthetic-tiny", "rnnlm-tiny", "synthetic-tiny"], "benchmarks synthetic-tiny given more than once"),
        (["synthetic-tiny", "--cluster", "paper-2gpu"], "--cluster paper-2gpu: calibrate measures on TF workers"),
        (["synthetic-tiny", "--link-runs", LINK_RUN, str(tmp_path / "nope.json")],
         f"--link-runs: link run {tmp_path / 'nope.json'}: no such file"),
        (["synthetic-tiny", "--link-runs", f["not_json"]], f"--link-runs: link run {f['not_json']}: not JSON"),
        (["synthetic-tiny", "--link-runs", f["no_rows"]], f"link run {f['no_rows']}: no \"rows\" list"),
        (["synthetic-tiny", "--link-runs", f["row_without_bytes"]],
         f"link run {f['row_without_bytes']}: row 0 has no number for bytes"),
        (["synthetic-tiny", "--link-runs", f["one_size"]], "need one-destination rows of at least two tensor sizes"),
        (["synthetic-tiny", "--link-runs", f["shrinking"]], "does not grow with its size"),
        (["synthetic-tiny", "--cluster", f["links_only_cluster"], "--link-runs", LINK_RUN],
         f"--link-runs: cluster {f['links_only_cluster']} has no host transfer"),
        (["synthetic-tiny", "rnnlm-tiny", "--link-runs", LINK_RUN, "-n", "3"], "-n/--placements 3: expected an integer >= 4"),
    ]
    before = set(child_pids(os.getpid()))
    for argv, message in cases:
        assert main(["calibrate", *argv, "-o", str(out)]) == 2, argv
        err = capsys.readouterr().err
        assert message in err and err.startswith("placement-env: error: ") and err.count("\n") == 1, (argv, err)
    assert set(child_pids(os.getpid())) <= before  # no worker was started
    assert not out.exists()


def test_host_bandwidth_from_files_pools_every_file(tmp_path):
    # each file alone has one tensor size; together two: each end at 4 GB/s
    for k, n_bytes in enumerate((4e6, 64e6)):
        (tmp_path / f"run{k}.json").write_text(json.dumps({"rows": [_row(n_bytes, extra_s=0.003 + 2 * n_bytes / 4e9),
                                                                    _row(n_bytes, destinations=2, extra_s=1.0)]}))
    assert host_bandwidth_from_files([tmp_path / "run0.json", tmp_path / "run1.json"]) == pytest.approx(4e9)
    with pytest.raises(pe.LinkRunsError, match="run0.json: need one-destination rows of at least two tensor sizes"):
        host_bandwidth_from_files([tmp_path / "run0.json"])


@pytest.mark.slow
@needs_netns
def test_calibrate_command_with_link_runs_keeps_their_bandwidth(tmp_path, capsys):
    """On real local:2 workers, the smallest graph and 4 placements: the pooled path end to end."""
    out = tmp_path / "local2.json"
    assert main(["calibrate", "synthetic-tiny", "-n", "4", "--link-runs", LINK_RUN, "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "(one fit)" in printed and "from the link runs" in printed and "synthetic-tiny" in printed
    cluster = pe.load_cluster(str(out))
    assert cluster.local_workers == 2
    assert cluster.host_transfer.bandwidth == pytest.approx(host_bandwidth_from_files([LINK_RUN]))
