"""One path rule: whatever names a path inside generated/ (the committed manifest, the
journal, a generator) must stay inside it, through no symbolic link. Anything else is a
located error naming the file that holds the bad path, exit 2, and nothing is touched."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from obs_iac import conventions
from tests.conftest import RunCli
from tests.hostile.conftest import snapshot

RULES = "prometheus/rules/recomm-v2.rules.yml"


def _add_to_manifest(repo: Path, entry: str) -> None:
    manifest = repo / "generated" / conventions.MANIFEST
    data = json.loads(manifest.read_text())
    data["files"][entry] = "0" * 64
    manifest.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def _assert_refused(result: object, repo: Path, before: dict[str, bytes], holder: str) -> None:
    assert result.exit_code == 2, result.output  # type: ignore[attr-defined]
    assert f"{holder}:" in result.stderr  # type: ignore[attr-defined]
    assert "output/unsafe-path" in result.stderr  # type: ignore[attr-defined]
    assert "Traceback" not in result.output  # type: ignore[attr-defined]
    assert snapshot(repo) == before


@pytest.mark.parametrize("kind", ["parent", "absolute", "blueprint"])
def test_manifest_entry_outside_generated_is_refused(
    repo: Path, tmp_path: Path, run_cli: RunCli, kind: str
) -> None:
    victim = {
        "parent": tmp_path / "elsewhere" / "file",
        "absolute": tmp_path / "absolute-victim",
        "blueprint": repo / "blueprints" / "recomm_v2.py",
    }[kind]
    victim.parent.mkdir(parents=True, exist_ok=True)
    if not victim.exists():
        victim.write_text("precious\n")
    content = victim.read_bytes()
    entry = {
        "parent": "../../elsewhere/file",
        "absolute": str(victim),
        "blueprint": "../blueprints/recomm_v2.py",
    }[kind]
    _add_to_manifest(repo, entry)
    before = snapshot(repo)
    for args in (["render"], ["render", "--check"]):
        result = run_cli(args, repo)
        _assert_refused(result, repo, before, f"generated/{conventions.MANIFEST}")
        assert entry in result.stderr
        assert victim.read_bytes() == content


def test_a_clean_manifest_is_accepted(repo: Path, run_cli: RunCli) -> None:
    result = run_cli(["render"], repo)
    assert result.exit_code == 0, result.output


def test_journal_entry_outside_generated_is_refused(repo: Path, run_cli: RunCli) -> None:
    pyproject = repo / "pyproject.toml"
    content = pyproject.read_bytes()
    journal = repo / "generated" / conventions.JOURNAL
    journal.write_text(json.dumps({"remove": ["../pyproject.toml"], "replace": []}))
    before = snapshot(repo)
    result = run_cli(["render"], repo)
    _assert_refused(result, repo, before, f"generated/{conventions.JOURNAL}")
    assert "../pyproject.toml" in result.stderr
    assert pyproject.read_bytes() == content


def test_journal_replace_entry_outside_generated_is_refused(repo: Path, run_cli: RunCli) -> None:
    journal = repo / "generated" / conventions.JOURNAL
    journal.write_text(json.dumps({"remove": [], "replace": ["/etc/hostname"]}))
    before = snapshot(repo)
    result = run_cli(["render"], repo)
    _assert_refused(result, repo, before, f"generated/{conventions.JOURNAL}")


def test_directory_symlink_inside_generated_is_not_written_through(
    repo: Path, tmp_path: Path, run_cli: RunCli
) -> None:
    outside = tmp_path / "outside"
    rules = repo / "generated" / "prometheus" / "rules"
    rules.rename(outside)
    rules.symlink_to(outside, target_is_directory=True)
    (repo / "blueprints/recomm_v2.py").write_text(
        (repo / "blueprints/recomm_v2.py")
        .read_text()
        .replace("within 15 minutes", "within 20 minutes")
    )
    outside_before = {p.name: p.read_bytes() for p in outside.iterdir()}
    before = snapshot(repo)
    result = run_cli(["render"], repo)
    assert result.exit_code == 2, result.output
    assert "generated/prometheus/rules" in result.stderr
    assert "symbolic link" in result.stderr
    assert {p.name: p.read_bytes() for p in outside.iterdir()} == outside_before
    assert snapshot(repo) == before


def test_file_symlink_inside_generated_is_refused(
    repo: Path, tmp_path: Path, run_cli: RunCli
) -> None:
    outside = tmp_path / "outside.yml"
    target = repo / "generated" / RULES
    outside.write_bytes(target.read_bytes())
    target.unlink()
    target.symlink_to(outside)
    result = run_cli(["render"], repo)
    assert result.exit_code == 2, result.output
    assert f"generated/{RULES}" in result.stderr
    assert target.is_symlink()


def test_a_symlink_to_the_output_folder_itself_is_allowed(
    repo: Path, tmp_path: Path, run_cli: RunCli
) -> None:
    """generated/ itself may live elsewhere (a checkout of a config repository): only
    links inside it are refused."""
    real = tmp_path / "real-generated"
    (repo / "generated").rename(real)
    (repo / "generated").symlink_to(real, target_is_directory=True)
    result = run_cli(["render"], repo)
    assert result.exit_code == 0, result.output


def test_a_cache_folder_linked_elsewhere_is_not_used(
    repo: Path, tmp_path: Path, run_cli: RunCli
) -> None:
    """A committed `.obs-iac-cache -> ~` would aim the cache's writes, and the pruning of
    old entries, at the user's files."""
    victim = tmp_path / "home"
    old_file = victim / "shard" / "ab" / ("ab" + "0" * 62)
    old_file.parent.mkdir(parents=True)
    old_file.write_text("a user's file that happens to look like an entry\n")
    os.utime(old_file, (0, 0))
    (repo / ".obs-iac-cache").symlink_to(victim, target_is_directory=True)
    result = run_cli(["render"], repo)
    assert result.exit_code == 0, result.output
    assert old_file.exists()
    assert sorted(p.relative_to(victim).as_posix() for p in victim.rglob("*")) == [
        "shard",
        "shard/ab",
        f"shard/ab/{old_file.name}",
    ]
