"""The paper's machine as it was built: one 18-core Haswell Xeon and K80 boards on PCIe 3.

A Tesla K80 board is two GK210 dies (TF sees each as one GPU) behind an on-board PCIe switch
(PLX PEX8747) that shares one PCIe 3.0 x16 slot to the host. So the 2-GPU machine is one board
(both dies share the slot's bandwidth to the host) and the 4-GPU machine two boards, whose
traffic between boards crosses the CPU's root complex. Unlike the ideal presets, every device
here runs at its *achieved* rather than peak rate, a CPU op keeps only a few of the 18 cores
busy, every cross-device tensor pays TF's fixed send/recv cost, and a GPU has the memory TF can
allocate on an ECC-enabled die, not the nominal 12 GiB.

The free parameters (:data:`DEFAULT_PARAMETERS`: efficiencies, the CPU op share, the per-transfer
cost, the achieved PCIe bandwidth) are fitted to the seed paper's measured table by
:mod:`placement_env.calibration.paper_machine` and stored in ``paper_machine.json`` beside this
file; the fit's command and report say how well each model left out of the fit is predicted.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from ..errors import ClusterConfigError
from .device import Device
from .hardware import CPU_OP_OVERHEAD_S, GB, GIB, GPU_OP_OVERHEAD_S
from .model import Cluster, topology_cluster
from .topology import Link, Topology

FITTED = Path(__file__).with_name("paper_machine.json")

# Starting points of the fit and the values used before one exists (orders of magnitude, sources
# in reference.md section 6): kernels reach a fraction of peak; a CPU op uses a few cores; TF's
# _Send/_Recv costs tens of microseconds; pinned PCIe 3 copies reach ~12 of 15.75 GB/s.
DEFAULT_PARAMETERS: dict[str, float] = {
    "gpu_efficiency": 0.5,
    "cpu_efficiency": 0.5,
    "cpu_op_share": 4 / 18,
    "transfer_overhead_s": 50e-6,
    "pcie_bandwidth": 12.0 * GB,
}

# ECC on: nvidia-smi shows 11,441 MiB per die (approx.); the CUDA context takes ~80 MiB; TF's GPU
# allocator leaves max(300 MiB, 5% of the free memory) to the system (gpu_device.cc, MinSystemMemory).
_K80_FREE_BYTES = (11441 - 80) * 2**20
K80_USABLE_BYTES = int(_K80_FREE_BYTES - max(300 * 2**20, 0.05 * _K80_FREE_BYTES))

_HOST_MEMORY_BANDWIDTH = 68.0 * GB  # Intel ARK, E5-2699 v3: 4 channels DDR4-2133
_PCIE_HOP_LATENCY_S = 1e-6  # a PCIe switch or root-complex hop: under a microsecond (order of magnitude)


def fitted_parameters() -> dict[str, float]:
    """The fitted parameters (``paper_machine.json``), or the defaults when no fit was stored."""
    if not FITTED.exists():
        return dict(DEFAULT_PARAMETERS)
    stored = json.loads(FITTED.read_text(encoding="utf-8"))["parameters"]
    return check_parameters(stored)


def check_parameters(parameters: Mapping[str, float]) -> dict[str, float]:
    """``parameters`` with every key of DEFAULT_PARAMETERS and a positive finite value each."""
    missing = sorted(set(DEFAULT_PARAMETERS) - set(parameters))
    unknown = sorted(set(parameters) - set(DEFAULT_PARAMETERS))
    if missing or unknown:
        raise ClusterConfigError(f"K80 machine parameters: missing {missing}, unknown {unknown}; "
                                 f"expected {sorted(DEFAULT_PARAMETERS)}")
    out = {key: float(parameters[key]) for key in DEFAULT_PARAMETERS}
    bad = [key for key, value in out.items() if not 0 < value < float("inf")]
    if bad:
        raise ClusterConfigError(f"K80 machine parameters {bad}: must be positive and finite")
    return out


def k80_machine(n_gpus: int, parameters: Mapping[str, float] | None = None, name: str | None = None) -> Cluster:
    """The 18-core Haswell + ``n_gpus`` K80 dies (two per board) with ``parameters`` (default: the fit)."""
    if n_gpus not in (2, 4):
        raise ClusterConfigError(f"n_gpus = {n_gpus}: the paper's machines have 2 or 4 K80 dies")
    p = check_parameters(parameters) if parameters is not None else fitted_parameters()
    cpu = Device(
        name="cpu:0", kind="CPU",
        peak_flops=18 * 2.3e9 * 32,  # 18 cores x 2.3 GHz x 32 fp32 FLOP/cycle (2 AVX2 FMA x 8 lanes x 2)
        memory_bandwidth=_HOST_MEMORY_BANDWIDTH,
        memory_bytes=256 * GIB,  # a large host memory; the paper does not say, 256 GiB is typical
        concurrency=18,  # one inter-op thread per physical core
        tf_device="/job:localhost/replica:0/task:0/device:CPU:0",
        op_overhead_s=CPU_OP_OVERHEAD_S,
        compute_efficiency=p["cpu_efficiency"], memory_efficiency=p["cpu_efficiency"], op_share=p["cpu_op_share"],
    )
    gpus = [Device(
        name=f"gpu:{i}", kind="GPU",
        peak_flops=2496 * 2 * 875e6,  # one GK210 die: 2496 cores x 2 FLOP x 875 MHz boost = 4.37 TFLOP/s
        memory_bandwidth=240.0 * GB,  # K80 board: 480 GB/s GDDR5 over two dies
        memory_bytes=K80_USABLE_BYTES,
        concurrency=1,  # one compute stream per GPU in TF
        tf_device=f"/job:localhost/replica:0/task:0/device:GPU:{i}",
        op_overhead_s=GPU_OP_OVERHEAD_S,
        compute_efficiency=p["gpu_efficiency"], memory_efficiency=p["gpu_efficiency"],
    ) for i in range(n_gpus)]
    boards = n_gpus // 2
    pcie = p["pcie_bandwidth"]
    links = [Link("cpu:0", "host", _HOST_MEMORY_BANDWIDTH, 0.0, "host memory (DDR4-2133, 4 channels)")]
    links += [Link("host", f"k80:{b}", pcie, _PCIE_HOP_LATENCY_S, f"PCIe 3.0 x16 slot of board {b}")
              for b in range(boards)]
    links += [Link(f"gpu:{i}", f"k80:{i // 2}", pcie, _PCIE_HOP_LATENCY_S, f"die {i % 2} of board {i // 2} (PLX port)")
              for i in range(n_gpus)]
    topology = Topology(("host", *(f"k80:{b}" for b in range(boards))), tuple(links))
    return topology_cluster(name or f"paper-{n_gpus}gpu", [cpu, *gpus], topology,
                            transfer_overhead_s=p["transfer_overhead_s"], buffer_forwarding=True,
                            update_traffic=True,  # updates move their kernels' bytes (costs.update_traffic_bytes)
                            accumulate_sums=False,  # the TF of early 2017 had no grappler memory optimizer
                            copy_streams=True,  # TF's GPU copy streams (simulated.copy_stream_per_pair)
                            ready_fifo=True)  # TF's executor runs ready ops in the order they became ready
