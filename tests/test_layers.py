"""The package's import graph: arrows point one way, no cycles.

Every ``import`` of a sparseldp module (at the top of a module or inside a
function) is read with :mod:`ast`.  Each module has a layer; a module may
import only modules of a lower layer, so the graph has no cycle and, e.g.,
the accounting never depends on the CLI.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "src" / "sparseldp"

#: Layer of every module (lower layers never import higher ones).
LAYERS = {
    0: ["errors", "_validation", "_frozen", "_format", "_rng", "_files", "core.protocol"],
    1: ["core.kernels", "_claims"],  # _claims: a spec's claims checked (duck-typed; spec imports it)
    2: ["core.accounting", "core.bounds"],
    3: ["sampling"],
    4: ["channel"],
    5: ["core.mechanisms", "design._search"],
    6: ["core.families", "core.kernel_mechanism", "core"],  # "core" is core/__init__.py
    7: ["baselines", "design._common", "composition"],  # design._common: Design, the target's checks
    8: ["design._joint", "design._domain"],
    9: ["design.radius", "design._clipped"],
    10: ["design.finite", "spec", "estimation"],
    11: ["design", "io", "compare", "reproduce", "demo_data"],
    12: ["figures", "", "spark"],  # "" is the package itself (sparseldp/__init__.py: version, eager names)
    13: ["report"],  # the privacy report cites the package version
    14: ["cli"],
    15: ["demo", "_entry"],
    16: ["__main__"],
}
RANK = {name: rank for rank, names in LAYERS.items() for name in names}


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _top(name: str) -> str:
    """The layer key of a module: its two first components below the package when they have a layer of
    their own (``core.kernels``, ``design.finite``), else the first (``cli.account`` -> ``cli``)."""
    parts = name.split(".") if name else [""]
    two = ".".join(parts[:2])
    return two if two in RANK else parts[0]


def _imports(path: Path) -> set[str]:
    me = _module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".") if package else []
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                target = ".".join(base + ([node.module] if node.module else []))
            elif node.module and node.module.startswith("sparseldp"):
                target = node.module[len("sparseldp."):] if node.module != "sparseldp" else ""
            else:
                continue
            names = [f"{target}.{a.name}" if target else a.name for a in node.names]
            for cand in names + [target]:
                if (ROOT / (cand.replace(".", "/") + ".py")).exists() or (ROOT / cand.replace(".", "/")).is_dir():
                    found.add(cand)
                    break
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("sparseldp"):
                    found.add(a.name[len("sparseldp."):] if a.name != "sparseldp" else "")
    found.discard(me)
    return found


MODULES = sorted(p for p in ROOT.rglob("*.py"))


def test_every_module_has_a_layer():
    missing = sorted({_top(_module_name(p)) for p in MODULES} - set(RANK))
    assert not missing, f"give these modules a layer in LAYERS: {missing}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_point_down(path):
    me = _top(_module_name(path))
    for target in _imports(path):
        other = _top(target)
        if other == me:
            continue  # inside one subpackage (cli.* importing cli._common)
        assert RANK[other] < RANK[me], (
            f"{_module_name(path) or 'sparseldp'} (layer {RANK[me]}) imports {target or 'sparseldp'} "
            f"(layer {RANK[other]}): imports must point to lower layers")
