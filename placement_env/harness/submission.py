"""A leaderboard submission's declared fields: what a results file's rows cannot say about the method that made
them (who, where its code is, whether it is open and deterministic, what its wall times were measured on).

A submission is a results file that ``placement-env validate`` replays and a JSON object with exactly the fields of
``SUBMISSION_FIELDS``, each of its type; ``read_submission`` refuses anything else with an error naming the file,
the field and what is accepted, and ``check_submissions`` ties each declared method label to the rows.
"""
from __future__ import annotations

import datetime
import difflib
import json
import os
import re
from typing import Any, Collection, Sequence

from ..errors import ResultsFormatError

MAX_SUBMISSION_BYTES = 1 << 20  # a declared-fields file is a few lines

# field -> (type, what it holds); every field is required, no other is accepted.
SUBMISSION_FIELDS: dict[str, tuple[type, str]] = {
    "name": (str, "the submission's name"),
    "methods": (list, "the method labels of the rows it declares, as the leaderboard shows them"),
    "authors": (str, "who made it"),
    "code": (str, "a link to the code that made the rows ('' if none is public)"),
    "open_source": (bool, "whether that code is open source"),
    "deterministic": (bool, "whether a rerun with the same seeds gives the same rows"),
    "hardware": (str, "the machine the wall times were measured on"),
    "wall_time": (str, "what the rows' wall times include and leave out (pre-training, solver time)"),
    "date": (str, "when the rows were made, as YYYY-MM-DD"),
    "description": (str, "the method in a sentence or two"),
}
_LINK = re.compile(r"https?://[^\s<>]+")
_NON_EMPTY = ("name", "authors", "hardware", "wall_time", "date", "description")


def _type_name(kind: type) -> str:
    return {str: "a string", bool: "true or false", list: "a non-empty list of strings"}[kind]


def read_submission(path: str | os.PathLike) -> dict[str, Any]:
    """The declared fields of submission file ``path`` (see ``SUBMISSION_FIELDS``), with ``path`` added as
    ``file``; a ResultsFormatError naming the file, the field and what is accepted for an unreadable file, an
    unknown or missing field, a value of the wrong type, an empty text, a date that is not YYYY-MM-DD, a method
    listed twice, or open source code without a link."""
    where = str(path)
    try:
        with open(path, "rb") as handle:
            text = handle.read(MAX_SUBMISSION_BYTES + 1)
    except OSError as error:
        raise ResultsFormatError(f"{where}: cannot read the submission's declared fields ({error.strerror})") from None
    if len(text) > MAX_SUBMISSION_BYTES:
        raise ResultsFormatError(f"{where}: over {MAX_SUBMISSION_BYTES:,} bytes; a submission's declared fields are "
                                 "a small JSON object")
    try:
        data = json.loads(text)
    except ValueError as error:
        raise ResultsFormatError(f"{where}: not JSON ({error}); expected a JSON object of the fields "
                                 f"{', '.join(SUBMISSION_FIELDS)}") from None
    if not isinstance(data, dict):
        raise ResultsFormatError(f"{where}: a JSON {type(data).__name__}; expected a JSON object of the fields "
                                 f"{', '.join(SUBMISSION_FIELDS)}")
    unknown = sorted(set(data) - set(SUBMISSION_FIELDS))
    missing = [key for key in SUBMISSION_FIELDS if key not in data]
    if unknown or missing:
        problems = ([f"unknown field(s) {', '.join(map(repr, unknown))}"] if unknown else []) + \
                   ([f"missing field(s) {', '.join(map(repr, missing))}"] if missing else [])
        raise ResultsFormatError(f"{where}: {'; '.join(problems)}; a submission has exactly the fields "
                                 f"{', '.join(SUBMISSION_FIELDS)} (docs/submitting.md)")
    for key, (kind, what) in SUBMISSION_FIELDS.items():
        value = data[key]
        wrong = not isinstance(value, kind) or (kind is list and not (value and all(isinstance(v, str) and v
                                                                                    for v in value)))
        if wrong or (key in _NON_EMPTY and not value.strip()):
            raise ResultsFormatError(f"{where}: {key} = {value!r}; expected {what} ({_type_name(kind)}"
                                     f"{', not empty' if key in _NON_EMPTY else ''})")
    try:
        datetime.date.fromisoformat(data["date"])
    except ValueError:
        raise ResultsFormatError(f"{where}: date = {data['date']!r}; expected {SUBMISSION_FIELDS['date'][1]}") from None
    if len(set(data["methods"])) < len(data["methods"]):
        raise ResultsFormatError(f"{where}: methods = {data['methods']!r} lists a method twice")
    if data["code"] and not _LINK.fullmatch(data["code"]):
        raise ResultsFormatError(f"{where}: code = {data['code']!r}; expected an http(s) link without spaces or "
                                 "angle brackets, or '' if no code is public")
    if data["open_source"] and not data["code"]:
        raise ResultsFormatError(f"{where}: open_source is true but code is ''; give the link to the code, or set "
                                 "open_source to false")
    return {**data, "file": where}


def check_submissions(submissions: Sequence[dict[str, Any]], labels: Collection[str]) -> dict[str, dict[str, Any]]:
    """method label -> the submission that declares it; a ResultsFormatError for a declared label that no row has
    (naming the nearest labels the rows have) or a label that two submissions declare."""
    declared: dict[str, dict[str, Any]] = {}
    for submission in submissions:
        for label in submission["methods"]:
            if label in declared:
                raise ResultsFormatError(f"{submission['file']}: method {label!r} is declared by "
                                         f"{declared[label]['file']} too; a method has one submission")
            if label not in labels:
                near = difflib.get_close_matches(label, sorted(labels), n=3)
                hint = f"nearest: {', '.join(map(repr, near))}" if near else f"the rows have {len(labels)} labels"
                raise ResultsFormatError(f"{submission['file']}: methods lists {label!r}, which no row of the results "
                                         f"files has; expected a label as the leaderboard shows it ({hint})")
            declared[label] = submission
    return declared

