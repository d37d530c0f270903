"""Fixtures for the hostile-input suite: one rendered example repository per session,
copied for each test, so that every test starts from a committed-looking tree fast."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from obs_iac.engine.cache import CACHE_DIR_ENV, SECRET_ENV
from tests.conftest import _run_in_process, make_repo, tree_bytes


@pytest.fixture(autouse=True)
def _private_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test has its own per-user config folder (the cache secret lives there)."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(SECRET_ENV, raising=False)
    monkeypatch.delenv(CACHE_DIR_ENV, raising=False)


@pytest.fixture(scope="session")
def _template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_repo(tmp_path_factory.mktemp("hostile") / "repo")
    old = os.environ.get("XDG_CONFIG_HOME")
    os.environ["XDG_CONFIG_HOME"] = str(root.parent / "xdg")
    try:
        result = _run_in_process(["render", "--no-cache"], root)
    finally:
        if old is None:
            del os.environ["XDG_CONFIG_HOME"]
        else:
            os.environ["XDG_CONFIG_HOME"] = old
    assert result.exit_code == 0, result.output
    return root


@pytest.fixture
def repo(_template: Path, tmp_path: Path) -> Path:
    """A rendered copy of the example repository (no cache yet)."""
    target = tmp_path / "repo"
    shutil.copytree(_template, target, symlinks=True)
    return target


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file of the repository but the cache: what "nothing touched" compares."""
    return {
        p: d
        for p, d in tree_bytes(root).items()
        if not p.startswith(".obs-iac-cache/") and p != ".obs-iac.lock"
    }
