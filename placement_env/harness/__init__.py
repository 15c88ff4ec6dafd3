"""Benchmark harness: suites x methods x seeds -> a results file -> validate -> table and plots.

    from placement_env.harness import run_suite, validate, write_report
    run_suite("tiny", ["single_gpu", "heft", "hill_climbing@max_groups=2", "mypackage.agent:place"], "results.jsonl",
              budget=100, seeds=[0, 1])   # a method with arguments: name@key=value,... or pe.method(name, key=value)
    run_suite("my_tasks.toml", ["heft"], "mine.jsonl", budget=0)   # a suite file of one's own tasks (suite_file)
    validate("results.jsonl")          # (rows replayed, rows that do not reproduce, are stale or skipped)
    write_report("results.jsonl", "report/")
    write_leaderboard(["results.jsonl"], "board/")   # scores per track and budget (docs/submitting.md)
"""
from ..errors import ResultsFormatError, SuiteFileError, UnknownSuiteError
from .leaderboard_page import write_leaderboard
from .placebench import load_placebench
from .report import markdown_table, write_report
from .results import COLUMNS, read_rows
from .runner import DEFAULT_BUDGET, run_suite
from .score import standings
from .submission import read_submission
from .suite_file import SuiteFile, read_suite_file
from .suites import GENERALISATION_TRAIN, SUITES, Task, k80_tasks, load_suite, register_suite
from .task_graph import load_task_graph
from .validate import validate

__all__ = ["COLUMNS", "DEFAULT_BUDGET", "GENERALISATION_TRAIN", "ResultsFormatError", "SUITES", "SuiteFile",
           "SuiteFileError", "Task", "load_task_graph", "read_suite_file", "register_suite",
           "UnknownSuiteError", "k80_tasks", "load_placebench", "load_suite", "markdown_table", "read_rows", "read_submission", "run_suite", "standings", "validate", "write_leaderboard",
           "write_report"]
