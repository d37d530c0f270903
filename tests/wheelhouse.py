"""A wheelhouse of obs-iac's dependencies, repacked from this interpreter's installation.

Tests that install obs-iac into a clean venv run offline (``pip --no-index
--find-links``), so the dependencies cannot be downloaded, and pip keeps no wheel of what
it installed. Each installed distribution is zipped back into a wheel from the files its
RECORD lists (the format pip installed it from: a wheel is that file tree plus its
.dist-info), with a fresh RECORD. Console scripts outside site-packages are left out;
pip writes them again from entry_points.txt.
"""

from __future__ import annotations

import base64
import hashlib
import re
import zipfile
from importlib import metadata
from pathlib import Path

from obs_iac.scaffold.source import runtime_distributions

# Written by the installer, not part of the wheel.
_INSTALLER_FILES = {"INSTALLER", "REQUESTED", "direct_url.json", "RECORD"}


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _tag(dist: metadata.Distribution) -> str:
    wheel = dist.read_text("WHEEL") or ""
    tags = re.findall(r"^Tag: (\S+)$", wheel, re.MULTILINE)
    return tags[0] if tags else "py3-none-any"


def repack(dist: metadata.Distribution, dest: Path) -> Path:
    """Writes ``dist`` as a wheel into ``dest``; returns its path."""
    name = re.sub(r"[-_.]+", "_", dist.metadata["Name"])
    wheel = dest / f"{name}-{dist.version}-{_tag(dist)}.whl"
    site = Path(str(dist.locate_file("")))
    record: list[str] = []
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as out:
        for file in dist.files or []:
            rel = file.as_posix()
            parts = file.parts
            if ".." in parts or "__pycache__" in parts:
                continue
            if ".dist-info" in parts[0] and file.name in _INSTALLER_FILES:
                continue
            data = (site / file).read_bytes()
            out.writestr(rel, data)
            record.append(f"{rel},{_digest(data)},{len(data)}")
        info = next(
            (p.parts[0] for p in dist.files or [] if p.parts[0].endswith(".dist-info")), None
        )
        assert info is not None, f"{dist.metadata['Name']} has no .dist-info in its RECORD"
        record.append(f"{info}/RECORD,,")
        out.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return wheel


def build_wheelhouse(dest: Path) -> list[Path]:
    """Every runtime dependency of obs-iac, as installed here, as wheels in ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    return [repack(dist, dest) for dist in runtime_distributions()]
