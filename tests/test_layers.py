"""The package's layers point one way: no module imports from a layer above its own, placement_env
never imports baselines or agents, agents and baselines use placement_env's public API only, and no module
uses another module's private names."""
from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Lowest first. A module may import from its own layer and the layers below it. A package name
# covers its submodules; the longest matching prefix wins.
LAYERS: list[tuple[str, ...]] = [
    ("placement_env.errors", "placement_env.unionfind", "placement_env.cache", "placement_env.derived",
     "placement_env.quiet_tf", "placement_env.output_paths"),
    ("placement_env.opgraph", "placement_env.placement", "placement_env.schedule"),
    ("placement_env.grouping",),
    ("placement_env.tf_import",),
    ("placement_env.benchmarks",),
    ("placement_env.cluster",),
    ("placement_env.costs",),
    ("placement_env.groupgraph",),
    ("placement_env.runtime",),
    ("placement_env.exact",),
    ("placement_env.evaluation",),
    ("placement_env.parallel", "placement_env.calibration", "placement_env.render"),
    ("placement_env.env", "placement_env.problem"),
    ("placement_env.harness", "placement_env.cli", "placement_env.__main__", "placement_env"),
    ("baselines", "agents"),
    ("experiments",),
]


def layer_of(module: str) -> int:
    best, best_length = None, -1
    for index, names in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and len(name) > best_length:
                best, best_length = index, len(name)
    if best is None:
        raise AssertionError(f"module {module} is in no layer of tests/test_layers.py")
    return best


def modules() -> list[tuple[str, Path]]:
    found = []
    for top in ("placement_env", "baselines", "agents", "experiments"):
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found.append((".".join(parts), path))
    return found


def imports(module: str, path: Path) -> list[tuple[str, list[str], int]]:
    """(imported module, names taken from it, line) for every import of a project module, at any depth,
    except those under ``if TYPE_CHECKING:``."""
    tree = ast.parse(path.read_text())
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(inner) for inner in ast.walk(node))
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = [alias.name for alias in node.names]
            if not node.module and node.level:  # "from . import x": x may be a submodule
                for name in names:
                    found.append((f"{target}.{name}", [], node.lineno))
                continue
            found.append((target, names, node.lineno))
        elif isinstance(node, ast.Import):
            found.extend((alias.name, [], node.lineno) for alias in node.names)
    return [(t, n, line) for t, n, line in found if t.split(".")[0] in ("placement_env", "baselines", "agents", "experiments")]


MODULES = modules()


def test_every_module_has_a_layer() -> None:
    for module, _ in MODULES:
        layer_of(module)


def test_no_import_reaches_up_a_layer() -> None:
    upward = []
    for module, path in MODULES:
        own = layer_of(module)
        for target, _, line in imports(module, path):
            if layer_of(target) > own:
                upward.append(f"{path.relative_to(ROOT)}:{line}: {module} (layer {own}) imports {target} "
                              f"(layer {layer_of(target)})")
    assert not upward, "imports that point up the layers:\n" + "\n".join(upward)


def test_placement_env_never_imports_baselines_or_agents() -> None:
    for module, path in MODULES:
        if module.split(".")[0] == "placement_env":
            for target, _, line in imports(module, path):
                assert target.split(".")[0] == "placement_env", f"{path}:{line} imports {target}"


def test_no_private_name_crosses_modules() -> None:
    crossing = []
    for module, path in MODULES:
        for target, names, line in imports(module, path):
            for name in names:
                if name.startswith("_") and not name.startswith("__"):
                    crossing.append(f"{path.relative_to(ROOT)}:{line}: {module} imports {target}.{name}")
        text = path.read_text()
        for private in ("unwrapped.task.", "env.task"):  # the env's graph task is its own
            if private in text and not path.name.startswith(("opgraph", "core")):
                crossing.append(f"{path.relative_to(ROOT)}: uses {private!r}")
    assert not crossing, "private names used across modules:\n" + "\n".join(crossing)


# What agents/ and baselines/ may import from placement_env: the package and the subpackages whose
# exports are documented (docs/api.md), and only the names each one exports (its __all__). Agents use
# baselines through the method table (pe.resolve_method / pe.solve), never by importing them.
PUBLIC_API = ("placement_env", "placement_env.errors", "placement_env.env", "placement_env.harness",
              "placement_env.parallel")


def test_agents_and_baselines_use_the_public_api_only() -> None:
    inside = []
    for module, path in MODULES:
        top = module.split(".")[0]
        if top not in ("agents", "baselines"):
            continue
        for target, names, line in imports(module, path):
            where = f"{path.relative_to(ROOT)}:{line}: {module} imports"
            if top == "agents" and target.split(".")[0] == "baselines":
                inside.append(f"{where} {target} (use the method: pe.resolve_method(name) or pe.solve)")
            elif target.split(".")[0] != "placement_env":
                continue
            elif target not in PUBLIC_API:
                inside.append(f"{where} {target}, not one of {', '.join(PUBLIC_API)}")
            else:
                exported = set(getattr(importlib.import_module(target), "__all__", ()))
                inside.extend(f"{where} {target}.{name}, which its __all__ does not export"
                              for name in names if name not in exported)
    assert not inside, "imports of placement_env's insides:\n" + "\n".join(inside)


@pytest.mark.parametrize("layer", range(len(LAYERS)))
def test_layers_name_real_modules(layer: int) -> None:
    known = {module for module, _ in MODULES}
    for name in LAYERS[layer]:
        if name != "experiments":
            assert any(m == name or m.startswith(name + ".") for m in known), f"{name} names no module"
