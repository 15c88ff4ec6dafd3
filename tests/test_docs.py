"""The documentation site builds, covers the public API, links to files that exist, and its code runs.

- ``mkdocs build --strict`` succeeds (a broken link, a missing page or an API entry that does not resolve fails it);
- ``docs/api.md`` documents every name of ``placement_env.__all__`` and ``placement_env.harness.__all__``;
  ``docs/environment.md`` every keyword of the env and ``docs/harness.md`` every built-in method and suite;
- every relative link of README.md and docs/*.md points to a file that exists (and to a heading that exists);
- every ```python block of README.md and docs/*.md runs, each in a fresh namespace, in a scratch folder.

Code blocks run as written unless an HTML comment on the lines just above the fence says otherwise:

    <!-- skip-run: why it is not run (a fragment, hardware it needs, minutes of training) -->
    <!-- run-as: OLD => NEW -->   (run with OLD replaced by NEW, e.g. a tiny benchmark for a full-size one;
                                   OLD must occur in the block; several run-as lines may stack)
"""
from __future__ import annotations

import importlib
import inspect
import json
import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
DOC_FILES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
PAGES = ["index", "getting-started", "benchmarks", "environment", "harness", "agents", "runtimes", "security",
         "results", "findings", "testing", "api"]


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


# ---- the build ----

def test_every_page_exists():
    missing = [page for page in PAGES if not (DOCS / f"{page}.md").is_file()]
    assert not missing, f"docs/ lacks {missing}"


def test_mkdocs_build_strict(tmp_path):
    try:
        import mkdocs  # noqa: F401
        import mkdocstrings  # noqa: F401
    except ImportError as error:  # the dev extra installs them: bash setup.sh --dev
        pytest.fail(f"{error}: the docs build needs the dev extra (pip install -e '.[dev]')")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout[-4000:]}\n{done.stderr[-8000:]}"
    for page in PAGES:
        assert (tmp_path / "site" / ("index.html" if page == "index" else f"{page}/index.html")).is_file(), page


# ---- the API reference and the reference tables ----

def _directives(text: str) -> list[tuple[str, str]]:
    """(identifier, its options block) of every ``::: identifier`` of a page."""
    found = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        match = re.match(r"^:::\s+([\w.]+)\s*$", line)
        if match:
            options = []
            for follow in lines[i + 1:]:
                if not follow.startswith("    "):
                    break
                options.append(follow.strip())
            found.append((match.group(1), "\n".join(options)))
    return found


def _resolve(identifier: str):
    parts = identifier.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            value = getattr(value, attribute)
        return value
    raise ImportError(identifier)


def _documented_objects() -> set[int]:
    """ids of the objects docs/api.md renders: each ``::: module.name``, and the public names of each
    ``::: module`` whose members are shown."""
    covered: set[int] = set()
    for identifier, options in _directives((DOCS / "api.md").read_text()):
        value = _resolve(identifier)
        covered.add(id(value))
        if inspect.ismodule(value) and "members: false" not in options:
            covered.update(id(getattr(value, name)) for name in getattr(value, "__all__", ()))
    return covered


@pytest.mark.parametrize("package", ["placement_env", "placement_env.harness"])
def test_api_page_documents_every_public_name(package):
    module = importlib.import_module(package)
    covered = _documented_objects()
    missing = [name for name in module.__all__ if id(getattr(module, name)) not in covered]
    assert not missing, (f"docs/api.md has no '::: <module>.<name>' entry for {package}.{missing}; add one under "
                         "the module that defines each")


def test_environment_page_describes_every_keyword_and_reset_option():
    from placement_env.env import OPTION_KEYS, DevicePlacementEnv

    text = (DOCS / "environment.md").read_text()
    keywords = [name for name in inspect.signature(DevicePlacementEnv).parameters]
    missing = [name for name in keywords if f"| `{name}` |" not in text]
    assert not missing, f"docs/environment.md's keyword table lacks {missing}"
    missing = [key for key in OPTION_KEYS if f'"{key}"' not in text]
    assert not missing, f"docs/environment.md does not describe the reset option(s) {missing}"


def test_harness_page_lists_every_method_and_suite():
    import placement_env as pe
    from placement_env.harness import SUITES

    text = (DOCS / "harness.md").read_text()
    missing = [name for name in [*pe.METHODS, *SUITES] if f"`{name}`" not in text]
    assert not missing, f"docs/harness.md does not name {missing}"


# ---- links ----

