"""Property-based tests of what reads third-party input: any bytes or JSON rows either load as a results file or
raise ResultsFormatError (never another exception), whatever loads renders as tables, and the names taken from a
results file become distinct, safe file names and Markdown that keeps its table's shape."""
import itertools
import json
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placement_env.errors import ResultsFormatError
from placement_env.harness import markdown_table
from placement_env.harness.leaderboard import budget_pivot, leaderboard_table
from placement_env.harness.results import COLUMNS, read_results
from placement_env.output_paths import MAX_NAME_PART, file_name_part
from placement_env.render.table import markdown_text

GOOD = {"suite": "tiny", "task": "t-2gpu", "benchmark": "rnnlm-tiny", "cluster": "paper-2gpu", "runtime": "sim",
        "method": "single_gpu", "seed": 0, "budget": 10, "placement": [1, 1], "runtime_s": 0.5, "ok": True,
        "failure": "", "message": "", "evaluations": 0, "wall_s": 0.1, "lower_bound_s": 0.2, "versions": {},
        "anytime": [[1, 0.6, 0.01]]}
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_names = (f"r{k}.jsonl" for k in itertools.count())

numbers = st.one_of(st.integers(min_value=-10, max_value=10), st.integers(), st.floats(allow_nan=True),
                    st.sampled_from([0, 0.0, -0.0, 1e6, 1e6 + 1, 1e300, 10**400]))
json_values = st.recursive(st.one_of(st.none(), st.booleans(), numbers, st.text(max_size=8)),
                           lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                   st.dictionaries(st.text(max_size=4), inner, max_size=4)),
                           max_leaves=12)
# A row near a good one: some columns replaced by arbitrary JSON values, some removed, some kept.
rows = st.builds(lambda changes, removed: {k: v for k, v in {**GOOD, **changes}.items() if k not in removed},
                 st.dictionaries(st.sampled_from([*COLUMNS, "anytime"]), json_values, max_size=4),
                 st.sets(st.sampled_from(COLUMNS), max_size=1))
plausible_rows = st.builds(dict, st.just(GOOD), task=st.text(max_size=12), method=st.text(min_size=1, max_size=8),
                           seed=st.integers(0, 3), ok=st.booleans(),
                           runtime_s=st.one_of(st.none(), st.floats(1e-6, 1e6)),
                           evaluations=st.integers(0, 10), failure=st.sampled_from(["", "oom", "infrastructure"]))


def _read(tmp_path_factory, data: bytes):
    path = tmp_path_factory.getbasetemp() / next(_names)
    path.write_bytes(data)
    try:
        return read_results(path).rows
    except ResultsFormatError as error:
        assert str(error).startswith(str(path)), error  # every error names the file
        return None


def _renders(rows):
    if rows:
        markdown_table(rows)
        leaderboard_table(rows)
        budget_pivot(rows, sorted({r["method"] for r in rows}), [0, 10])


@FUZZ
@given(data=st.binary(max_size=400))
def test_any_bytes_load_or_are_a_results_format_error(tmp_path_factory, data):
    _read(tmp_path_factory, data)


@FUZZ
@given(lines=st.lists(st.one_of(rows.map(json.dumps), st.text(max_size=30), json_values.map(json.dumps)),
                      max_size=4),
       end=st.sampled_from(["\n", "", "\r\n"]), cut=st.integers(0, 40))
def test_json_rows_near_valid_ones_load_or_are_a_results_format_error_and_what_loads_renders(
        tmp_path_factory, lines, end, cut):
    text = "\n".join(lines) + end
    if not end and cut:
        text = text[:-cut]  # a torn last line
    _renders(_read(tmp_path_factory, text.encode("utf-8", "surrogatepass")))


@FUZZ
@given(many=st.lists(plausible_rows, min_size=1, max_size=6))
def test_plausible_rows_load_or_are_refused_and_loaded_ones_render(tmp_path_factory, many):
    _renders(_read(tmp_path_factory, "".join(json.dumps(row) + "\n" for row in many).encode("utf-8", "surrogatepass")))


@settings(max_examples=300, deadline=None)
@given(first=st.text(), second=st.text())
def test_file_name_parts_are_safe_and_different_for_different_names(first, second):
    for name in (first, second):
        part = file_name_part(name)
        assert re.fullmatch(r"[a-z0-9._~-]+", part) and not part.startswith(".") and len(part) <= MAX_NAME_PART
    assert (file_name_part(first) == file_name_part(second)) == (first == second)


@settings(max_examples=300, deadline=None)
@given(text=st.text())
def test_markdown_text_keeps_a_cell_one_cell_on_one_line(text):
    escaped = markdown_text(text)
    assert "\n" not in escaped and "\r" not in escaped
    assert all(len(run) % 2 for run in re.findall(r"(\\*)[|`\[\]<>]", escaped))  # each special char escaped
    assert re.sub(r"\\(.)", r"\1", escaped) == re.sub(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+", " ", text)
