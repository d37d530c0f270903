"""Faults are errors, not bugs: a read-only or full output folder, `generated` being a
file, a permission denied, a damaged journal, names that look like obs-iac's staging
names. Each is a clear message with exit 2 (or a recovery), and the tree as it was."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from obs_iac import conventions
from obs_iac.render import writer
from tests.conftest import RunCli
from tests.hostile.conftest import snapshot

RULES = "prometheus/rules/recomm-v2.rules.yml"


def _edit(repo: Path) -> None:
    path = repo / "blueprints/recomm_v2.py"
    path.write_text(path.read_text().replace("within 15 minutes", "within 20 minutes"))


@contextlib.contextmanager
def _tmpfs(folder: Path, size: str) -> Iterator[Path]:
    """``folder``'s content moved onto a tmpfs of ``size`` mounted at ``folder``."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")  # the chmod tests below run as anyone
    saved = folder.with_name(folder.name + ".saved")
    folder.rename(saved)
    folder.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], check=True)
    try:
        shutil.copytree(saved, folder, dirs_exist_ok=True)
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)
        folder.rmdir()
        saved.rename(folder)


def _assert_fault(result: object, repo: Path, before: dict[str, bytes], words: str) -> None:
    assert result.exit_code == 2, result.output  # type: ignore[attr-defined]
    assert "this is a bug" not in result.output  # type: ignore[attr-defined]
    assert "Traceback" not in result.output  # type: ignore[attr-defined]
    assert words in result.stderr, result.stderr  # type: ignore[attr-defined]
    assert snapshot(repo) == before


def test_read_only_output_folder(repo: Path, run_cli: RunCli) -> None:
    _edit(repo)
    with _tmpfs(repo / "generated", "4m") as out:
        subprocess.run(["mount", "-o", "remount,ro", str(out)], check=True)
        before = snapshot(repo)
        result = run_cli(["render"], repo)
        _assert_fault(result, repo, before, "read-only")
        # Check mode writes nothing, so a read-only tree is fine for it.
        assert run_cli(["render", "--check"], repo).exit_code == 1


def test_full_disk(repo: Path, run_cli: RunCli) -> None:
    _edit(repo)
    with _tmpfs(repo / "generated", "2m") as out:
        fd = os.open(out / "filler.bin", os.O_WRONLY | os.O_CREAT)
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0" * 4096)
        os.close(fd)
        before = snapshot(repo)
        result = run_cli(["render"], repo)
        _assert_fault(result, repo, before, "No space left on device")
        # Room again: the same render now goes through.
        (out / "filler.bin").unlink()
        assert run_cli(["render"], repo).exit_code == 0


def test_output_folder_is_a_regular_file(gitops_file: Path, run_cli: RunCli) -> None:
    before = snapshot(gitops_file)
    for args in (["render"], ["render", "--check"]):
        result = run_cli(args, gitops_file)
        _assert_fault(result, gitops_file, before, "is not a directory")


@pytest.fixture
def gitops_file(repo: Path) -> Path:
    shutil.rmtree(repo / "generated")
    (repo / "generated").write_text("not a folder\n")
    return repo


def test_permission_denied(repo: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch) -> None:
    _edit(repo)
    rules_dir = repo / "generated/prometheus/rules"
    if os.geteuid() != 0:
        rules_dir.chmod(0o555)
    else:
        # root ignores modes: refuse the renames into that folder the way the kernel
        # would (root meets this with an immutable file, or on a root-squashed mount).
        real = os.replace

        def refusing(src: object, dst: object) -> None:
            if str(dst).startswith(str(rules_dir)):
                raise PermissionError(errno.EACCES, "Permission denied", str(dst))
            real(src, dst)  # type: ignore[arg-type]

        monkeypatch.setattr(writer.os, "replace", refusing)
    try:
        before = snapshot(repo)
        result = run_cli(["render"], repo)
        _assert_fault(result, repo, before, "Permission denied")
    finally:
        rules_dir.chmod(0o755)
    monkeypatch.undo()
    assert run_cli(["render"], repo).exit_code == 0


