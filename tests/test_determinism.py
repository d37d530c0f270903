"""The same blueprints give the same bytes: across runs, discovery orders and hash seeds."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

from obs_iac import pipeline
from obs_iac.load import load_blueprints
from obs_iac.load.loader import discover_files
from obs_iac.plan.compile import compile_plan
from obs_iac.plugins import discover
from obs_iac.render.serialize import serialize
from tests.conftest import REPO, blueprint_source, make_repo, tree_bytes


def _fleet_repo(root: Path) -> Path:
    """The examples plus enough extra services that order mistakes would show."""
    repo = make_repo(root)
    for i in range(6):
        profiling = "True" if i % 2 else "False"
        gpu = (
            f'GpuFleet(model="H100-SXM5-80GB", count={8 * (i + 1)}, '
            f'driver_version="550.54.15", profiling={profiling}, '
            'extra_fields=("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "DCGM_FI_DEV_MEM_COPY_UTIL"))'
        )
        source = blueprint_source(name=f'"svc-{i}"', sla_id=f'"svc_{i}"', gpu=gpu)
        (repo / "blueprints" / f"svc_{i}.py").write_text(source)
    return repo


def _render_files(repo: Path, files: list[Path] | None = None) -> dict[str, bytes]:
    ws = pipeline.open_workspace(repo)
    plugins = discover(ws.config)
    loaded = load_blueprints(ws.root, ws.config.blueprints, files=files)
    plan = compile_plan(loaded, plugins, ws.config)
    artifacts = pipeline.generate(ws, plan, plugins)
    return {a.path: serialize(a) for a in artifacts}


def test_two_renders_give_identical_bytes(tmp_path: Path) -> None:
    repo = _fleet_repo(tmp_path / "repo")
    first = pipeline.render(pipeline.open_workspace(repo)).files
    second = pipeline.render(pipeline.open_workspace(repo)).files
    assert first == second
    assert len(first) > 8 * 5 - 1


def test_discovery_order_does_not_matter(tmp_path: Path) -> None:
    repo = _fleet_repo(tmp_path / "repo")
    files = discover_files(repo, "blueprints")
    assert len(files) == 8
    baseline = _render_files(repo, files)
    assert baseline == _render_files(repo)
    assert baseline == _render_files(repo, list(reversed(files)))
    rng = random.Random(20261130)
    for _ in range(3):
        shuffled = files[:]
        rng.shuffle(shuffled)
        assert _render_files(repo, shuffled) == baseline


def test_hash_seed_does_not_matter(tmp_path: Path) -> None:
    trees = []
    for seed in ("0", "12345"):
        repo = _fleet_repo(tmp_path / f"repo-{seed}")
        env = {**os.environ, "PYTHONHASHSEED": seed, "NO_COLOR": "1"}
        proc = subprocess.run(
            [sys.executable, "-m", "obs_iac.cli", "render"],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        trees.append(tree_bytes(repo / "generated"))
    assert trees[0] == trees[1]
    assert len(trees[0]) > 8 * 5


def test_output_has_no_timestamps_or_versions(tmp_path: Path) -> None:
    import importlib.metadata as md

    version = md.version("obs-iac")
    files = pipeline.render(pipeline.open_workspace(_fleet_repo(tmp_path / "repo"))).files
    for path, data in files.items():
        text = data.decode("utf-8")
        assert text.endswith("\n"), path
        assert not text.endswith("\n\n"), path
        assert f"obs-iac {version}" not in text and f"v{version}" not in text, path
        assert str(tmp_path) not in text and str(REPO) not in text, path
