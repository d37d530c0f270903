"""``obs-iac diff``: render the working tree, get the base (``generated/`` or a git ref
rendered with the current code), compare by meaning, flag risks."""

from __future__ import annotations

import io
import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from obs_iac.config import RepoConfig
from obs_iac.diagnostics import Diagnostic, InputError, Location, ObsIacError, Severity
from obs_iac.diff.compare import (
    Acknowledgement,
    DiffResult,
    apply_acknowledgements,
    compare,
    risk_flags,
)
from obs_iac.diff.model import (
    RULE_PATTERNS,
    SERVICE_PATTERNS,
    SemanticModel,
    build_model,
    partners,
    plan_entities,
)
from obs_iac.pipeline import Workspace, open_workspace
from obs_iac.plan.model import Plan
from obs_iac.plugins import PluginSet, discover
from obs_iac.render.writer import read_manifest

PluginsFactory = Callable[[RepoConfig], PluginSet]


@dataclass(frozen=True)
class Side:
    label: str
    files: Mapping[str, bytes]
    plan: Plan | None


def render_files(
    ws: Workspace, plugins: PluginSet, cache_dir: Path | None = None
) -> tuple[Plan, dict[str, bytes]]:
    """What ``obs-iac render`` would write, through the render engine and its cache (the
    fleet-level lint rules are skipped: findings are not part of the output)."""
    from obs_iac.engine.run import run

    result = run(ws, plugins, mode="collect", lint=False, cache_dir=cache_dir)
    assert result.files is not None
    return result.plan, result.files


def _bad(code: str, message: str, hint: str) -> InputError:
    return InputError([Diagnostic(code, Severity.ERROR, message, hint=hint)])


def committed_side(output: Path, label: str) -> Side:
    """What ``generated/`` holds: only files the manifest says obs-iac owns."""
    files = {}
    for rel in read_manifest(output):
        path = output / rel
        if path.is_file():
            files[rel] = path.read_bytes()
    return Side(label, files, None)


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, check=False)
    except FileNotFoundError:
        raise _bad(
            "diff/no-git", "--base needs git, which is not installed", "install git"
        ) from None


