"""Where a scaffolded repository installs obs-iac from, and the versions it pins.

obs-iac is on no package index, so ``pip install obs-iac`` finds nothing: a repository
has to name the wheel, source folder or git URL it renders with. The default is the
source of the running installation (PEP 610's ``direct_url.json``), so a scaffold made by
an obs-iac installed from a wheel installs that same wheel.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlparse

from obs_iac.diagnostics import Diagnostic, InputError, Location, Severity

DIST = "obs-iac"
Kind = Literal["wheel", "path", "git", "index"]
_GIT = re.compile(r"^git\+(https|http|ssh|file|git)://\S+$")


@dataclass(frozen=True)
class Source:
    kind: Kind
    requirement: str  # the requirements.txt line
    note: str  # one line for a human: what it is, where it came from
    wheel: Path | None = None  # a wheel to copy into the repository (vendor/)


def _error(code: str, message: str, hint: str, where: str) -> InputError:
    diagnostic = Diagnostic(code, Severity.ERROR, message, hint=hint, location=Location(where))
    return InputError([diagnostic])


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _wheel(path: Path) -> Source:
    return Source(
        "wheel",
        f"./vendor/{path.name}",
        f"wheel {path.name} (sha256 {_sha256(path)}), copied into vendor/",
        path,
    )


def _folder(path: Path) -> Source:
    return Source(
        "path",
        f"{DIST} @ {path.resolve().as_uri()}",
        f"source folder {path.resolve()} (exists on this machine only: CI elsewhere needs "
        "a wheel or a git URL)",
    )


def from_option(value: str) -> Source:
    """``init --from``: a wheel file, a source folder or a git URL; bad ones are exit 2."""
    if value.startswith("git+"):
        if not _GIT.match(value):
            raise _error(
                "init/from-git",
                f"--from {value!r} is not a git URL pip understands",
                "write it as git+https://HOST/ORG/obs-iac@TAG (or @COMMIT)",
                value,
            )
        pinned = "@" in urlparse(value[4:]).path
        note = f"git {value}" + ("" if pinned else " (not pinned: add @TAG or @COMMIT)")
        return Source("git", f"{DIST} @ {value}", note)
    path = Path(value).expanduser()
    if not path.exists():
        raise _error(
            "init/from-missing",
            f"--from {value}: no such file or folder",
            "give a wheel (`make dist` in an obs-iac checkout writes dist/*.whl), an obs-iac "
            "source folder, or a git URL (git+https://...@TAG)",
            value,
        )
    if path.is_file():
        if path.suffix != ".whl" or not path.name.startswith("obs_iac-"):
            raise _error(
                "init/from-not-wheel",
                f"--from {value} is a file but not an obs-iac wheel (obs_iac-*.whl)",
                "build one with `make dist` in an obs-iac checkout, or give a source folder",
                value,
            )
        return _wheel(path)
    if not (path / "pyproject.toml").is_file() or not (path / "obs_iac").is_dir():
        raise _error(
            "init/from-not-source",
            f"--from {value} is a folder but not an obs-iac source tree "
            "(no pyproject.toml and obs_iac/ in it)",
            "give the root of an obs-iac checkout, a wheel, or a git URL",
            value,
        )
    return _folder(path)


def running() -> Source:
    """The source the running obs-iac was installed from."""
    try:
        dist = metadata.distribution(DIST)
    except metadata.PackageNotFoundError:
        here = Path(__file__).resolve().parents[2]
        if (here / "pyproject.toml").is_file():
            return _folder(here)
        raise _error(
            "init/from-unknown",
            "cannot tell where the running obs-iac was installed from",
            "pass --from with a wheel, a source folder or a git URL",
            ".",
        ) from None
    text = dist.read_text("direct_url.json")
    if not text:
        return Source("index", f"{DIST}=={dist.version}", f"{DIST} {dist.version} from an index")
    info = json.loads(text)
    url = str(info.get("url", ""))
    if "vcs_info" in info:
        commit = info["vcs_info"].get("commit_id", "")
        return Source("git", f"{DIST} @ git+{url}@{commit}", f"git {url} at {commit}")
    parsed = urlparse(url)
    local = Path(unquote(parsed.path)) if parsed.scheme == "file" else None
    if local is None:
        return Source("index", f"{DIST} @ {url}", f"archive {url}")
    if not local.exists():
        raise _error(
            "init/from-gone",
            f"the running obs-iac was installed from {local}, which no longer exists",
            "pass --from with a wheel, a source folder or a git URL",
            str(local),
        )
    if local.is_file():
        return _wheel(local)
    return _folder(local)


def _requirement_names(requirements: list[str] | None) -> list[str]:
    from packaging.requirements import Requirement

    names = []
    for text in requirements or []:
        req = Requirement(text)
        # Extras' requirements are left out: an install of obs-iac never pulls them in.
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        names.append(req.name)
    return names


def runtime_distributions() -> list[metadata.Distribution]:
    """obs-iac's runtime dependencies as installed here, transitively, sorted by name."""
    from packaging.utils import canonicalize_name

    found: dict[str, metadata.Distribution] = {}
    todo = _requirement_names(metadata.distribution(DIST).requires)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in found:
            continue
        dist = metadata.distribution(name)
        found[name] = dist
        todo.extend(_requirement_names(dist.requires))
    return [found[name] for name in sorted(found)]


def constraints() -> str:
    """constraints.txt: the versions of obs-iac's dependencies this installation runs."""
    lines = [
        "# The versions of obs-iac's dependencies the scaffold was made with; `make venv`",
        "# installs exactly these. `make pin` rewrites this file from .venv.",
    ]
    try:
        dists = runtime_distributions()
    except metadata.PackageNotFoundError:
        dists = []
    lines += [f"{d.metadata['Name']}=={d.version}" for d in dists]
    return "\n".join(lines) + "\n"