def test_a_fault_halfway_through_the_swap_is_rolled_back(
    repo: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rename that fails after others succeeded: the old files come back."""
    _edit(repo)
    calls = {"n": 0}
    real = os.replace

    out = str(repo / "generated")

    def failing(src: object, dst: object) -> None:
        if str(dst).startswith(out):
            calls["n"] += 1
            if calls["n"] == 5:
                raise OSError(errno.EIO, "Input/output error", str(dst))
        real(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(writer.os, "replace", failing)
    before = snapshot(repo)
    result = run_cli(["render"], repo)
    _assert_fault(result, repo, before, "Input/output error")
    assert calls["n"] > 5  # the rollback's own renames


class Crash(Exception):
    pass


def _interrupted_swap(repo: Path, monkeypatch: pytest.MonkeyPatch, run_cli: RunCli) -> Path:
    """The repository with a swap stopped after its second rename."""
    out = repo / "generated"
    _edit(repo)
    calls = {"n": 0}
    real = os.replace

    def failing(src: object, dst: object) -> None:
        calls["n"] += 1
        if calls["n"] > 2:
            raise Crash()
        real(src, dst)  # type: ignore[arg-type]

    with monkeypatch.context() as m:
        m.setattr(writer.os, "replace", failing)
        with pytest.raises(Crash):
            from obs_iac import pipeline

            writer.write(out, dict(pipeline.render(pipeline.open_workspace(repo)).files))
    assert (out / conventions.JOURNAL).exists()
    return out


@pytest.mark.parametrize("damage", ["truncated", "not-json-object"])
def test_damaged_journal_mid_swap_is_recovered(
    repo: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, damage: str
) -> None:
    expected = tmp_path / "expected"
    shutil.copytree(repo, expected)
    _edit(expected)
    assert run_cli(["render"], expected).exit_code == 0
    out = _interrupted_swap(repo, monkeypatch, run_cli)
    journal = out / conventions.JOURNAL
    text = journal.read_text()
    journal.write_text(
        {"truncated": text[: len(text) // 2], "empty": "", "not-json-object": "[1]"}[damage]
    )
    result = run_cli(["render"], repo)
    assert result.exit_code == 0, result.output
    assert snapshot(repo / "generated") == snapshot(expected / "generated")


def test_damaged_journal_after_the_swap_is_recovered(repo: Path, run_cli: RunCli) -> None:
    """Killed between the last rename and the journal's removal: nothing left to do."""
    journal = repo / "generated" / conventions.JOURNAL
    journal.write_text('{"remove": ["prometheus/ru')
    result = run_cli(["render"], repo)
    assert result.exit_code == 0, result.output
    assert not journal.exists()
    assert run_cli(["render", "--check"], repo).exit_code == 0


def test_journal_that_cannot_be_recovered_names_the_repair(repo: Path, run_cli: RunCli) -> None:
    out = repo / "generated"
    (out / conventions.JOURNAL).write_text("{")
    staging = out / conventions.STAGING
    staging.mkdir()
    (staging / conventions.MANIFEST).write_text("{ damaged")
    before = snapshot(repo)
    result = run_cli(["render"], repo)
    assert result.exit_code == 2, result.output
    assert f"generated/{conventions.JOURNAL}" in result.stderr
    assert "git checkout" in result.stderr or "git restore" in result.stderr
    assert snapshot(repo) == before


def test_render_check_reports_an_interrupted_swap(
    repo: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    _interrupted_swap(repo, monkeypatch, run_cli)
    result = run_cli(["render", "--check"], repo)
    assert result.exit_code == 1, result.output
    assert "interrupted" in result.stderr


def test_user_names_ending_in_the_old_staging_suffix_are_left_alone(
    repo: Path, run_cli: RunCli
) -> None:
    out = repo / "generated"
    (out / "drafts.obs-iac-tmp").mkdir()
    (out / "drafts.obs-iac-tmp/keep.txt").write_text("mine\n")
    (out / "notes.obs-iac-tmp").write_text("mine too\n")
    _edit(repo)
    result = run_cli(["render"], repo)
    assert result.exit_code == 0, result.output
    assert (out / "drafts.obs-iac-tmp/keep.txt").read_text() == "mine\n"
    assert (out / "notes.obs-iac-tmp").read_text() == "mine too\n"
    assert "within 20 minutes" in (out / RULES).read_text()
