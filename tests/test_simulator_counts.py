"""experiments.simulator_counts reads the compiled code's own costs out of a callgrind dump."""
import pytest

from experiments.simulator_counts import jit_counts

DUMP = """# callgrind format
version: 1
positions: line
events: Ir Bc Bcm

ob=/usr/lib/x86_64-linux-gnu/libc.so.6
fl=???
fn=memset
0 100 10 1
ob=???
fl=???
fn=0x0000000012345678
0 7 2 1
0 5
cob=/usr/lib/x86_64-linux-gnu/libc.so.6
cfn=memset
calls=1 0
0 100 10 1
0 3 1
ob=/usr/lib/x86_64-linux-gnu/libc.so.6
fn=free
0 40 4
"""


def test_jit_counts_sums_the_compiled_codes_self_costs(tmp_path):
    dump = tmp_path / "callgrind.out.1"
    dump.write_text(DUMP)
    # the JIT block's own lines (7 + 5 + 3 instructions; a line may leave its trailing zeros out), not the
    # inclusive cost of its call into libc, nor libc's own lines
    assert jit_counts(dump) == {"Ir": 15, "Bc": 3, "Bcm": 1}


def test_jit_counts_rejects_a_file_that_is_not_a_dump(tmp_path):
    other = tmp_path / "notes.txt"
    other.write_text("0 1 2 3\n")
    with pytest.raises(ValueError, match="not a callgrind dump"):
        jit_counts(other)
