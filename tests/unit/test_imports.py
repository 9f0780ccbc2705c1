"""Imports point one way: no circle among the modules of mprig/, collectors/ and reports/.

Every import counts, wherever it sits: at module level, inside a function (lazy) or under
`if TYPE_CHECKING:`. A lazy import only puts the circle off until the first call; the two
stages still depend on each other, and STYLE.md 1a asks to move the shared piece down
instead. Importing `a.b.c` runs `a` and `a.b` first, so the packages on the way count too,
except a module's own packages (already running when it loads; they may re-export it).
A module that calls importlib.import_module also imports every project module it names in
a string (mprig/cli/main.py's COMMAND_MODULES); elsewhere such a string is a subprocess's
`-m mprig.cli`, not an import.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("mprig", "collectors", "reports")

Graph = dict[str, dict[str, int]]  # module -> {module it imports: line of the first import}


def project_modules(root: Path, packages: tuple[str, ...]) -> dict[str, Path]:
    """Dotted module name -> source file, for every .py under the packages."""
    out = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _named(node: ast.AST, module: str, is_package: bool) -> list[str]:
    """The dotted names an import statement may load (submodules or attributes)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:
        here = module.split(".") if is_package else module.split(".")[:-1]
        base = ".".join([*here[: len(here) - node.level + 1], *([base] if base else [])])
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


def _dynamic(tree: ast.Module, known: dict[str, Path]) -> list[tuple[str, int]]:
    """Project module names in string constants, when the module calls import_module."""
    calls = any(isinstance(n, ast.Attribute) and n.attr == "import_module" for n in ast.walk(tree))
    strings = (n for n in ast.walk(tree) if isinstance(n, ast.Constant))
    return [(n.value, n.lineno) for n in strings if calls and n.value in known]


def _resolve(name: str, known: dict[str, Path]) -> list[str]:
    """The project modules that importing `name` runs: its longest known prefix and the
    packages above it."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1) if ".".join(parts[:i]) in known]


def import_graph(root: Path, packages: tuple[str, ...]) -> Graph:
    """Every project module's imports of other project modules."""
    known = project_modules(root, packages)
    graph: Graph = {}
    for module, path in known.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        named = [
            (name, node.lineno)
            for node in ast.walk(tree)
            for name in _named(node, module, path.name == "__init__.py")
        ]
        edges: dict[str, int] = {}
        for name, line in [*named, *_dynamic(tree, known)]:
            for target in _resolve(name, known):
                if target != module and not module.startswith(f"{target}."):
                    edges[target] = min(line, edges.get(target, line))
        graph[module] = edges
    return graph


def circles(graph: Graph) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while (w := stack.pop()) != v:
                group.append(w)
            if group:
                found.append(sorted([v, *group]))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def describe(group: list[str], graph: Graph, modules: dict[str, Path], root: Path) -> str:
    """A circle as its imports, one `a -> b (file:line)` per line."""
    lines = [f"circle of {len(group)} modules: {', '.join(group)}"]
    for a in group:
        for b, line in sorted(graph[a].items()):
            if b in group:
                lines.append(f"  {a} -> {b} ({modules[a].relative_to(root)}:{line})")
    return "\n".join(lines)


def test_the_project_has_no_import_circle() -> None:
    graph = import_graph(ROOT, PACKAGES)
    modules = project_modules(ROOT, PACKAGES)
    found = [describe(g, graph, modules, ROOT) for g in circles(graph)]
    assert not found, "imports must point one way; move the shared piece down:\n" + "\n".join(found)


def test_the_walk_sees_every_package_and_its_known_imports() -> None:
    graph = import_graph(ROOT, PACKAGES)
    assert {m.split(".")[0] for m in graph} == set(PACKAGES)
    assert "mprig.errors" in graph["mprig.stack.knobs"]  # module level
    assert "mprig.rig.inventory" in graph["mprig.cli.doctor"]  # inside a function
    assert "mprig.cli.cmd_run" in graph["mprig.cli.main"]  # importlib, by name
    assert "mprig.cli" not in graph["reports.nightly"]  # a `python -m mprig.cli` argv


PKG = {
    "__init__.py": "",
    "low.py": "X = 1\n",
    "a.py": "from pkg.low import X\n\ndef f():\n    from pkg import b\n    return b\n",
    "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import f\n",
    "c.py": "import importlib\nNAMES = ('pkg.d',)\nimportlib.import_module(NAMES[0])\n",
    "d.py": "import pkg.c\nARGV = ['python', '-m', 'pkg.a']\n",
}


def test_lazy_type_only_relative_and_by_name_imports_all_close_circles(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    for name, text in PKG.items():
        (tmp_path / "pkg" / name).write_text(text)
    graph = import_graph(tmp_path, ("pkg",))
    assert graph == {
        "pkg": {},
        "pkg.a": {"pkg.low": 1, "pkg.b": 4},
        "pkg.b": {"pkg.a": 3},
        "pkg.c": {"pkg.d": 2},
        "pkg.d": {"pkg.c": 1},
        "pkg.low": {},
    }
    assert circles(graph) == [["pkg.a", "pkg.b"], ["pkg.c", "pkg.d"]]
    assert describe(["pkg.a", "pkg.b"], graph, project_modules(tmp_path, ("pkg",)), tmp_path) == (
        "circle of 2 modules: pkg.a, pkg.b\n"
        "  pkg.a -> pkg.b (pkg/a.py:4)\n"
        "  pkg.b -> pkg.a (pkg/b.py:3)"
    )


def test_the_command_line_loads_no_heavy_library_before_a_command_runs() -> None:
    """Every `mprig` call builds the whole parser, `mprig run` inside the campaign VM among
    them: a command module that imports matplotlib at its top (it did, through `reproduce`)
    makes each of them pay for it, and a fresh VM builds matplotlib's font cache first."""
    probe = (
        "import sys\nfrom mprig.cli.main import build_parser\nbuild_parser()\n"
        "print(' '.join(sorted(m for m in sys.modules if '.' not in m)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    loaded = set(done.stdout.split())
    heavy = {"matplotlib", "numpy", "pandas", "pyarrow", "scipy", "scapy"}
    assert "mprig" in loaded and not loaded & heavy, sorted(loaded & heavy)
