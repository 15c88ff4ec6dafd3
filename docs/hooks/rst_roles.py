"""MkDocs hook: the reStructuredText roles of the package's docstrings shown as plain code on the API page.

The docstrings name other objects as Sphinx does (``:func:`~placement_env.cluster.load_cluster```), which
mkdocstrings renders as the role's name followed by the code span. This hook drops the role and, for a name
written with ``~``, keeps its last part, as Sphinx would show it.
"""
from __future__ import annotations

import re

ROLE = re.compile(r":(?:func|class|meth|mod|attr|data|exc|obj):<code>(~?)([^<]*)</code>")


def _show(match: re.Match) -> str:
    name = match.group(2)
    return f"<code>{name.rsplit('.', 1)[-1] if match.group(1) else name}</code>"


def on_page_content(html: str, **kwargs) -> str:
    return ROLE.sub(_show, html)
