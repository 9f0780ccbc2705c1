"""mprig/ is cut by the pipeline's stages (docs/architecture.md), and imports point one way:
cli -> run -> stack -> rig -> campaign, each stage importing only the ones to its right and
the shared base (errors, fsio, safeio, datafiles, tools, startup) that imports no stage.
Every import counts, lazy or type-only ones too (tests/unit/test_imports.py walks them)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_imports import ROOT, import_graph, project_modules

ORDER = ("campaign", "rig", "stack", "run", "cli")  # each may import those before it
BASE = {"errors", "fsio", "safeio", "datafiles", "tools", "startup", "_pcapmerge"}


def stage(module: str) -> str | None:
    """A mprig module's stage, "base" for the shared modules, None outside mprig."""
    parts = module.split(".")
    if parts[0] != "mprig" or len(parts) == 1:
        return None
    return "base" if parts[1] in BASE else parts[1]


def wrong_way(graph: dict[str, dict[str, int]]) -> list[str]:
    """Each import of a later stage (or of any stage from the base), as `a -> b (line)`."""
    rank = {s: i for i, s in enumerate(ORDER)} | {"base": -1}
    found = []
    for a, edges in sorted(graph.items()):
        for b, line in sorted(edges.items()):
            sa, sb = stage(a), stage(b)
            if sa is None or sb is None or sb == "base" or sa == sb:
                continue
            if rank[sa] < rank[sb]:
                found.append(f"{a} -> {b} (line {line})")
    return found


def test_every_module_of_mprig_sits_in_a_stage_or_the_base() -> None:
    modules = project_modules(ROOT, ("mprig",))
    stray = [m for m in modules if m != "mprig" and stage(m) not in {*ORDER, "base"}]
    assert stray == []
    assert {m.split(".")[1] for m in modules if m.count(".") >= 2} == set(ORDER)


def test_imports_point_from_the_command_line_down_to_the_campaign() -> None:
    graph = import_graph(ROOT, ("mprig",))
    assert wrong_way(graph) == [], "move the shared piece down a stage (docs/architecture.md)"


@pytest.mark.parametrize(
    ("source", "ok"),
    [
        ("from mprig.campaign import plan\n", True),
        ("from mprig import errors\n", True),
        ("def f():\n    from mprig.run import runner\n", False),  # lazy counts too
        (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from mprig.cli import main\n",
            False,
        ),
    ],
)
def test_the_check_sees_an_upward_import_wherever_it_sits(
    tmp_path: Path, source: str, ok: bool
) -> None:
    for folder in ("mprig", *(f"mprig/{s}" for s in ORDER)):
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / folder / "__init__.py").write_text("")
    for name in ("campaign/plan", "run/runner", "cli/main", "errors"):
        (tmp_path / "mprig" / f"{name}.py").write_text("X = 1\n")
    (tmp_path / "mprig" / "rig" / "probe.py").write_text(source)
    assert (wrong_way(import_graph(tmp_path, ("mprig",))) == []) == ok
