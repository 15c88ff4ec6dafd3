"""The host a measured row records: this machine's processor, cores and widest vector extension."""
from __future__ import annotations

import os

from placement_env.harness import host


def test_the_first_processor_block_of_cpuinfo_is_read(tmp_path):
    path = tmp_path / "cpuinfo"
    path.write_text("processor\t: 0\nmodel name\t: Some Xeon\nflags\t\t: fpu avx avx2 avx512f\n\n"
                    "processor\t: 1\nmodel name\t: Another\n")
    assert host._cpuinfo_fields(str(path)) == {"processor": "0", "model name": "Some Xeon",
                                               "flags": "fpu avx avx2 avx512f"}
    assert host._cpuinfo_fields(str(tmp_path / "missing")) == {}


def test_this_host_is_described_in_strings():
    described = host.host_description()
    assert set(described) == {"cpu", "cpus", "vector"} and all(isinstance(v, str) for v in described.values())
    assert described["cpus"] == str(os.cpu_count()) and described["vector"] in ("", *host.VECTOR_EXTENSIONS)
    flags = set(host._cpuinfo_fields().get("flags", "").split())
    widest = next((name for name in host.VECTOR_EXTENSIONS if name in flags), "")
    assert described["vector"] == widest
