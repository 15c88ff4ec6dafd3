"""MkDocs hook: read lists as GitHub does, so the same Markdown renders alike on GitHub and on the site.

The pages are written to be read on GitHub as well, where a list may follow a paragraph line directly and
nested items, tables and code inside an item are indented by two spaces. Python-Markdown, which MkDocs uses,
wants a blank line before a list or a table and four spaces per level inside an item. Before each page is
converted, this hook inserts those blank lines and doubles the indentation inside a list that is indented by
two spaces (a list indented by four is left as it is). Code blocks outside lists are not touched.
"""
from __future__ import annotations

import re

ITEM = re.compile(r"^( {0,3})(?:[-*+]|\d+[.)]) +\S")
ANY_ITEM = re.compile(r"^ *(?:[-*+]|\d+[.)]) +\S")
FENCE = re.compile(r"^\s*(```|~~~)")
TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _list_end(lines: list[str], start: int) -> int:
    """The index just past the list that starts at ``lines[start]``: it goes on through indented lines, lazy
    continuation lines and further items, and ends at a blank line followed by a line that is neither."""
    i = start + 1
    while i < len(lines):
        if lines[i].strip():
            i += 1
            continue
        following = next((j for j in range(i, len(lines)) if lines[j].strip()), None)
        if following is None or not (_indent(lines[following]) > 0 or ITEM.match(lines[following])):
            return i
        i = following
    return i


def _separate_loose_items(block: list[str]) -> list[str]:
    """A blank line before an item that directly follows a later paragraph of the item before it (Python-Markdown
    would read the new item as part of that paragraph)."""
    out: list[str] = []
    blank_since_item = False
    for line in block:
        if ANY_ITEM.match(line):
            if blank_since_item and out and out[-1].strip():
                out.append("")
            blank_since_item = False
        elif not line.strip():
            blank_since_item = True
        out.append(line)
    return out


def _reindent(block: list[str]) -> list[str]:
    """A list indented by two spaces (or three under a numbered item) with every indentation doubled."""
    block = _separate_loose_items(block)
    indents = [_indent(line) for line in block if line.strip() and _indent(line) > 0 and not FENCE.match(line)]
    if not indents or min(indents) >= 4:
        return block
    return [" " * (2 * _indent(line)) + line.lstrip(" ") if line.strip() else line for line in block]


def _blank_lines_before_blocks(lines: list[str]) -> list[str]:
    """A blank line before each list and table that follows a paragraph line directly."""
    out: list[str] = []
    fenced = False
    for n, line in enumerate(lines):
        if FENCE.match(line):
            fenced = not fenced
        previous = out[-1] if out else ""
        starts_table = line.lstrip().startswith("|") and n + 1 < len(lines) and TABLE_RULE.match(lines[n + 1])
        if not fenced and previous.strip() and _indent(previous) == 0 and not ITEM.match(previous) \
                and not previous.lstrip().startswith(("|", "#", "<")) and (ITEM.match(line) or starts_table) \
                and _indent(line) == 0:
            out.append("")
        out.append(line)
    return out


def github_lists(markdown: str) -> str:
    lines = _blank_lines_before_blocks(markdown.split("\n"))
    out: list[str] = []
    i = 0
    fenced = False
    while i < len(lines):
        line = lines[i]
        if FENCE.match(line) and _indent(line) == 0:
            fenced = not fenced
        if not fenced and ITEM.match(line) and _indent(line) == 0:
            end = _list_end(lines, i)
            out.extend(_reindent(lines[i:end]))
            i = end
            continue
        out.append(line)
        i += 1
    return "\n".join(out)


def on_page_markdown(markdown: str, **kwargs) -> str:
    return github_lists(markdown)
