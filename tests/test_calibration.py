"""Calibration of the simulator: fitting on synthetic data, and a small real calibration on local:2."""
import dataclasses
import json
import math
import os

import numpy as np
import pytest

import placement_env as pe
from placement_env.calibration import (Calibration, calibrate, calibrated_cluster, fidelity, fit_and_report,
                                       fit_simulator, simulated_runtimes, with_link)
from placement_env.placement import random_placements
from placement_env.costs import analytical_costs
from placement_env.runtime.measured import MeasuredRuntime
from placement_env.runtime.workers import alive

from tf_helpers import child_pids, needs_netns


@pytest.fixture(scope="module")
def synth_costs(synth, local2):
    return analytical_costs(synth, local2)


@pytest.fixture(scope="module")
def links(local2):
    """local:2 with transfers on links alone (1 GB/s, 100 us; no host transfer): the link-only fit's cluster."""
    return dataclasses.replace(with_link(local2, 1e9, 100e-6), host_transfer=None)


def _raw(costs, cluster):
    """Analytical costs without the cluster's per-op overhead."""
    return costs.seconds - np.asarray(cluster.op_overhead_s)[None, :]


def _truth(graph, cluster, costs, placements, scale=3.0, overhead=5e-6, bandwidth=10e6, latency=250e-6):
    true_cluster = with_link(cluster, bandwidth, latency)
    return simulated_runtimes(graph, true_cluster, _raw(costs, cluster) * scale + overhead, placements)


def test_random_placements_respect_kernels_and_seed(synth, local2):
    a = random_placements(synth, local2, 20, 3, spread="dirichlet")
    b = random_placements(synth, local2, 20, 3, spread="dirichlet")
    assert a.shape == (20, synth.n_groups) and a.dtype == np.int64
    assert np.array_equal(a, b)
    assert not np.array_equal(a, random_placements(synth, local2, 20, 4, spread="dirichlet"))
    assert a.min() >= 0 and a.max() < local2.n_devices
    share = (a == 1).mean(axis=1)  # dirichlet: placements range from lopsided to even
    assert share.min() < 0.25 and share.max() > 0.75
    uniform = (random_placements(synth, local2, 20, 3, spread="uniform") == 1).mean(axis=1)
    assert np.all(np.abs(uniform - 0.5) < 0.25)
    # a group with a CPU kernel only is never placed on a GPU
    paper = pe.load_cluster("paper-2gpu")
    tiny = pe.load_benchmark("rnnlm-tiny")
    placements = random_placements(tiny, paper, 10, 0, spread="dirichlet")
    kinds = paper.kinds[placements]
    assert np.all((tiny.group_device_mask[None, :] >> kinds.astype(np.uint8)) & 1)


def test_fidelity_metrics():
    f = fidelity(np.array([1.0, 2.0, 3.0, np.nan]), np.array([2.0, 4.0, 6.0, 1.0]))
    assert f["n"] == 3 and f["spearman"] == pytest.approx(1.0)
    assert f["mape"] == pytest.approx(0.5)
    assert f["rms_log_ratio"] == pytest.approx(math.log(2))
    assert fidelity(np.array([3.0, 2.0, 1.0]), np.array([1.0, 2.0, 3.0]))["spearman"] == pytest.approx(-1.0)


def test_fit_recovers_known_parameters(synth, links, synth_costs):
    placements = random_placements(synth, links, 16, 1, spread="dirichlet")
    meas = _truth(synth, links, synth_costs, placements)
    raw = _raw(synth_costs, links)
    fit = fit_simulator(synth, links, raw, placements, meas)
    assert fit.loss < 1e-3
    assert fit.latency == pytest.approx(250e-6, rel=0.1)
    # scale and overhead trade off on this graph (grappler's op costs are tiny next to the overhead):
    # their sum over the graph is what is identified
    total = fit.scale[0] * raw[:, 0].sum() + fit.overhead[0] * synth.n_ops
    assert total == pytest.approx(3.0 * raw[:, 0].sum() + 5e-6 * synth.n_ops, rel=0.5)
    # with the overhead and links known, the scale comes out right
    known = fit_simulator(synth, links, raw, placements, meas, fit_overhead=False, fit_links=False,
                          overhead0=5e-6, start=(np.ones(2), 10e6, 250e-6))
    assert known.loss < 1e-4
    assert np.allclose(known.scale, 3.0, rtol=0.2)
    assert fit.scale.shape == fit.overhead.shape == (links.n_devices,)
    # with only the links free, the scale and overhead stay where they start
    fixed = fit_simulator(synth, links, _raw(synth_costs, links), placements, meas, fit_scale=False,
                          fit_overhead=False, overhead0=5e-6)
    assert np.all(fixed.scale == 1.0) and np.all(fixed.overhead == 5e-6)