def ref_side(
    root: Path,
    ref: str,
    plugins_factory: PluginsFactory,
    work: Path,
    cache_dir: Path | None = None,
    output: str | None = None,
) -> Side:
    """Renders ``ref``'s blueprints with ``ref``'s repo config, using this obs-iac."""
    top = _git(root, "rev-parse", "--show-toplevel")
    if top.returncode != 0:
        raise _bad(
            "diff/not-a-repository",
            f"--base {ref}: {root.resolve()} is not inside a git repository",
            "run obs-iac diff inside the GitOps repository's clone, or drop --base to compare "
            "with the committed generated/ folder",
        )
    toplevel = Path(top.stdout.decode().strip())
    sha = _git(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if sha.returncode != 0:
        raise _bad(
            "diff/unknown-ref",
            f"--base {ref}: no such commit, branch or tag in this repository",
            "fetch it first (e.g. `git fetch origin main`) or check the spelling; in CI "
            "clone with enough history (actions/checkout fetch-depth: 0)",
        )
    commit = sha.stdout.decode().strip()
    prefix = root.resolve().relative_to(toplevel.resolve())
    # git archive reads the object store only: the user's checkout, index and worktree
    # list stay untouched, and there is nothing to clean up in the repository.
    # The committed output is left out: the base is rendered, never read, and at fleet
    # scale the output is most of the tree (1,000 services: 330 MB).
    skip = [f":(exclude){(prefix / output).as_posix()}"] if output else []
    archive = _git(toplevel, "archive", "--format=tar", commit, "--", ".", *skip)
    if archive.returncode != 0:
        raise _bad(
            "diff/archive",
            f"--base {ref}: git archive failed: {archive.stderr.decode().strip()}",
            "check that the repository is readable",
        )
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(work, filter="data")
    base_root = work / prefix
    try:
        ws = open_workspace(base_root)
        if not (base_root / ws.config.blueprints).is_dir():
            # The base predates obs-iac (the PR that introduces it): everything is new.
            return Side(ref, {}, None)
        base_plan, base_files = render_files(ws, plugins_factory(ws.config), cache_dir)
    except ObsIacError as exc:
        short = commit[:12]
        details = [
            Diagnostic(
                d.code,
                d.severity,
                f"[base {ref}] {d.message}",
                hint=d.hint,
                location=d.location,
                object_path=d.object_path,
                origin=d.origin,
            )
            for d in exc.diagnostics
        ]
        raise InputError(
            [
                Diagnostic(
                    "diff/base-failed",
                    Severity.ERROR,
                    f"--base {ref} ({short}) does not render with this obs-iac; its "
                    "blueprints or config have the errors below",
                    hint="fix the base branch first, or diff against generated/ (drop --base)",
                ),
                *details,
            ]
        ) from None
    return Side(f"{ref}", base_files, base_plan)


def _known_services(*sides: Side) -> set[str]:
    names: set[str] = set()
    for side in sides:
        if side.plan is not None:
            names.update(s.name for s in side.plan.services)
        for path in side.files:
            for pattern in SERVICE_PATTERNS:
                match = pattern.match(path)
                if match:
                    names.add(match["name"])
    return names


def diff_sides(before: Side, after: Side, after_plan: Plan) -> DiffResult:
    paths = set(before.files) | set(after.files)
    changed = {p for p in paths if before.files.get(p) != after.files.get(p)}
    # A twin and its primary are read together, so which one carries a payload is decided
    # the same way on both sides.
    for path in list(changed):
        changed.update(partners(path) & paths)
    known = _known_services(before, after)
    old = build_model(before.files, changed, known)
    new = build_model(after.files, changed, known)
    if before.plan is not None and after.plan is not None:
        kinds = {"log-stage"}
        if not any(p.startswith("alertmanager/") for p in paths):
            kinds.add("inhibit-edge")
        if not any(p.startswith("grafana/dashboards/") for p in paths):
            kinds.add("panel")
        old.update(plan_entities(before.plan, kinds))
        new.update(plan_entities(after.plan, kinds))
    changes = compare(old, new)
    full_after: SemanticModel = new
    if any(c.id.kind == "inhibit-edge" for c in changes):
        # Which alerts an edge can mute depends on every alert, not just the changed ones.
        # Alerts live in rule files and PrometheusRule CRDs only: parse just those.
        rules = [p for p in after.files if any(r.match(p) for r in RULE_PATTERNS)]
        full_after = {**build_model(after.files, rules, known), **new}
    locations = {s.name: Location(s.source.file, s.source.line) for s in after_plan.services}
    flags = risk_flags(changes, full_after, after_plan, locations)
    acks = [
        Acknowledgement(s.name, str(a["code"]), str(a["reason"]), a.get("target"))
        for s in after_plan.services
        for a in s.acknowledgements
    ]
    flags = apply_acknowledgements(flags, acks)
    flags.sort(
        key=lambda f: (
            f.service,
            -int(f.diagnostic.severity),
            f.diagnostic.code,
            f.diagnostic.message,
        )
    )
    return DiffResult(before.label, changes, flags)


def run_diff(
    root: Path,
    base: str | None = None,
    plugins_factory: PluginsFactory | None = None,
) -> DiffResult:
    from obs_iac.engine.cache import cache_root

    factory = plugins_factory or (lambda cfg: discover(cfg))
    ws = open_workspace(root)
    if base is not None:
        # Check the ref before spending a render on the working tree. The base shares
        # the working tree's cache: after a render there, most of the base is in it.
        with tempfile.TemporaryDirectory(prefix="obs-iac-diff-") as tmp:
            before = ref_side(root, base, factory, Path(tmp), cache_root(root), ws.config.output)
    current_plan, current_files = render_files(ws, factory(ws.config))
    after = Side("working tree", current_files, current_plan)
    if base is None:
        before = committed_side(ws.output, f"{ws.config.output}/")
    return diff_sides(before, after, current_plan)
