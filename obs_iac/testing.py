"""The harness obs-iac's own tests use, for plugin authors.

Render a set of blueprints with a given plugin set into memory, compare the result with a
golden tree, check determinism, and run the lint rules, without writing anything::

    from obs_iac.testing import render_blueprints, assert_golden

    result = render_blueprints({"svc.py": SOURCE}, extra_packs=[MyPack()])
    assert_golden(result, Path("tests/golden/my-case"))

Set ``OBS_IAC_UPDATE_GOLDEN=1`` to rewrite golden trees instead of comparing them.
"""

from __future__ import annotations

import difflib
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from obs_iac.config import RepoConfig
from obs_iac.diagnostics import Diagnostic
from obs_iac.pipeline import Render, open_workspace, render
from obs_iac.plugins import GENERATORS, LINT_RULES, PACKS, PluginSet, discover

UPDATE_ENV = "OBS_IAC_UPDATE_GOLDEN"


def plugin_set(
    extra_packs: Iterable[Any] = (),
    extra_generators: Iterable[Any] = (),
    extra_lint_rules: Iterable[Any] = (),
    config: RepoConfig | None = None,
) -> PluginSet:
    """The installed plugins plus plugin objects given directly (not installed)."""

    def named(objs: Iterable[Any], attr: str) -> list[tuple[str, Any]]:
        return [(str(getattr(o, attr)), o) for o in objs]

    return discover(
        config,
        extra={
            PACKS: named(extra_packs, "name"),
            GENERATORS: named(extra_generators, "name"),
            LINT_RULES: named(extra_lint_rules, "code"),
        },
    )


def render_blueprints(
    blueprints: Mapping[str, str] | Path,
    *,
    config: RepoConfig | None = None,
    extra_packs: Iterable[Any] = (),
    extra_generators: Iterable[Any] = (),
    extra_lint_rules: Iterable[Any] = (),
) -> Render:
    """Renders blueprint sources (file name -> Python source) or a blueprints folder."""
    cfg = config or RepoConfig()
    plugins = plugin_set(extra_packs, extra_generators, extra_lint_rules, cfg)
    with tempfile.TemporaryDirectory(prefix="obs-iac-test-") as tmp:
        root = Path(tmp)
        folder = root / cfg.blueprints
        folder.mkdir(parents=True)
        if isinstance(blueprints, Path):
            for path in sorted(blueprints.rglob("*.py")):
                target = folder / path.relative_to(blueprints)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(path.read_bytes())
        else:
            for name, source in blueprints.items():
                (folder / name).write_text(source, encoding="utf-8")
        return render(open_workspace(root, cfg), plugins)


def golden_mismatches(result: Render, expected: Path) -> list[str]:
    """Human-readable differences between a render and a golden tree ([] when equal)."""
    problems: list[str] = []
    on_disk = {
        p.relative_to(expected).as_posix(): p.read_bytes()
        for p in sorted(expected.rglob("*"))
        if p.is_file()
    }
    for rel in sorted(set(on_disk) | set(result.files)):
        if rel not in result.files:
            problems.append(f"{rel}: in the golden tree but no longer rendered")
        elif rel not in on_disk:
            problems.append(f"{rel}: rendered but missing from the golden tree")
        elif on_disk[rel] != result.files[rel]:
            diff = difflib.unified_diff(
                on_disk[rel].decode("utf-8", "replace").splitlines(),
                result.files[rel].decode("utf-8", "replace").splitlines(),
                fromfile=f"golden/{rel}",
                tofile=f"rendered/{rel}",
                lineterm="",
                n=2,
            )
            problems.append("\n".join(list(diff)[:60]))
    return problems


def assert_golden(result: Render, expected: Path) -> None:
    """Compares with the golden tree, or rewrites it when OBS_IAC_UPDATE_GOLDEN=1."""
    if os.environ.get(UPDATE_ENV) == "1":
        if expected.exists():
            for path in sorted(expected.rglob("*"), reverse=True):
                if path.is_file():
                    path.unlink()
                else:
                    path.rmdir()
        for rel, data in result.files.items():
            target = expected / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        return
    problems = golden_mismatches(result, expected)
    if problems:
        raise AssertionError(
            f"render differs from {expected} (run with {UPDATE_ENV}=1 to accept):\n"
            + "\n".join(problems)
        )


def assert_deterministic(blueprints: Mapping[str, str] | Path, **kwargs: Any) -> None:
    """Renders twice, the second time with the files in reverse creation order."""
    first = render_blueprints(blueprints, **kwargs)
    if isinstance(blueprints, Mapping):
        blueprints = dict(reversed(list(blueprints.items())))
    second = render_blueprints(blueprints, **kwargs)
    if dict(first.files) != dict(second.files):
        changed = sorted(
            k
            for k in set(first.files) | set(second.files)
            if first.files.get(k) != second.files.get(k)
        )
        raise AssertionError(f"two renders differ in: {', '.join(changed)}")


def lint_findings(result: Render, min_severity: str = "warning") -> list[Diagnostic]:
    """The render's lint findings at or above a severity."""
    order = {"info": 0, "warning": 1, "error": 2}
    return [f for f in result.findings if order[f.severity.label] >= order[min_severity]]
