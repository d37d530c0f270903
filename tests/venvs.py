"""Fresh virtual environments with obs-iac and plugins installed from their pyprojects."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import sysconfig
import tempfile
import venv
from pathlib import Path

from filelock import FileLock

REPO = Path(__file__).resolve().parent.parent


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
