"""Scotch, MinCut and METIS baselines (baselines.partition)."""
import shutil

import numpy as np
import pytest

import placement_env as pe
from baselines import partition
from placement_env.problem import Problem, resolve_method
from placement_env.errors import PlacementEnvError


def _have_mapper() -> bool:
    try:
        partition.find_mapper()
    except partition.MapperNotFoundError:
        return False
    return True


needs_scotch = pytest.mark.skipif(not _have_mapper(), reason="the Scotch mapper (scotch_gmap/gmap) is not "
                                  "installed: apt-get install scotch (bash setup.sh does it as root)")

BENCHMARKS = ("rnnlm-tiny", "inception_v3-tiny")
CLUSTERS = ("paper-2gpu", "paper-4gpu")


@pytest.fixture(scope="module")
def graphs():
    return {name: pe.load_benchmark(name) for name in BENCHMARKS}


def _problem(graphs, benchmark, cluster):
    return Problem.make(graphs[benchmark], pe.load_cluster(cluster))


def _check_valid(problem, placement):
    placement = np.asarray(placement)
    assert placement.shape == (problem.graph.n_groups,)
    assert placement.dtype.kind == "i"
    assert problem.allowed[np.arange(len(placement)), placement].all()


def test_methods_are_registered():
    assert resolve_method("scotch") is partition.scotch
    assert resolve_method("mincut") is partition.mincut
    assert resolve_method("metis") is partition.metis


def test_source_graph_is_symmetric_and_positive(graphs):
    problem = _problem(graphs, "rnnlm-tiny", "paper-2gpu")
    g = partition.source_graph(problem)
    n = problem.graph.n_groups
    assert g.n_vertices == n and len(g.xadj) == n + 1 and g.xadj[-1] == g.n_arcs
    assert (g.vertex_load >= 1).all() and (g.edge_load >= 1).all()
    assert g.vertex_load.sum() < 2**31 and g.edge_load.sum() < 2**31
    arcs = {}
    for v in range(n):
        for k in range(g.xadj[v], g.xadj[v + 1]):
            assert g.adjncy[k] != v
            arcs[v, int(g.adjncy[k])] = int(g.edge_load[k])
    assert all(arcs[b, a] == w for (a, b), w in arcs.items())
    # the heaviest group carries the most compute
    seconds = partition.group_compute_seconds(problem)
    assert g.vertex_load.argmax() == seconds.argmax()


@needs_scotch
def test_mapper_output_is_used_on_a_predictable_graph(tmp_path):
    # two tightly bound pairs {0, 1} and {2, 3} joined by one light edge: a 2-way mapping cuts that edge
    loads = np.array([5, 5, 5, 5])
    xadj = np.array([0, 1, 3, 5, 6])
    adjncy = np.array([1, 0, 2, 1, 3, 2])
    eload = np.array([100, 100, 1, 1, 100, 100])
    (tmp_path / "s.grf").write_text(partition.grf_text(loads, xadj, adjncy, eload))
    (tmp_path / "t.tgt").write_text("cmpltw 2 1 1\n")
    mapping = partition.run_mapper("s.grf", "t.tgt", cwd=str(tmp_path))
    assert mapping[0] == mapping[1] and mapping[2] == mapping[3] and mapping[0] != mapping[2]
    assert set(mapping) == {0, 1}
    # a 1:3 weighted target: the heavier terminal gets most of a uniform chain
    n = 40
    xadj = np.concatenate([[0], np.cumsum([1] + [2] * (n - 2) + [1])])
    adjncy = np.concatenate([[1]] + [[v - 1, v + 1] for v in range(1, n - 1)] + [[n - 2]])
    (tmp_path / "c.grf").write_text(partition.grf_text(np.ones(n), xadj, adjncy, np.ones(len(adjncy))))
    (tmp_path / "w.tgt").write_text("cmpltw 2 1 3\n")
    counts = np.bincount(partition.run_mapper("c.grf", "w.tgt", cwd=str(tmp_path)), minlength=2)
    assert counts[1] == pytest.approx(30, abs=3) and counts[0] == pytest.approx(10, abs=3)


@needs_scotch
@pytest.mark.parametrize("cluster", CLUSTERS)
def test_scotch_placement_is_scotchs_mapping_after_kernel_fixup(graphs, cluster):
    problem = _problem(graphs, "rnnlm-tiny", cluster)
    raw = partition.scotch_mapping(problem)
    placement = partition.scotch(problem)
    _check_valid(problem, placement)
    ok = problem.allowed[np.arange(len(raw)), raw]
    np.testing.assert_array_equal(placement[ok], raw[ok])
    np.testing.assert_array_equal(placement[~ok], problem.allowed[~ok].argmax(axis=1))
    np.testing.assert_array_equal(placement, partition.fix_kernels(problem, raw))


@needs_scotch
def test_scotch_target_uses_link_bandwidths_when_they_differ(graphs, tmp_path):
    problem = _problem(graphs, "rnnlm-tiny", "paper-4gpu")
    mapper = partition.find_mapper()
    everything = np.arange(problem.cluster.n_devices)
    kind, name = partition.target_text(problem, everything, str(tmp_path), mapper)
    assert kind == "amk_grf"  # host links 12 GB/s, GPU peer links 10 GB/s
    assert (tmp_path / name).read_text().startswith("deco")
    gpus = everything[1:]
    kind, name = partition.target_text(problem, gpus, str(tmp_path), mapper)
    assert kind == "cmpltw"
    assert (tmp_path / name).read_text().split() == ["cmpltw", "4", "1000", "1000", "1000", "1000"]


