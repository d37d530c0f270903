"""Fresh virtual environments with obs-iac and plugins installed from their pyprojects."""

from __future__ import annotations

import subprocess
import sysconfig
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def plugin_env(root: Path, *packages: Path) -> Path:
    """A venv with obs-iac and ``packages`` installed (editable, with entry points).

    Their dependencies are reused from this interpreter instead of downloaded again.
    """
    env = root / "env"
    venv.EnvBuilder(with_pip=True).create(env)
    python = env / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(site, "host-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    for target in (REPO, *packages):
        subprocess.run(
            [python, "-m", "pip", "install", "-q", "--no-deps", "-e", str(target)], check=True
        )
    return env
