"""A cache that is only a cache: nothing read from .obs-iac-cache/ is used unless it
carries this user's signature, a damaged entry is a miss, and `render --check` never
reads the cache at all."""

from __future__ import annotations

import marshal
import os
import pickle
import shutil
from pathlib import Path

import pytest

from obs_iac.engine.cache import SECRET_ENV, Cache, load_secret
from tests.conftest import RunCli
from tests.hostile.conftest import snapshot

RULES = "generated/prometheus/rules/recomm-v2.rules.yml"


class _Boom:
    """A pickle that, when loaded, creates a file: what an attacker's entry would do."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (str(self.marker), "w"))


def _entries(repo: Path, kind: str) -> list[Path]:
    return sorted(p for p in (repo / ".obs-iac-cache" / kind).glob("*/*") if p.is_file())


def _warm(repo: Path, run_cli: RunCli) -> None:
    result = run_cli(["render"], repo)
    assert result.exit_code == 0, result.output
    assert _entries(repo, "shard") and _entries(repo, "code")


def test_a_poisoned_pickle_is_never_loaded(repo: Path, tmp_path: Path, run_cli: RunCli) -> None:
    _warm(repo, run_cli)
    marker = tmp_path / "pwned"
    for kind in ("shard", "expand", "metrics", "fleet", "fleet-artifacts", "lint", "output"):
        for entry in _entries(repo, kind):
            entry.write_bytes(pickle.dumps(_Boom(marker)))
    before = snapshot(repo)
    result = run_cli(["render"], repo)
    assert result.exit_code == 0, result.output
    assert not marker.exists(), "the render ran code found in the cache"
    assert snapshot(repo) == before


def test_replaced_bytecode_is_never_run(repo: Path, tmp_path: Path, run_cli: RunCli) -> None:
    _warm(repo, run_cli)
    marker = tmp_path / "pwned"
    evil = compile(f"open({str(marker)!r}, 'w')", "<evil>", "exec")
    for entry in _entries(repo, "code"):
        entry.write_bytes(marshal.dumps(evil))
    result = run_cli(["render"], repo)
    assert not marker.exists(), "the render ran bytecode found in the cache"
    assert result.exit_code == 0, result.output


def _flip_in_entries(repo: Path, kind: str, old: bytes, new: bytes) -> int:
    flipped = 0
    for entry in _entries(repo, kind):
        data = entry.read_bytes()
        if old in data:
            entry.write_bytes(data.replace(old, new))
            flipped += 1
    return flipped


def test_a_flipped_bit_in_a_shard_entry_is_a_miss(repo: Path, run_cli: RunCli) -> None:
    _warm(repo, run_cli)
    rules = (repo / RULES).read_bytes()
    assert b"15 minutes" in rules
    # '1' is 0x31 and '9' is 0x39: one bit.
    assert _flip_in_entries(repo, "shard", b"15 minutes", b"95 minutes") > 0
    result = run_cli(["render"], repo)
    assert result.exit_code == 0, result.output
    assert (repo / RULES).read_bytes() == rules
    assert b"95 minutes" not in b"".join(snapshot(repo).values())


def test_a_flipped_bit_in_a_bytecode_entry_is_a_miss(repo: Path, run_cli: RunCli) -> None:
    _warm(repo, run_cli)
    rules = (repo / RULES).read_bytes()
    assert _flip_in_entries(repo, "code", b"15 minutes", b"95 minutes") > 0
    # The shard entries would hide what the bytecode says: drop them.
    for kind in ("shard", "expand", "metrics", "fleet", "lint"):
        for entry in _entries(repo, kind):
            entry.unlink()
    result = run_cli(["render"], repo)
    assert result.exit_code == 0, result.output
    assert (repo / RULES).read_bytes() == rules


def test_render_check_never_trusts_the_cache(repo: Path, run_cli: RunCli) -> None:
    _warm(repo, run_cli)
    # A cache that says the tree is right when it is not: edit the output and forge the
    # entries into agreeing with the edit (signature or not, check must not read them).
    target = repo / RULES
    target.write_bytes(target.read_bytes().replace(b"15 minutes", b"95 minutes"))
    _flip_in_entries(repo, "shard", b"15 minutes", b"95 minutes")
    result = run_cli(["render", "--check"], repo)
    assert result.exit_code == 1, result.output
    assert "prometheus/rules/recomm-v2.rules.yml" in result.stderr


def test_render_check_passes_on_a_clean_tree(repo: Path, run_cli: RunCli) -> None:
    _warm(repo, run_cli)
    result = run_cli(["render", "--check"], repo)
    assert result.exit_code == 0, result.output


def test_a_cache_signed_by_someone_else_is_a_miss(
    repo: Path, tmp_path: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CI cache restored from another branch's pipeline (another secret) is ignored,
    though its entries are well-formed and signed: with that branch's secret, the same
    forged entries would be used."""
    monkeypatch.setenv(SECRET_ENV, "branch-a-secret-that-main-does-not-have")
    _warm(repo, run_cli)
    branch_a = Cache(repo / ".obs-iac-cache", secret=b"branch-a-secret-that-main-does-not-have")
    forged = 0
    for entry in _entries(repo, "shard"):
        data = branch_a.read("shard", entry.name)
        assert data is not None
        if b"15 minutes" in data:
            branch_a.put("shard", entry.name, data.replace(b"15 minutes", b"95 minutes"))
            forged += 1
    assert forged
    saved = tmp_path / "restored-cache"
    shutil.copytree(repo / ".obs-iac-cache", saved)
    monkeypatch.setenv(SECRET_ENV, "main-secret-kept-by-the-protected-branch")
    result = run_cli(["render"], repo)
    assert result.exit_code == 0, result.output
    assert b"95 minutes" not in (repo / RULES).read_bytes()
    # The same entries under the secret that signed them do change the output: the
    # signature, not luck, is what kept them out above.
    shutil.rmtree(repo / ".obs-iac-cache")
    shutil.copytree(saved, repo / ".obs-iac-cache")
    monkeypatch.setenv(SECRET_ENV, "branch-a-secret-that-main-does-not-have")
    assert run_cli(["render"], repo).exit_code == 0
    assert b"95 minutes" in (repo / RULES).read_bytes()


def test_no_secret_means_no_cache(repo: Path, tmp_path: Path, run_cli: RunCli) -> None:
    """A secret file others can read is no secret: nothing is cached with it."""
    secret = Path(os.environ["XDG_CONFIG_HOME"]) / "obs-iac" / "cache-secret"
    secret.parent.mkdir(parents=True)
    secret.write_text("x" * 64)
    secret.chmod(0o644)
    assert load_secret() is None
    assert run_cli(["render"], repo).exit_code == 0
    assert not _entries(repo, "shard")
    secret.chmod(0o600)
    assert load_secret() == b"x" * 64
