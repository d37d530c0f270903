"""Repository settings: ``[tool.obs-iac]`` in pyproject.toml, or a top-level obs-iac.toml."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from obs_iac.diagnostics import Diagnostic, InputError, Location, Severity
from obs_iac.labels import NamingStrategy

VERSION_PATTERN = r"^\d+\.\d+(\.\d+)?$"


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PluginSettings(Frozen):
    require: tuple[str, ...] = Field(
        default=(), description="Plugin names that must be installed; missing ones are an error."
    )
    disable: tuple[str, ...] = Field(
        default=(), description="Installed plugin names to leave out of this repository's render."
    )


class RepoConfig(Frozen):
    """Settings for one GitOps repository."""

    blueprints: str = Field(
        default="blueprints", description="Folder with blueprint files, relative to the repo."
    )
    output: str = Field(
        default="generated", description="Folder obs-iac renders into, relative to the repo."
    )
    naming: NamingStrategy = Field(
        default=NamingStrategy.CLASSIC,
        description="How canonical keys are spelled in Prometheus: classic (resource_gpu_id) "
        "or utf8 (Prometheus 3 quoted names).",
    )
    prometheus_min_version: str = Field(
        default="2.42",
        pattern=VERSION_PATTERN,
        description="Oldest Prometheus the rules must load in; newer syntax is used only above it.",
    )
    alertmanager_min_version: str = Field(
        default="0.25",
        pattern=VERSION_PATTERN,
        description="Oldest Alertmanager the generated configuration must load in.",
    )
    evaluation_interval: str = Field(
        default="1m",
        pattern=r"^[1-9][0-9]*(s|m|h)$",
        description="The Prometheus global evaluation_interval the rules are written for.",
    )
    prometheus_rule_release: str = Field(
        default="kube-prometheus-stack",
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
        description="The `release` label on PrometheusRule CRDs, which kube-prometheus-stack "
        "selects on.",
    )
    prometheus_rule_namespace: str = Field(
        default="monitoring",
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
        description="Namespace of generated PrometheusRule and ConfigMap objects.",
    )
    blueprint_timeout_seconds: float = Field(
        default=60.0,
        gt=0,
        le=3600,
        allow_inf_nan=False,
        description="How long one blueprint file may run before it is stopped and reported.",
    )
    plugins: PluginSettings = Field(default_factory=PluginSettings)
    packs: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Per-pack settings, validated by each pack."
    )
    generators: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Per-generator settings, validated by each generator."
    )
    lint: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description='Per-lint-rule settings (`[tool.obs-iac.lint."<code>"]`), validated by '
        "each rule.",
    )

    @field_validator("blueprints", "output")
    @classmethod
    def _relative(cls, value: str) -> str:
        path = Path(value)
        if path.is_absolute() or ".." in path.parts or value.strip() in ("", "."):
            raise ValueError("must be a folder inside the repository (no '..', not absolute)")
        return value


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version))


def _key_line(text: str, key: str) -> int | None:
    pattern = re.compile(rf"^\s*\"?{re.escape(key)}\"?\s*=", re.MULTILINE)
    match = pattern.search(text)
    return text.count("\n", 0, match.start()) + 1 if match else None


def _toml_position(exc: tomllib.TOMLDecodeError) -> tuple[int | None, int | None]:
    # Python < 3.14 has no lineno/colno attributes; the message carries the position.
    line, column = getattr(exc, "lineno", None), getattr(exc, "colno", None)
    if line is None:
        match = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        if match:
            line, column = int(match.group(1)), int(match.group(2))
    return line, column


def is_repo_root(folder: Path) -> str:
    """The settings file that makes ``folder`` an obs-iac repository, or '' if none: a
    top-level obs-iac.toml, or a pyproject.toml with a ``[tool.obs-iac]`` table."""
    if (folder / "obs-iac.toml").is_file():
        return "obs-iac.toml"
    pyproject = folder / "pyproject.toml"
    if not pyproject.is_file():
        return ""
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        # A broken pyproject.toml that mentions the table is still this repository's:
        # loading it then reports the syntax error with its position.
        try:
            return "pyproject.toml" if "[tool.obs-iac" in pyproject.read_text("utf-8") else ""
        except (OSError, UnicodeDecodeError):
            return ""
    tool = data.get("tool")
    return "pyproject.toml" if isinstance(tool, dict) and "obs-iac" in tool else ""


def find_root(start: Path, here_with_blueprints: bool = True) -> Path | None:
    """The nearest folder at or above ``start`` that is an obs-iac repository, as git
    finds its work tree; None when there is none up to the file system's root.

    ``start`` itself also counts when it holds a ``blueprints/`` folder: a repository
    with default settings needs no settings file, and a folder of blueprints nested in
    another repository (a test case, an example) is meant, not the repository around it."""
    here = start.resolve()
    if here_with_blueprints and (here / "blueprints").is_dir():
        return here
    for folder in (here, *here.parents):
        if is_repo_root(folder):
            return folder
    return None


def load_repo_config(root: Path) -> tuple[RepoConfig, str]:
    """Reads the repo config; returns it and the file it came from ('' for defaults)."""
    candidates = [(root / "obs-iac.toml", False), (root / "pyproject.toml", True)]
    for path, nested in candidates:
        if not path.is_file():
            continue
        rel = path.name
        text = path.read_text(encoding="utf-8")
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            line, column = _toml_position(exc)
            raise InputError(
                [
                    Diagnostic(
                        "config/syntax",
                        Severity.ERROR,
                        f"{rel} is not valid TOML: {exc}",
                        hint="fix the TOML syntax at the position shown",
                        location=Location(rel, line, column),
                    )
                ]
            ) from None
        if nested:
            tool = data.get("tool", {})
            if "obs-iac" not in tool:
                continue
            data = tool["obs-iac"]
        try:
            return RepoConfig.model_validate(data), rel
        except ValidationError as exc:
            diags = []
            for err in exc.errors():
                loc = [str(p) for p in err["loc"]]
                field_path = ".".join(loc)
                line = _key_line(text, loc[-1]) if loc else None
                section = "[tool.obs-iac]" if nested else "obs-iac.toml"
                diags.append(
                    Diagnostic(
                        "config/invalid",
                        Severity.ERROR,
                        f"{section} {field_path}: {err['msg']}",
                        hint=_config_hint(err),
                        location=Location(rel, line),
                        object_path=("config", *loc),
                    )
                )
            raise InputError(diags) from None
    return RepoConfig(), ""


def _config_hint(err: Any) -> str:
    if err["type"] == "extra_forbidden":
        known = ", ".join(sorted(RepoConfig.model_fields))
        return f"known settings: {known}"
    return "see `obs-iac schema --config` for every setting and its type"


def config_schema() -> dict[str, Any]:
    return RepoConfig.model_json_schema()
