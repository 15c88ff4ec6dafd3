"""The built-in machines (``PRESETS``) and ``local_cluster(n)``, the real local TF workers.

Each preset is one function that lists the machine's devices and either says how fast the link between
any two of them is (``linked_cluster``) or lists the switches and links that join them
(``topology_cluster``: shared ports and uplinks then queue transfers). Numbers are public spec-sheet
facts; each says where it comes from.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from types import MappingProxyType

from .checks import bad, is_int
from .device import Device
from .host_transfer import HostTransfer
from .hardware import CPU_OP_OVERHEAD_S, GB, GIB, GPU_OP_OVERHEAD_S, PCIE3
from .k80 import k80_machine
from .model import Cluster, linked_cluster, topology_cluster
from .topology import Link, Topology

MAX_LOCAL_WORKERS = 64  # one TF server process per worker; more than this is surely a typo

_CPU0_TF = "/job:localhost/replica:0/task:0/device:CPU:0"


def _gpu_tf(i: int) -> str:
    return f"/job:localhost/replica:0/task:0/device:GPU:{i}"


def _paper(n_gpus: int) -> Cluster:
    """The paper's machine: one Haswell 18-core Xeon and ``n_gpus`` K80 dies (GK210), over PCIe 3."""
    cpu = Device(
        name="cpu:0", kind="CPU",
        # Xeon E5-2699 v3: 18 cores x 2.3 GHz base x 32 fp32 FLOP/cycle (2 AVX2 FMA units x 8 lanes x 2)
        peak_flops=18 * 2.3e9 * 32,
        memory_bandwidth=68.0 * GB,  # Intel ARK: 4 channels DDR4-2133 = 68 GB/s
        memory_bytes=256 * GIB,  # a large host memory; the paper does not say, 256 GiB is typical
        concurrency=18,  # one inter-op thread per physical core
        tf_device=_CPU0_TF,
        op_overhead_s=CPU_OP_OVERHEAD_S,
    )
    gpus = [Device(
        name=f"gpu:{i}", kind="GPU",
        # Tesla K80 board: 8.74 TFLOP/s fp32 at 875 MHz boost over two GK210 dies
        # (2 x 2496 cores x 2 FLOP x 875 MHz); TF sees each die as one GPU: 4.37 TFLOP/s.
        peak_flops=2496 * 2 * 875e6,
        memory_bandwidth=240.0 * GB,  # K80 board: 480 GB/s GDDR5 over two dies
        memory_bytes=12 * GIB,  # 24 GiB GDDR5 per board, 12 GiB per die (nominal; ECC on leaves ~11.2 GiB)
        concurrency=1,  # one compute stream per GPU in TF
        tf_device=_gpu_tf(i),
        op_overhead_s=GPU_OP_OVERHEAD_S,
    ) for i in range(n_gpus)]

    def link(a: Device, b: Device) -> tuple[float, float]:
        # Host <-> GPU: PCIe 3.0 x16. GPU <-> GPU: peer-to-peer through the K80's on-board PLX
        # switch or the CPU root complex, measured a little below host copies: ~10 GB/s.
        return PCIE3 if "CPU" in (a.kind, b.kind) else (10.0 * GB, 10e-6)

    return linked_cluster(f"paper-{n_gpus}gpu", [cpu, *gpus], link)