def test_a_fit_on_two_graphs_separates_what_one_graph_cannot(synth, links, synth_costs):
    # synthetic-tiny's step is almost all per-op overhead; inception_v3-tiny's has a real share of
    # compute: pooled, they pin down the scale and the overhead that each alone trades off
    from placement_env.calibration import Dataset, fit_datasets

    inception = pe.load_benchmark("inception_v3-tiny")
    datasets = []
    for graph, costs in ((synth, synth_costs), (inception, pe.costs.analytical_costs(inception, links))):
        placements = random_placements(graph, links, 12, 1, spread="dirichlet")
        datasets.append(Dataset(graph, _raw(costs, links), placements, _truth(graph, links, costs, placements)))
    joint = fit_datasets(datasets, links)
    assert joint.loss < 1e-4
    assert np.allclose(joint.scale, 3.0, rtol=0.05) and np.allclose(joint.overhead, 5e-6, rtol=0.05)
    assert joint.latency == pytest.approx(250e-6, rel=0.05)
    alone = fit_simulator(synth, links, datasets[0].base_seconds, datasets[0].placements, datasets[0].measured)
    assert not np.allclose(alone.scale, 3.0, rtol=0.5)  # one overhead-bound graph cannot tell them apart
    with pytest.raises(ValueError, match="one measured runtime per placement"):
        Dataset(synth, datasets[0].base_seconds, datasets[0].placements, datasets[0].measured[:3])


def test_calibration_report_and_cluster(synth, links, synth_costs, tmp_path):
    placements = random_placements(synth, links, 20, 2, spread="dirichlet")
    noise = np.random.default_rng(0).lognormal(0, 0.03, len(placements))
    meas = _truth(synth, links, synth_costs, placements) * noise
    cal = fit_and_report(synth, links, synth_costs, placements, meas, folds=4, failures={"timeout": 1},
                         n_attempted=21)
    assert isinstance(cal, Calibration)
    assert cal.after["mape"] < 0.1 < cal.before["mape"]
    assert cal.after["spearman"] > 0.8 and cal.heldout["spearman"] > 0.8
    assert np.all(np.isfinite(cal.heldout_s)) and cal.folds == 4
    # the calibrated cluster reproduces the fitted op costs through the analytical cost model
    c = cal.cluster
    assert [d.name for d in c.devices] == [d.name for d in links.devices]
    assert c.local_workers == 2 and c.name == links.name
    off = ~np.eye(2, dtype=bool)
    assert np.all(c.bandwidth[off] == cal.fit.bandwidth) and np.all(c.latency[off] == cal.fit.latency)
    assert np.allclose(c.op_overhead_s, cal.fit.overhead)
    reproduced = analytical_costs(synth, c).seconds
    assert np.allclose(reproduced.sum(axis=0), cal.costs.seconds.sum(axis=0), rtol=0.02)
    path = tmp_path / "cal.json"
    c.save(path)
    assert pe.Cluster.load_json(path) == c
    data = json.loads(json.dumps(cal.to_dict()))
    assert data["failures"] == {"timeout": 1} and data["n_attempted"] == 21
    assert len(data["measured_s"]) == 20 and data["fidelity"]["after"]["n"] == 20
    text = cal.summary()
    assert "before calibration" in text and "held-out" in text and "timeout: 1" in text


def test_calibrated_cluster_scales_analytical_costs(synth, links, synth_costs):
    slower = calibrated_cluster(links, np.array([2.0, 4.0]), 5e7, 1e-4, op_overhead_s=np.array([0.0, 0.0]))
    costs = analytical_costs(synth, slower).seconds
    raw = _raw(synth_costs, links)
    assert np.allclose(costs[:, 0].sum(), 2 * raw[:, 0].sum(), rtol=0.02)
    assert np.allclose(costs[:, 1].sum(), 4 * raw[:, 1].sum(), rtol=0.02)


