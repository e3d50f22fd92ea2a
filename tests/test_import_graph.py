"""The import graph of peagle_deploy: no circles, and no import back up the layers.

Read with `ast` from the source (nothing is imported), counting every import statement:
module level, inside functions, and under `if TYPE_CHECKING:` alike, so a lazy import
cannot hide a circle or an upward import. docs/architecture.md describes the layers.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "peagle_deploy"

LAYERS: tuple[frozenset[str], ...] = (
    frozenset(
        {
            "__init__",
            "errors",
            "extras",
            "redaction",
            "adoption",
            "env_limits",
            "findings",
            "documents",
            "naming",
            "streaming",
            "terminal",
        }
    ),
    frozenset({"spec", "secret_refs"}),
    frozenset({"catalog"}),
    frozenset({"deployment"}),
    frozenset({"validation"}),
    frozenset({"plan", "access", "stages", "stage_training"}),
    frozenset({"aws", "doctor", "records"}),
    frozenset({"sdk", "bench", "experiment", "train"}),
    frozenset({"promote"}),
    frozenset({"cli"}),
)
"""Lowest first: a part of the package may import its own layer and the ones below."""

PLAN_STEPS = ("resolve", "check", "render")
"""The planner's three steps (peagle_deploy.plan): each takes what the one before it
made, so none imports another; `plan.pipeline` runs them in a row."""

KNOWN_UPWARD: frozenset[tuple[str, str]] = frozenset()


def _modules(package: Path = PACKAGE) -> dict[str, Path]:
    found = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(package.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _imported(name: str, path: Path, modules: dict[str, Path]) -> Iterator[str]:
    """The package modules `name` imports (a `from pkg import sub` counts as `pkg.sub`)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules]
            targets = subs if len(subs) == len(node.names) else [*subs, base]
        else:
            continue
        for target in targets:
            known = target
            while known and known not in modules:
                known = known.rpartition(".")[0]
            if known and known != name:
                yield known


def _graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    modules = _modules(package)
    return {name: set(_imported(name, path, modules)) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.add(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _package(module: str) -> str:
    """The part of peagle_deploy a module belongs to (`peagle_deploy.sdk.deploy` ->
    `peagle_deploy.sdk`; a top-level module is its own part)."""
    return ".".join(module.split(".")[:2])


def _package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph collapsed to the parts of the package (imports within one dropped)."""
    collapsed: dict[str, set[str]] = {}
    for module, targets in graph.items():
        collapsed.setdefault(_package(module), set()).update(
            _package(t) for t in targets if _package(t) != _package(module)
        )
    for targets in list(collapsed.values()):
        for target in targets:
            collapsed.setdefault(target, set())
    return collapsed


def _layer(module: str) -> int:
    parts = module.split(".")
    part = parts[1] if len(parts) > 1 else "__init__"
    for level, members in enumerate(LAYERS):
        if part in members:
            return level
    raise AssertionError(f"{module}: part {part!r} of the package is in no layer")


def test_the_reader_sees_the_imports_it_must() -> None:
    graph = _graph()
    assert "peagle_deploy.plan" in graph["peagle_deploy.sdk.deploy"]
    assert "peagle_deploy.sdk.waiter" in graph["peagle_deploy.sdk.deploy"]  # in a function
    assert "peagle_deploy.sdk.outcome" in graph["peagle_deploy.sdk.endpoint"]  # TYPE_CHECKING
    assert "peagle_deploy.spec.models" in graph["peagle_deploy.spec.flags"]
    assert "peagle_deploy.deployment" in graph["peagle_deploy.validation.speculative"]
    cycle = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(cycle) == [frozenset({"a", "b", "c"})]


def test_no_import_circles() -> None:
    assert [sorted(c) for c in _cycles(_graph())] == []


def test_no_two_parts_of_the_package_import_each_other() -> None:
    """Modules collapsed to their part (`sdk`, `experiment`, ...): no circle between parts,
    not even one closed by a lazy import in a function or under TYPE_CHECKING."""
    assert [sorted(c) for c in _cycles(_package_graph(_graph()))] == []


def test_the_package_graph_sees_a_circle_through_lazy_imports(tmp_path: Path) -> None:
    """sdk imports experiment in a function body (as sdk/deploy.py once did), experiment
    imports sdk under TYPE_CHECKING: no circle between the modules, one between the parts."""
    package = tmp_path / "peagle_deploy"
    for part in ("sdk", "experiment"):
        (package / part).mkdir(parents=True)
        (package / part / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "sdk" / "deploy.py").write_text(
        "def decide():\n    from peagle_deploy.experiment.record import running\n"
    )
    (package / "sdk" / "waiter.py").write_text("")
    (package / "experiment" / "record.py").write_text("running = None\n")
    (package / "experiment" / "lifecycle.py").write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
        "    from peagle_deploy.sdk.waiter import wait\n"
    )
    graph = _graph(package)
    assert _cycles(graph) == []
    assert _cycles(_package_graph(graph)) == [
        frozenset({"peagle_deploy.sdk", "peagle_deploy.experiment"})
    ]


def test_no_import_runs_back_up_the_layers() -> None:
    upward = sorted(
        (module, target)
        for module, targets in _graph().items()
        for target in targets
        if _layer(target) > _layer(module) and (module, target) not in KNOWN_UPWARD
    )
    assert upward == []


def test_an_upward_import_inside_a_function_is_caught(tmp_path: Path) -> None:
    """The layer rule reads imports in function bodies too (a lazy import is still one)."""
    package = tmp_path / "peagle_deploy"
    (package / "catalog").mkdir(parents=True)
    (package / "plan").mkdir()
    (package / "__init__.py").write_text("")
    (package / "plan" / "__init__.py").write_text("")
    (package / "catalog" / "__init__.py").write_text("")
    (package / "catalog" / "resolve.py").write_text(
        "def late():\n    from peagle_deploy.plan import build_plan\n    return build_plan\n"
    )
    modules = {
        "peagle_deploy": package / "__init__.py",
        "peagle_deploy.plan": package / "plan" / "__init__.py",
        "peagle_deploy.catalog": package / "catalog" / "__init__.py",
        "peagle_deploy.catalog.resolve": package / "catalog" / "resolve.py",
    }
    found = set(
        _imported(
            "peagle_deploy.catalog.resolve", modules["peagle_deploy.catalog.resolve"], modules
        )
    )
    assert found == {"peagle_deploy.plan"}
    assert _layer("peagle_deploy.plan") > _layer("peagle_deploy.catalog.resolve")


def test_the_plan_steps_do_not_import_each_other() -> None:
    graph = _graph()
    steps = [f"peagle_deploy.plan.{step}" for step in PLAN_STEPS]
    crossing = sorted(
        (step, target)
        for step in steps
        for target in graph[step]
        if target.startswith("peagle_deploy.plan") and target != step
    )
    assert crossing == []


def test_the_package_never_imports_the_cdk_app_nor_the_local_stand_ins() -> None:
    """infra/ and app.py build on the package; so does peagle_local (the emulator, the
    demo), which a deployment never installs for its own sake."""
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            bad = [
                n for n in names if n.split(".")[0] in ("infra", "app", "aws_cdk", "peagle_local")
            ]
            assert not bad, f"{path}: imports {bad}"