def _dgx1_v100_4gpu() -> Cluster:
    """GPUs 0-3 of a DGX-1 (V100): a fully NVLink-connected quad of its hybrid cube-mesh."""
    cpu = Device(
        name="cpu:0", kind="CPU",
        # DGX-1 datasheet: 2x Xeon E5-2698 v4 (Broadwell, 20 cores, 2.2 GHz); 32 fp32 FLOP/cycle (AVX2 FMA)
        peak_flops=2 * 20 * 2.2e9 * 32,
        memory_bandwidth=2 * 4 * 8 * 2133e6,  # 2 sockets x 4 channels x 8 B x DDR4-2133 = 136.5 GB/s
        memory_bytes=512 * GIB,  # DGX-1 datasheet: 512 GB DDR4
        concurrency=40,  # physical cores
        tf_device=_CPU0_TF,
        op_overhead_s=CPU_OP_OVERHEAD_S,
    )
    gpus = [Device(
        name=f"gpu:{i}", kind="GPU",
        peak_flops=15.7e12,  # V100 SXM2 datasheet: 15.7 TFLOP/s fp32 (5120 cores x 2 x 1530 MHz)
        memory_bandwidth=900.0 * GB,  # HBM2
        memory_bytes=16 * GIB,  # V100 SXM2 16 GB: 16 GiB HBM2 stacks (nvidia-smi shows 16160 MiB)
        concurrency=1,
        tf_device=_gpu_tf(i),
        op_overhead_s=GPU_OP_OVERHEAD_S,
    ) for i in range(4)]
    # NVLink 2: 25 GB/s per direction per link, point to point; in the cube-mesh the pairs (0,3), (1,2),
    # (2,3) have two links and (0,1), (0,2), (1,3) one (nvidia-smi topo -m: NV2 / NV1). Copy latency
    # ~2 us (order of magnitude; calibration refines it).
    counts = {(0, 1): 1, (0, 2): 1, (0, 3): 2, (1, 2): 2, (1, 3): 1, (2, 3): 2}
    links = [Link(f"gpu:{a}", f"gpu:{b}", count * 25.0 * GB, 2e-6, f"NVLink 2 x{count}")
             for (a, b), count in counts.items()]
    # PCIe (DGX-1 V100 system architecture whitepaper, 2017: GPUs hang off PLX PCIe 3.0 switches, two
    # GPUs per switch, each switch on one x16 lane set of a CPU; GPUs 0-3 sit on CPU 0's two switches)
    bandwidth, latency = PCIE3
    links += [Link("cpu:0", "host", 2 * 4 * 8 * 2133e6, 0.0, "host memory (DDR4-2133, 2 x 4 channels)")]
    links += [Link("host", f"plx:{s}", bandwidth, latency, f"PCIe 3.0 x16 uplink of switch {s}") for s in (0, 1)]
    links += [Link(f"gpu:{i}", f"plx:{i // 2}", bandwidth, latency, "PCIe 3.0 x16") for i in range(4)]
    return topology_cluster("dgx1-v100-4gpu", [cpu, *gpus], Topology(("host", "plx:0", "plx:1"), tuple(links)),
                            update_traffic=True,  # updates move their kernels' bytes (costs.update_traffic_bytes)
                            copy_streams=True,  # TF's GPU copy streams (simulated.copy_stream_per_pair)
                            ready_fifo=True)  # TF's executor runs ready ops in the order they became ready


def _dgx_h100_8gpu() -> Cluster:
    """A DGX H100: 8 H100 SXM behind NVSwitch, PCIe 5 to two Sapphire Rapids sockets."""
    cpu = Device(
        name="cpu:0", kind="CPU",
        # DGX H100 datasheet: 2x Xeon Platinum 8480C, 56 cores each, 2.0 GHz base;
        # 64 fp32 FLOP/cycle (2 AVX-512 FMA units x 16 lanes x 2)
        peak_flops=2 * 56 * 2.0e9 * 64,
        memory_bandwidth=2 * 8 * 8 * 4800e6,  # 2 sockets x 8 channels x 8 B x DDR5-4800 = 614 GB/s
        memory_bytes=2048 * GIB,  # DGX H100 datasheet: 2 TB system memory
        concurrency=112,  # physical cores
        tf_device=_CPU0_TF,
        op_overhead_s=CPU_OP_OVERHEAD_S,
    )
    gpus = [Device(
        name=f"gpu:{i}", kind="GPU",
        peak_flops=67e12,  # H100 SXM datasheet: 67 TFLOP/s fp32 (non-tensor)
        memory_bandwidth=3.35e12,  # HBM3, 3.35 TB/s
        memory_bytes=80 * GIB,  # H100 SXM "80 GB": 80 GiB HBM3 (nvidia-smi shows 81559 MiB)
        concurrency=1,
        tf_device=_gpu_tf(i),
        op_overhead_s=GPU_OP_OVERHEAD_S,
    ) for i in range(8)]

    # NVLink 4 through the NVSwitch fabric (4 third-generation NVSwitch chips, non-blocking): each GPU's 18 links
    # x 25 GB/s = 450 GB/s per direction (H100 datasheet: 900 GB/s bidirectional), shared by all its peers.
    links = [Link(f"gpu:{i}", "nvswitch", 450.0 * GB, 2e-6, "NVLink 4 x18") for i in range(8)]
    # Host: each GPU's PCIe 5.0 x16 (64 GB/s raw per direction, ~55 GB/s achieved) to the host; how the
    # system's PCIe switches share uplinks is not modelled. Host memory: 2 sockets x 8 channels DDR5-4800.
    links += [Link("cpu:0", "host", 2 * 8 * 8 * 4800e6, 0.0, "host memory (DDR5-4800, 2 x 8 channels)")]
    links += [Link(f"gpu:{i}", "host", 55.0 * GB, 10e-6, "PCIe 5.0 x16") for i in range(8)]
    return topology_cluster("dgx-h100-8gpu", [cpu, *gpus], Topology(("host", "nvswitch"), tuple(links)),
                            update_traffic=True,  # updates move their kernels' bytes (costs.update_traffic_bytes)
                            copy_streams=True,  # TF's GPU copy streams (simulated.copy_stream_per_pair)
                            ready_fifo=True)  # TF's executor runs ready ops in the order they became ready