@needs_scotch
def test_mapping_is_the_same_for_any_number_of_mapper_threads(monkeypatch):
    # without -Cd, Scotch 7 on 8 threads maps bert-tiny (244 groups) differently on nearly every run
    problem = Problem.make(pe.load_benchmark("bert-tiny"), pe.load_cluster("paper-4gpu"))
    placements = []
    for threads in (1, 8, 8, 8, 16):
        monkeypatch.setenv("SCOTCH_PTHREAD_NUMBER", str(threads))
        placements.append(partition.mincut(problem))
    for placement in placements[1:]:
        np.testing.assert_array_equal(placement, placements[0])


@needs_scotch
@pytest.mark.parametrize("benchmark", BENCHMARKS)
def test_scotch_spreads_load_over_several_devices(graphs, benchmark):
    problem = _problem(graphs, benchmark, "paper-4gpu")
    placement = partition.scotch(problem)
    _check_valid(problem, placement)
    seconds = partition.group_compute_seconds(problem)
    load = np.bincount(placement, weights=seconds, minlength=problem.cluster.n_devices)
    assert (load[1:] > 0).sum() >= 3  # at least three GPUs get work
    assert load.max() < 0.6 * load.sum()


@needs_scotch
@pytest.mark.parametrize("cluster", CLUSTERS)
@pytest.mark.parametrize("benchmark", BENCHMARKS)
def test_mincut_never_puts_gpu_capable_groups_on_the_cpu(graphs, benchmark, cluster):
    problem = _problem(graphs, benchmark, cluster)
    placement = partition.mincut(problem)
    _check_valid(problem, placement)
    cpus = [d for d, dev in enumerate(problem.cluster.devices) if dev.kind == "CPU"]
    gpus = [d for d, dev in enumerate(problem.cluster.devices) if dev.kind == "GPU"]
    gpu_capable = problem.allowed[:, gpus].any(axis=1)
    assert not np.isin(placement[gpu_capable], cpus).any()
    assert np.isin(placement[~gpu_capable], cpus).all()  # no GPU kernel: the CPU is the only choice
    assert len(np.unique(placement[gpu_capable])) >= 2


def test_mincut_sends_groups_without_a_gpu_kernel_to_the_cpu(graphs):
    # a fake mapping with every group on GPU 1: groups with a GPU-less op must come back on the CPU
    problem = _problem(graphs, "inception_v3-tiny", "paper-2gpu")
    allowed = problem.allowed
    fixed = partition.fix_kernels(problem, np.ones(problem.graph.n_groups, dtype=np.int64))
    _check_valid(problem, fixed)
    assert (fixed[allowed[:, 1]] == 1).all()
    assert (fixed[~allowed[:, 1]] == 0).all()


@pytest.mark.parametrize("cluster", CLUSTERS)
@pytest.mark.parametrize("benchmark", BENCHMARKS)
def test_metis_is_valid_and_balanced_by_compute_share(graphs, benchmark, cluster):
    problem = _problem(graphs, benchmark, cluster)
    placement = partition.metis(problem)
    _check_valid(problem, placement)
    g = partition.source_graph(problem)
    load = np.bincount(placement, weights=g.vertex_load, minlength=problem.cluster.n_devices) / g.vertex_load.sum()
    share = problem.cluster.peak_flops / problem.cluster.peak_flops.sum()
    gpus = share == share.max()
    assert (load[gpus] > 0).sum() >= 2
    # roughly by tpwgts: no device gets more than twice its share plus the heaviest group
    heaviest = g.vertex_load.max() / g.vertex_load.sum()
    assert (load <= 2 * share + heaviest).all()


def test_metis_without_edges_splits_greedily():
    parts = partition._greedy_split(np.array([4.0, 3, 3, 2, 2, 1, 1]), np.array([0.25, 0.75]))
    load = np.bincount(parts, weights=[4.0, 3, 3, 2, 2, 1, 1], minlength=2)
    assert load[1] > 2 * load[0] and load[0] > 0


def test_missing_mapper_error_names_the_install_command(graphs, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no scotch_gmap, no gmap
    assert shutil.which("scotch_gmap") is None
    problem = _problem(graphs, "rnnlm-tiny", "paper-2gpu")
    for method in (partition.scotch, partition.mincut):
        with pytest.raises(partition.MapperNotFoundError, match="apt-get install scotch") as info:
            method(problem)
        assert isinstance(info.value, PlacementEnvError)


@needs_scotch
def test_mapper_failure_reports_its_stderr(tmp_path):
    (tmp_path / "bad.grf").write_text("0\n2 2\n0 011\nfoo bar\n")  # not numbers
    (tmp_path / "t.tgt").write_text("cmpltw 2 1 1\n")
    with pytest.raises(partition.MapperError, match="Scotch mapper .* failed") as info:
        partition.run_mapper("bad.grf", "t.tgt", cwd=str(tmp_path))
    assert "graphLoad" in str(info.value)  # Scotch's own message, from its stderr
