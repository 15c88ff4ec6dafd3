"""Units and hardware figures shared by the machine presets and the defaults of a probed TF cluster.

Numbers are public spec-sheet facts or orders of magnitude; each says where it comes from.
"""
from __future__ import annotations

GB = 1e9  # decimal, as spec sheets quote bandwidths
GIB = 2**30  # binary, as memory capacities are built

# Fixed cost per op, whatever its size (orders of magnitude; calibration fits them for a real
# cluster): TF's executor takes a few us to dispatch an op on the CPU; a GPU op adds the CUDA
# kernel launch (~5 us).
CPU_OP_OVERHEAD_S = 2e-6
GPU_OP_OVERHEAD_S = 5e-6

# PCIe 3.0 x16: 8 GT/s x 16 lanes x 128/130 = 15.75 GB/s raw per direction; cudaMemcpy from
# pinned memory reaches about 12 GB/s. Latency ~10 us: a copy's launch + DMA setup dominates.
PCIE3 = (12.0 * GB, 10e-6)  # (bandwidth bytes/s, latency s)