def _host_memory_bytes() -> int:
    """Physical RAM of this machine, or 16 GiB where the OS does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return 16 * GIB


def local_cluster(n: int) -> Cluster:
    """``n`` real local TF worker processes, one CPU device each, one intra- and inter-op thread.

    Speeds, the loopback link and the CPU cost of a transfer are conservative constants that
    calibration replaces later. Each worker's memory is its share of this host's RAM, so the
    cluster's digest differs from host to host (see ``digest_is_portable``).
    """
    if not is_int(n) or not 1 <= n <= MAX_LOCAL_WORKERS:
        raise bad("n", n, f"an integer from 1 to {MAX_LOCAL_WORKERS} (one TF server process each)")
    memory = _host_memory_bytes() // n  # the workers share the host's RAM
    workers = [Device(
        name=f"cpu:{i}", kind="CPU",
        peak_flops=2.5e9 * 32,  # one core: 2.5 GHz x 32 fp32 FLOP/cycle (AVX2 FMA); calibrated later
        memory_bandwidth=10.0 * GB,  # what one core streams from DRAM, roughly; calibrated later
        memory_bytes=memory,
        concurrency=1,  # inter_op_parallelism_threads=1
        tf_device=f"/job:worker/replica:0/task:{i}/device:CPU:0",
        op_overhead_s=CPU_OP_OVERHEAD_S,  # calibrated later
    ) for i in range(n)]
    # Tensors between workers go over loopback gRPC, about 1 GB/s and 100-200 us per tensor end to
    # end (orders of magnitude; calibration replaces them). Copying is the workers' own CPU work
    # (see host_transfer.py): each end spends 50 us + bytes at 2 GB/s of its one thread, and the
    # link only waits for the RPC's round trip (50 us); its bandwidth is loopback's, which adds no
    # per-byte cost of its own (1 TB/s, effectively free).
    return linked_cluster(f"local:{n}", workers, lambda a, b: (1e12, 50e-6), local_workers=n,
                          host_transfer=HostTransfer(per_tensor_s=50e-6, bandwidth=2.0 * GB))


def digest_is_portable(cluster: Cluster) -> bool:
    """Whether ``cluster.digest`` is the same on every host: false for a ``local:N`` cluster, whose workers'
    memory is this host's RAM shared out (``local_cluster``). A result or frozen task on such a cluster is
    checked by its name, which fixes the number of workers, the one thing a measurement on it depends on."""
    return not cluster.local_workers


PRESETS: Mapping[str, Callable[[], Cluster]] = MappingProxyType({
    "paper-2gpu": lambda: _paper(2),
    "paper-4gpu": lambda: _paper(4),
    # The same machines as built (K80 boards behind shared slots, achieved rates, TF's fixed costs
    # and usable memory): see k80.py. Not yet the default for the paper's tasks; see docs/findings.md.
    "k80-2gpu": lambda: k80_machine(2, name="k80-2gpu"),
    "k80-4gpu": lambda: k80_machine(4, name="k80-4gpu"),
    "dgx1-v100-4gpu": _dgx1_v100_4gpu,
    "dgx-h100-8gpu": _dgx_h100_8gpu,
})


def preset_names() -> tuple[str, ...]:
    """Names of the built-in clusters, in PRESETS order."""
    return tuple(PRESETS)