def _prose(text: str) -> str:
    """The text without fenced code blocks and code spans (whose brackets are not links)."""
    text = re.sub(r"^(\s*)```.*?^\1```", "", text, flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def _slug(heading: str) -> str:
    """The anchor Python-Markdown's toc extension (the site's) gives a heading."""
    text = re.sub(r"[`*]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading)
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def _anchors(path: Path) -> set[str]:
    anchors: set[str] = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*$", re.sub(r"^```.*?^```", "", path.read_text(), flags=re.M | re.S),
                              flags=re.M):
        slug, n = _slug(heading), 0
        while (slug if n == 0 else f"{slug}_{n}") in anchors:
            n += 1
        anchors.add(slug if n == 0 else f"{slug}_{n}")
    return anchors


@pytest.mark.parametrize("path", DOC_FILES, ids=_name)
def test_relative_links_resolve(path):
    bad = []
    for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", _prose(path.read_text())):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            bad.append(f"{target} (no such file)")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked) and "placement_env." not in anchor:
            bad.append(f"{target} (no heading '#{anchor}' in {linked.name})")
    assert not bad, f"{_name(path)} links to: {bad}"


SOURCE_PATH = re.compile(r"`((?:placement_env|agents|baselines|experiments|tests|examples|docs)/[A-Za-z0-9_./*-]*)`")


@pytest.mark.parametrize("path", [p for p in DOC_FILES if p.name != "findings.md"], ids=_name)
def test_source_paths_named_exist(path):
    """Every repository path a page names in backticks exists (findings.md, a dated record, names paths as they
    were)."""
    missing = [named for named in sorted(set(SOURCE_PATH.findall(path.read_text())))
               if not (list(ROOT.glob(named)) if "*" in named else (ROOT / named).exists())]
    assert not missing, f"{_name(path)} names {missing}, which are not in the tree"


IMPORT_PATH = re.compile(r"`((?:agents|baselines|experiments|placement_env)(?:\.\w+)+:\w+)`")


def test_import_paths_named_resolve():
    """Every method or suite a page names as ``package.module:attribute`` can be imported or is a preset of
    ``placement_env.PRESETS`` (the old variant names that stored results carry; findings.md aside)."""
    from placement_env import PRESETS, resolve_method

    named = sorted({path for page in DOC_FILES if page.name != "findings.md"
                    for path in IMPORT_PATH.findall(page.read_text())})
    assert named
    broken = []
    for path in named:
        if path in PRESETS:
            resolve_method(PRESETS[path].name)
            continue
        module, attribute = path.split(":")
        try:
            getattr(importlib.import_module(module), attribute)
        except (ImportError, AttributeError) as error:
            broken.append(f"{path} ({type(error).__name__}: {error})")
    assert not broken, f"the docs name {broken}"


# ---- code blocks ----

@dataclass
class Block:
    file: str
    line: int
    code: str
    skip: str | None = None

    @property
    def key(self) -> str:
        return f"{self.file}:{self.line}"


def _blocks(path: Path, problems: list[str]) -> list[Block]:
    """The ```python blocks of a file, with their markers applied; malformed markers go to ``problems``."""
    blocks = []
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        if not re.match(r"^\s*```python\s*$", lines[i]):
            i += 1
            continue
        end = i + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        block = Block(_name(path), i + 1, textwrap.dedent("\n".join(lines[i + 1:end])) + "\n")
        markers, above = [], i - 1
        while above >= 0 and re.match(r"^\s*<!--.*-->\s*$", lines[above]):
            markers.insert(0, lines[above].strip()[4:-3].strip())
            above -= 1
        for marker in markers:
            if marker.startswith("skip-run"):
                block.skip = marker[len("skip-run"):].lstrip(":").strip()
                if not block.skip:
                    problems.append(f"{block.key}: skip-run needs a reason (<!-- skip-run: why -->)")
            elif marker.startswith("run-as:"):
                old, arrow, new = (part.strip() for part in marker[len("run-as:"):].partition("=>"))
                if not (arrow and old):
                    problems.append(f"{block.key}: write <!-- run-as: OLD => NEW -->, not {marker!r}")
                elif old not in block.code:
                    problems.append(f"{block.key}: run-as {old!r} does not occur in the block")
                block.code = block.code.replace(old, new) if old else block.code
        blocks.append(block)
        i = end + 1
    return blocks


MARKER_PROBLEMS: list[str] = []
ALL_BLOCKS = [block for path in DOC_FILES for block in _blocks(path, MARKER_PROBLEMS)]

# Runs each block in a fresh namespace of one interpreter (one TensorFlow import for them all), and writes
# {key: traceback or ""} to the results file after each block.
RUNNER = r"""
import json, sys, time, traceback
blocks, out = json.load(open(sys.argv[1])), sys.argv[2]
results = {}
for block in blocks:
    started = time.perf_counter()
    try:
        exec(compile(block["code"], block["key"], "exec"), {"__name__": "__docs_block__"})
        results[block["key"]] = ""
    except BaseException:
        results[block["key"]] = traceback.format_exc()
    print(f"[docs block] {block['key']}: {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
    json.dump(results, open(out, "w"))
"""


def test_code_blocks_run(tmp_path):
    """Every runnable block, run once in one interpreter (one test, so that pytest-xdist does not run the blocks
    on both of its workers)."""
    runnable = [{"key": b.key, "code": b.code} for b in ALL_BLOCKS if b.skip is None]
    (tmp_path / "blocks.json").write_text(json.dumps(runnable))
    env = {**os.environ, "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1", "AGENT_TORCH_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", RUNNER, str(tmp_path / "blocks.json"), str(tmp_path / "results.json")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)
    results = json.loads((tmp_path / "results.json").read_text()) if (tmp_path / "results.json").exists() else {}
    failed = []
    for block in runnable:
        if block["key"] not in results:
            failed.append(f"{block['key']}: did not run (the runner stopped):\n{done.stderr[-3000:]}")
        elif results[block["key"]]:
            failed.append(f"{block['key']}:\n{results[block['key']]}")
    assert not failed, "\n\n".join(failed)
