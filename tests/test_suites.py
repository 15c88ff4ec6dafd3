"""Suites by name (placement_env.harness.SUITES) and by import path ("package.module:attribute")."""
from __future__ import annotations

import pytest

from placement_env.harness import SUITES, Task, UnknownSuiteError, k80_tasks, load_suite

TWO = (Task("a", "rnnlm-tiny", "paper-2gpu"), Task("b", "synthetic-tiny", "paper-2gpu"))


def two_tasks() -> tuple[Task, ...]:
    return TWO


NOT_TASKS = ("rnnlm-tiny", "paper-2gpu")
SAME_NAMES = (Task("a", "rnnlm-tiny", "paper-2gpu"), Task("a", "synthetic-tiny", "paper-2gpu"))


def test_the_library_holds_the_benchmark_suites_only():
    assert set(SUITES) == {"paper", "paper-k80", "tiny", "generalisation", "generalisation-train",
                           "generalisation-test", "generalisation-validation", "dlrm"}


def test_a_suite_by_import_path_is_a_tuple_or_a_function_of_tasks():
    assert load_suite("test_suites:TWO") == TWO
    assert load_suite("test_suites:two_tasks") == TWO
    assert load_suite("tiny") == SUITES["tiny"]()
    assert [t.name for t in k80_tasks((("NMT", "nmt"),))] == ["nmt-k80-2gpu", "nmt-k80-4gpu"]


@pytest.mark.parametrize("name, message", [
    ("nope", "unknown suite 'nope'; expected one of 'paper'"),
    ("a:b:c", "unknown suite 'a:b:c'"),
    ("no_such_module:SUITE", "cannot import no_such_module:SUITE"),
    ("test_suites:MISSING", "cannot import test_suites:MISSING"),
    ("test_suites:NOT_TASKS", "is not a tuple of Task"),
    ("test_suites:SAME_NAMES", "the task names 'a' repeat"),
    (3, "unknown suite 3"),
])
def test_a_suite_that_is_not_one_is_named(name, message):
    with pytest.raises(UnknownSuiteError, match=message.replace("(", r"\(")):
        load_suite(name)
