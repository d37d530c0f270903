"""Cache keys: digests of everything a piece of work depends on.

A service's expansion depends on its validated blueprint (which covers helpers the
blueprint imports), the blueprint file's bytes (diagnostics carry its line numbers), the
repository config, and the code of obs-iac and of every plugin. Rendering a shard adds
the fleet's metric catalogue and the files generators read.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import json
import sys
from collections.abc import Iterable
from functools import cache
from pathlib import Path

from obs_iac.config import RepoConfig
from obs_iac.plan.model import MetricSpec, ServicePlan
from obs_iac.plugins import PluginSet

# Bump when the layout of cached entries changes.
CACHE_FORMAT = 2
_CODE_SUFFIXES = (".py", ".csv", ".toml", ".j2", ".json", ".yaml", ".yml")


def digest(*parts: str | bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


@cache
def _package_code(top: str) -> str:
    """The digest of a plugin package's files: a version number does not change while
    someone edits an editable install, and the cache must not outlive the edit."""
    module = sys.modules.get(top)
    paths: list[str] = list(getattr(module, "__path__", []) or [])
    file = getattr(module, "__file__", None)
    if not paths and file:
        return digest(Path(file).read_bytes())
    h = hashlib.sha256()
    for base in sorted(paths):
        for path in sorted(Path(base).rglob("*")):
            if path.suffix in _CODE_SUFFIXES and "__pycache__" not in path.parts:
                h.update(str(path.relative_to(base)).encode() + b"\0")
                h.update(path.read_bytes())
    return h.hexdigest()


def code_fingerprint(plugins: PluginSet) -> str:
    tops = {"obs_iac"}
    for plugin in plugins.all():
        tops.add(type(plugin.obj).__module__.split(".")[0])
    try:
        version = md.version("obs-iac")
    except md.PackageNotFoundError:
        version = "unknown"
    return digest(
        f"format {CACHE_FORMAT}",
        f"obs-iac {version}",
        f"python {sys.version_info.major}.{sys.version_info.minor}",
        plugins.fingerprint(),
        *(f"{top} {_package_code(top)}" for top in sorted(tops)),
    )


def base_key(plugins: PluginSet, repo: RepoConfig) -> str:
    return digest(code_fingerprint(plugins), repo.model_dump_json())


def expansion_key(base: str, service: ServicePlan, blueprint_source: str) -> str:
    return digest(base, "expand", service.model_dump_json(), blueprint_source)


def catalogue_key(catalogue: Iterable[MetricSpec]) -> str:
    return digest(json.dumps([m.model_dump(mode="json") for m in catalogue], sort_keys=True))


def shard_key(expansion: str, shared: str, lint: str) -> str:
    """``shared``: the digest of the fleet catalogue and the generators' input files."""
    return digest(expansion, "shard", shared, lint)
