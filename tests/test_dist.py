"""`make dist`, and a repository scaffolded from the wheel passing its own CI, offline.

The scaffold is installed the way a user's machine and CI install it: ci.sh and the
Makefile create .venv from nothing and pip-install requirements.txt. pip gets no index
(``PIP_NO_INDEX``) and only a wheelhouse of obs-iac's dependencies repacked from this
interpreter (tests/wheelhouse.py), so nothing can come from the network or from this
repository's source tree.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from tests.tools import require_tool
from tests.wheelhouse import build_wheelhouse

REPO = Path(__file__).resolve().parents[1]
VENV = Path(sys.executable).parent.parent
OBS_IAC = Path(sys.executable).with_name("obs-iac")


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`make dist` into a temporary folder, once per test session."""
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run(
        [require_tool("make"), "-s", "dist", f"DIST={out}", f"VENV={VENV}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheelhouse")
    build_wheelhouse(out)
    return out


def _package_files() -> set[str]:
    listed = subprocess.run(
        ["git", "ls-files", "obs_iac"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    return {p for p in listed if (REPO / p).is_file()}


def test_make_dist_builds_an_sdist_and_a_wheel_with_every_package_file(dist: Path) -> None:
    (wheel,) = dist.glob("obs_iac-*-py3-none-any.whl")
    (sdist,) = dist.glob("obs_iac-*.tar.gz")
    tracked = _package_files()
    # Data files too (catalogues, templates): the wheel once lacked otel_collector.toml.
    assert any(not p.endswith(".py") for p in tracked)
    with zipfile.ZipFile(wheel) as whl:
        in_wheel = set(whl.namelist())
        entry_points = whl.read(
            next(n for n in in_wheel if n.endswith(".dist-info/entry_points.txt"))
        ).decode()
    assert tracked <= in_wheel, sorted(tracked - in_wheel)
    assert "obs-iac = obs_iac.cli:entry" in entry_points
    with tarfile.open(sdist) as tar:
        top = sdist.name.removesuffix(".tar.gz")
        in_sdist = {n.removeprefix(top + "/") for n in tar.getnames()}
    assert tracked <= in_sdist, sorted(tracked - in_sdist)


def _offline_env(wheelhouse: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "VIRTUAL_ENV"))}
    # This venv's bin/ off PATH: the scaffold must use the obs-iac it installs itself.
    path = [p for p in env.get("PATH", "").split(os.pathsep) if Path(p) != OBS_IAC.parent]
    env.update(
        PATH=os.pathsep.join(path),
        PIP_NO_INDEX="1",
        PIP_FIND_LINKS=str(wheelhouse),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        # Bytecode is compiled on first import instead; the install is what is tested.
        PIP_NO_COMPILE="1",
        PYTHON=sys.executable,
        NO_COLOR="1",
        GIT_AUTHOR_NAME="t",
        GIT_AUTHOR_EMAIL="t@example.com",
        GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@example.com",
    )
    return env


def _run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, check=False)


def test_a_scaffold_from_the_wheel_passes_its_own_ci_offline(
    dist: Path, wheelhouse: Path, tmp_path: Path
) -> None:
    make, git = require_tool("make"), require_tool("git")
    (wheel,) = dist.glob("obs_iac-*.whl")
    env = _offline_env(wheelhouse)
    repo = tmp_path / "observability"
    init = _run([str(OBS_IAC), "init", str(repo), "--from", str(wheel)], tmp_path, env)
    assert init.returncode == 0, init.stderr
    assert (repo / "vendor" / wheel.name).read_bytes() == wheel.read_bytes()
    assert f"./vendor/{wheel.name}" in (repo / "requirements.txt").read_text().splitlines()

    # The first PR before anything is rendered: ci.sh builds .venv from nothing, and
    # fails because generated/ is missing.
    first = _run(["sh", "ci.sh"], repo, env)
    assert first.returncode != 0, first.stdout + first.stderr
    assert "generated/ is stale" in first.stderr
    # .venv holds the vendored wheel, not this checkout (no editable install, no path);
    # asked from the scaffold, so that this checkout is not on sys.path.
    installed = subprocess.run(
        [
            str(repo / ".venv/bin/python"),
            "-c",
            "from importlib import metadata; import obs_iac; "
            "print(metadata.distribution('obs-iac').read_text('direct_url.json')); "
            "print(obs_iac.__file__)",
        ],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert json.loads(installed[0])["url"].endswith(f"/vendor/{wheel.name}")
    assert installed[1].startswith(str(repo / ".venv"))

    # An obs-iac installed from a wheel scaffolds with that same wheel by default.
    second = tmp_path / "second"
    again = _run([str(repo / ".venv/bin/obs-iac"), "init", str(second)], tmp_path, env)
    assert again.returncode == 0, again.stderr
    assert (second / "vendor" / wheel.name).read_bytes() == wheel.read_bytes()
    assert (second / "requirements.txt").read_text() == (repo / "requirements.txt").read_text()

    render = _run([make, "render"], repo, env)
    assert render.returncode == 0, render.stdout + render.stderr
    assert (repo / "generated/prometheus/rules/example-training.rules.yml").is_file()
    ci = _run(["sh", "ci.sh"], repo, env)
    assert ci.returncode == 0, ci.stdout + ci.stderr
    assert "generated/ is up to date" in ci.stderr
    assert "lint: 0 errors" in ci.stderr

    # What gets committed: blueprints, generated/ and the vendored wheel, never .venv.
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "scaffold"]):
        assert _run([git, *args], repo, env).returncode == 0
    tracked = _run([git, "ls-files"], repo, env).stdout.split()
    assert f"vendor/{wheel.name}" in tracked and "ci.sh" in tracked
    assert "generated/prometheus/rules/example-training.rules.yml" in tracked
    assert not any(p.startswith(".venv/") for p in tracked)

    # `make pin` rewrites constraints.txt from .venv, which then needs no rebuild.
    pin = _run([make, "pin"], repo, env)
    assert pin.returncode == 0, pin.stdout + pin.stderr
    pins = (repo / "constraints.txt").read_text().splitlines()
    assert f"pydantic=={metadata.version('pydantic')}" in pins
    assert not any(line.lower().startswith("obs-iac") for line in pins)

    # A blueprint change that was not rendered fails the same CI.
    blueprint = repo / "blueprints/example_training.py"
    blueprint.write_text(blueprint.read_text().replace("celsius=85", "celsius=83"))
    stale = _run(["sh", "ci.sh"], repo, env)
    assert stale.returncode != 0
    assert "generated/ is stale" in stale.stderr
    assert "venv --clear" not in stale.stdout