def test_calibrate_excludes_failed_measurements(synth, links, synth_costs):
    """A fake runtime: failures and exceptions are counted, never crash the run."""
    placements = random_placements(synth, links, 12, 5, spread="dirichlet")
    truth = _truth(synth, links, synth_costs, placements)

    class Fake:
        steps, warmup = 6, 2

        def __init__(self):
            self.k = 0

        def measure(self, graph, placement):
            k, self.k = self.k, self.k + 1
            if k == 3:
                raise RuntimeError("boom")
            if k == 5:
                return pe_measurement(False)
            return pe_measurement(True, truth[k])

    from placement_env.placement import Measurement

    def pe_measurement(ok, t=float("nan")):
        return Measurement(runtime_s=t, ok=ok, failure="" if ok else "crash")

    cal = calibrate(synth, links, runtime=Fake(), placements=placements, progress=False, costs=synth_costs, folds=3)
    assert cal.failures == {"RuntimeError": 1, "crash": 1}
    assert len(cal.measured_s) == 10 and cal.n_attempted == 12
    assert cal.after["mape"] < 0.05


def test_fit_recovers_a_host_transfer_from_several_graphs(synth, local2, synth_costs):
    # true workers: each end of a tensor costs 300 us + bytes at 0.5 GB/s of its CPU, the link 40 us;
    # the fit starts from the preset's 50 us and 2 GB/s
    from placement_env.calibration import Dataset, fit_datasets
    from placement_env.calibration.fit import fitted_cluster
    from placement_env.cluster import HostTransfer

    true_host = HostTransfer(per_tensor_s=300e-6, bandwidth=0.5e9)
    truth = dataclasses.replace(with_link(local2, 1e12, 40e-6), host_transfer=true_host)
    inception = pe.load_benchmark("inception_v3-tiny")
    datasets = []
    for graph, costs in ((synth, synth_costs), (inception, analytical_costs(inception, local2))):
        placements = random_placements(graph, local2, 12, 1, spread="dirichlet")
        raw = _raw(costs, local2)
        datasets.append(Dataset(graph, raw, placements, simulated_runtimes(graph, truth, raw * 3.0 + 5e-6, placements)))
    fit = fit_datasets(datasets, local2)
    assert fit.loss < 1e-3
    assert fit.host_transfer.per_tensor_s == pytest.approx(300e-6, rel=0.1)
    assert fit.host_transfer.bandwidth == pytest.approx(0.5e9, rel=0.2)
    assert np.allclose(fit.scale, 3.0, rtol=0.1) and np.allclose(fit.overhead, 5e-6, rtol=0.1)
    assert fit.bandwidth == local2.bandwidth[0, 1]  # the link's bandwidth is not a parameter then
    assert fitted_cluster(local2, fit).host_transfer == fit.host_transfer
    # with the bandwidth measured elsewhere (a link microbenchmark) it is kept
    kept = fit_datasets(datasets, local2, host_bandwidth=0.5e9)
    assert kept.host_transfer.bandwidth == 0.5e9 and kept.host_transfer.per_tensor_s == pytest.approx(300e-6, rel=0.1)


def test_host_bandwidth_from_link_rows():
    from placement_env.calibration.link_rows import host_bandwidth_from_links

    # extra time = 3 ms + 2 x bytes / 4 GB/s (encode, then decode): each end 4 GB/s
    rows = [{"bytes": b, "destinations": 1, "measured_s": 0.001 + 0.003 + 2 * b / 4e9, "one_worker_s": 0.001}
            for b in (4e6, 16e6, 64e6)] + [{"bytes": 4e6, "destinations": 2, "measured_s": 1.0, "one_worker_s": 0.0}]
    assert host_bandwidth_from_links(rows) == pytest.approx(4e9)
    with pytest.raises(ValueError, match="at least two tensor sizes"):
        host_bandwidth_from_links(rows[:1])


@pytest.mark.slow
@needs_netns
def test_measured_costs_profile(synth, local2):
    from placement_env.calibration import measured_costs

    with MeasuredRuntime(local2, steps=4, warmup=2, timeout_s=120) as rt:
        costs = measured_costs(synth, local2, runtime=rt, steps=3)
        pid = rt.workers.pid
        assert pid is not None
    assert not child_pids(os.getpid()) or pid not in child_pids(os.getpid())
    assert costs.seconds.shape == (synth.n_ops, 2)
    assert np.array_equal(costs.seconds[:, 0], costs.seconds[:, 1])  # identical workers: one profile
    assert costs.source == "measured on local:2"
    traced = np.count_nonzero(costs.seconds[:, 0] > 0)
    assert traced > synth.n_ops // 3
    assert 0 < costs.n_unreported < synth.n_ops
    assert 1e-5 < costs.seconds.sum() / 2 < 0.1  # a tiny graph: microseconds per op


