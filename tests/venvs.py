"""Fresh virtual environments with obs-iac and plugins installed from their pyprojects,
and a way to build such expensive things once per test run under pytest-xdist."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import venv
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock

REPO = Path(__file__).resolve().parent.parent


def shared_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder every pytest-xdist worker of this run sees: under xdist each worker's base
    temp is a subfolder of one per-run folder; without xdist, the base temp itself."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def once_per_run(
    tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]
) -> Path:
    """``build`` into ``<shared>/<name>`` by the first worker that asks; the others wait
    for it and reuse the result. A session or module fixture runs once per xdist worker
    that needs it, so this is how something costly is made once per `make test`."""
    root = shared_dir(tmp_path_factory) / name
    with FileLock(str(root) + ".lock"):
        if not (root / ".built").is_file():
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir(parents=True)
            build(root)
            (root / ".built").touch()
    return root


def plugin_env(root: Path, *packages: Path) -> Path:
    """A venv with obs-iac and ``packages`` installed (editable, with entry points).

    What the tests rely on is real: a separate interpreter prefix whose only obs-iac
    distributions are the ones pip installed there from their pyprojects, so entry points
    come from those installs. What is not rebuilt each time: the venv gets no pip of its
    own (this interpreter's pip installs into it with ``--python``, saving ensurepip), the
    build backend is this interpreter's setuptools (no isolated build environment to
    download), and dependencies are reused from this interpreter through a .pth file
    instead of downloaded again. ``--no-index``: nothing comes from the network.
    """
    env = root / "env"
    venv.EnvBuilder(with_pip=False).create(env)
    python = env / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(site, "host-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    args = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q"]
    args += ["--no-deps", "--no-index", "--no-build-isolation"]
    for target in (REPO, *packages):
        args += ["-e", str(target)]
    # An editable build writes <package>.egg-info into the source tree: two xdist
    # workers building obs-iac at once would race on it.
    tag = hashlib.sha256(str(REPO).encode()).hexdigest()[:12]
    with FileLock(str(Path(tempfile.gettempdir()) / f"obs-iac-editable-{tag}.lock")):
        done = subprocess.run(args, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return env