@pytest.mark.slow
@needs_netns
def test_real_calibration_on_local2(synth, local2):
    """A real, small calibration: 16 placements, 5 timed steps each (about a minute on 2 cores)."""
    before = set(child_pids(os.getpid()))
    with MeasuredRuntime(local2, steps=7, warmup=2, timeout_s=120) as rt:
        cal = calibrate(synth, local2, n_placements=16, seed=0, runtime=rt, progress=False, folds=4)
        driver = rt.workers.pid
    assert driver is not None and not alive(driver)
    assert set(child_pids(os.getpid())) <= before  # no driver or worker left behind
    assert len(cal.measured_s) >= 14, cal.failures
    assert np.ptp(cal.measured_s) > 2 * np.min(cal.measured_s)  # placements differ in step time
    assert cal.after["spearman"] > 0.5, cal.summary()
    assert cal.after["mape"] < cal.before["mape"], cal.summary()
    assert cal.heldout["spearman"] > 0.3, cal.summary()


def test_pooled_calibration_with_link_runs_recovers_the_workers(synth, tiny, local2, tmp_path):
    # true workers: each end of a tensor 300 us + bytes at 0.5 GB/s of its CPU, 40 us on the link; a
    # link run file of that host gives the bandwidth, the pooled fit the rest, scored per graph
    from placement_env.calibration import fit_pooled, host_bandwidth_from_files, measured_dataset
    from placement_env.cluster import HostTransfer

    truth = dataclasses.replace(with_link(local2, local2.bandwidth[0, 1], 40e-6),
                                host_transfer=HostTransfer(300e-6, 0.5e9))
    rows = [{"bytes": b, "destinations": 1, "measured_s": 0.002 + 300e-6 + 2 * b / 0.5e9, "one_worker_s": 0.002}
            for b in (4e6, 16e6, 64e6)]
    (tmp_path / "links.json").write_text(json.dumps({"rows": rows}))
    bandwidth = host_bandwidth_from_files([tmp_path / "links.json"])
    assert bandwidth == pytest.approx(0.5e9)
    datasets = []
    for graph in (synth, tiny):
        costs = analytical_costs(graph, local2)
        placements = random_placements(graph, local2, 10, 1, spread="dirichlet")
        measured = simulated_runtimes(graph, truth, _raw(costs, local2) * 3.0 + 5e-6, placements)
        # one more placement whose measurement failed (nan): left out
        datasets.append(measured_dataset(graph, local2, costs, np.vstack([placements, placements[:1]]),
                                         np.append(measured, np.nan)))
    assert [len(d.measured) for d in datasets] == [10, 10]
    cal = fit_pooled(datasets, local2, folds=2, host_bandwidth=bandwidth)
    assert cal.fit.host_transfer.bandwidth == bandwidth
    assert cal.fit.host_transfer.per_tensor_s == pytest.approx(300e-6, rel=0.05)
    assert np.allclose(cal.fit.scale, 3.0, rtol=0.05) and cal.fit.latency == pytest.approx(40e-6, rel=0.05)
    assert [g.name for g in cal.graphs] == ["synthetic-tiny", "rnnlm-tiny"] and cal.folds == 2
    for g in cal.graphs:
        # held out: each placement by a fit on half the placements of both graphs, which this rugged loss
        # fits less exactly; in the right order, so they rank as measured
        assert g.before["mape"] > 0.5 and g.after["mape"] < 0.01, (g.name, cal.summary())
        assert g.heldout["n"] == 10 and g.heldout["mape"] < 0.25 and g.heldout["spearman"] > 0.9, (g.name, cal.summary())
    # the calibrated cluster carries the fit: analytical costs on it are the fitted op costs
    assert cal.cluster.host_transfer == cal.fit.host_transfer and cal.cluster.local_workers == 2
    assert np.allclose(cal.cluster.op_overhead_s, cal.fit.overhead)
    fitted = datasets[1].base_seconds * cal.fit.scale[None, :] + cal.fit.overhead[None, :]
    assert np.allclose(analytical_costs(tiny, cal.cluster).seconds.sum(axis=0), fitted.sum(axis=0), rtol=0.02)
    text = cal.summary()
    assert "(one fit)" in text and "from the link runs" in text and "2-fold held-out" in text and "rnnlm-tiny" in text
    with pytest.raises(ValueError, match=r"graphs \['rnnlm-tiny'\] given more than once"):
        fit_pooled([datasets[1], datasets[1]], local2, folds=0)
    links_only = dataclasses.replace(local2, host_transfer=None)
    with pytest.raises(ValueError, match="has no host transfer"):
        fit_pooled(datasets, links_only, folds=0, host_bandwidth=bandwidth)
