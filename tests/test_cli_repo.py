"""The command line as a new user meets it: finding the repository, "where am I"
messages, --root anywhere, --version, closed pipes, and previews without Chromium."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import pytest

from obs_iac.cli import hoist_global_options
from tests.conftest import PYPROJECT, CliResult, RunCli, blueprint_source, tree_bytes
from tests.tools import require_tool

REPO = Path(__file__).resolve().parents[1]
OBS_IAC = Path(sys.executable).with_name("obs-iac")
Sub = Callable[..., CliResult]


def _no_traceback(result: CliResult) -> None:
    assert "Traceback" not in result.output
    assert "internal error" not in result.output


def test_found_from_a_subdirectory_like_git(run_subprocess: Sub, gitops: Path) -> None:
    (gitops / "blueprints/nested").mkdir()
    result = run_subprocess(["render"], gitops / "blueprints/nested")
    assert result.exit_code == 0, result.output
    assert (gitops / "generated/prometheus/rules/recomm-v2.rules.yml").is_file()
    assert not (gitops / "blueprints/nested/generated").exists()


def test_outside_a_repository(run_subprocess: Sub, tmp_path: Path) -> None:
    result = run_subprocess(["render"], tmp_path)
    assert result.exit_code == 2
    assert "error[repo/not-found]: not in an obs-iac repository" in result.stderr
    assert str(tmp_path) in result.stderr
    assert "pass --root DIR, or create one with `obs-iac init DIR`" in result.stderr
    _no_traceback(result)
    assert list(tmp_path.iterdir()) == []


def test_a_pyproject_without_the_table_is_not_a_repository(
    run_subprocess: Sub, gitops: Path, tmp_path: Path
) -> None:
    # An unrelated Python project inside the repository does not stop the walk...
    inner = gitops / "tools/helper"
    inner.mkdir(parents=True)
    (inner / "pyproject.toml").write_text('[project]\nname = "helper"\n')
    assert run_subprocess(["plan"], inner).exit_code == 0
    # ...and alone it is no repository.
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "pyproject.toml").write_text('[project]\nname = "helper"\n')
    assert "repo/not-found" in run_subprocess(["plan"], alone).output


def test_a_folder_of_blueprints_is_its_own_repository(run_subprocess: Sub, gitops: Path) -> None:
    # e.g. a test case or an example inside a bigger repository: the nearest is meant.
    case = gitops / "cases/one"
    (case / "blueprints").mkdir(parents=True)
    (case / "blueprints/svc.py").write_text(blueprint_source())
    result = run_subprocess(["render"], case)
    assert result.exit_code == 0, result.output
    assert "rendered 1 services" in result.stderr
    assert (case / "generated").is_dir()
    assert not (gitops / "generated").exists()


def test_obs_iac_toml_marks_a_repository(run_subprocess: Sub, tmp_path: Path) -> None:
    (tmp_path / "obs-iac.toml").write_text('blueprints = "bp"\n')
    (tmp_path / "bp").mkdir()
    (tmp_path / "bp/svc.py").write_text(blueprint_source())
    (tmp_path / "deep/er").mkdir(parents=True)
    result = run_subprocess(["render"], tmp_path / "deep/er")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "generated").is_dir()


@pytest.mark.parametrize(
    "args",
    [
        ["plan", "--root", "{repo}"],
        ["plan", "--root={repo}"],
        ["--root", "{repo}", "plan"],
        ["plan", "--format", "json", "--root", "{repo}", "--debug"],
    ],
)
def test_root_anywhere_on_the_command_line(
    run_subprocess: Sub, gitops: Path, tmp_path: Path, args: list[str]
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = run_subprocess([a.format(repo=gitops) for a in args], elsewhere)
    assert result.exit_code == 0, result.output
    assert '"sla_id": "recomm_v2"' in result.stdout


def test_root_after_the_subcommand_still_names_a_wrong_folder(
    run_subprocess: Sub, tmp_path: Path
) -> None:
    result = run_subprocess(["render", "--root", str(tmp_path)], tmp_path)
    assert result.exit_code == 2
    assert f"error[blueprint/no-folder]: there is no blueprints/ folder in {tmp_path}" in (
        result.stderr
    )
    assert "is --root right?" in result.stderr


def test_hoisting_leaves_other_arguments_and_everything_after_dashdash() -> None:
    assert hoist_global_options(["lint", "a.yml", "--root", "r", "b.yml"]) == [
        "--root",
        "r",
        "lint",
        "a.yml",
        "b.yml",
    ]
    assert hoist_global_options(["lint", "--", "--root", "r"]) == ["lint", "--", "--root", "r"]


def _repo(tmp_path: Path, extra: str = "") -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "pyproject.toml").write_text(PYPROJECT.format(extra=extra))
    return root


def _fails_cleanly(run_cli: RunCli, root: Path, code: str) -> CliResult:
    result = run_cli(["render"], root)
    assert result.exit_code == 2, result.output
    assert f"error[{code}]" in result.stderr
    assert "help: " in result.stderr
    _no_traceback(result)
    assert not (root / "generated").exists()
    return result


def test_no_blueprints_folder(run_cli: RunCli, tmp_path: Path) -> None:
    result = _fails_cleanly(run_cli, _repo(tmp_path), "blueprint/no-folder")
    assert "there is no blueprints/ folder in" in result.stderr
    assert "`obs-iac init DIR`" in result.stderr
    assert "is --root right?" not in result.stderr  # the settings were found


def test_a_setting_that_points_at_a_missing_folder(run_cli: RunCli, tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "pyproject.toml").write_text('[tool.obs-iac]\nblueprints = "services"\n')
    (root / "blueprints").mkdir()  # the default folder does not count
    result = _fails_cleanly(run_cli, root, "config/missing-folder")
    assert (
        "pyproject.toml: error[config/missing-folder]: [tool.obs-iac] blueprints = 'services': "
        "there is no folder services/ in"
    ) in result.stderr
    assert "fix the `blueprints` setting in pyproject.toml" in result.stderr


def test_an_empty_blueprints_folder(run_cli: RunCli, tmp_path: Path) -> None:
    root = _repo(tmp_path)
    (root / "blueprints").mkdir()
    (root / "blueprints/_shared.py").write_text("THRESHOLD = 5\n")  # skipped: a helper
    result = _fails_cleanly(run_cli, root, "blueprint/empty")
    assert "blueprints/ has no blueprint files" in result.stderr
    assert "start with '_' or '.' are skipped" in result.stderr


def test_files_that_never_call_service(run_cli: RunCli, tmp_path: Path) -> None:
    root = _repo(tmp_path)
    (root / "blueprints").mkdir()
    (root / "blueprints/svc.py").write_text("from obs_iac import service\nNAME = 'x'\n")
    result = _fails_cleanly(run_cli, root, "blueprint/none")
    assert (
        "blueprints/svc.py: error[blueprint/none]: no service is declared under blueprints/: "
        "blueprints/svc.py ran but never called service()"
    ) in result.stderr
    # A service in any file is enough: the helper-like file is not an error then.
    (root / "blueprints/real.py").write_text(blueprint_source())
    assert run_cli(["render"], root).exit_code == 0


def test_version(run_subprocess: Sub, tmp_path: Path) -> None:
    result = run_subprocess(["--version"], tmp_path)
    assert result.exit_code == 0
    assert result.stdout == f"obs-iac {metadata.version('obs-iac')}\n"
    assert "--version" in run_subprocess(["--help"], tmp_path).stdout


@pytest.mark.parametrize("args", [["fields"], ["plugins"], ["fields", "NVLINK"]])
def test_a_closed_pipe_ends_quietly_by_sigpipe(gitops: Path, args: list[str]) -> None:
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line, as after `| head` exits
    try:
        proc = subprocess.run(
            [str(OBS_IAC), *args], cwd=gitops, stdout=write, stderr=subprocess.PIPE, check=False
        )
    finally:
        os.close(write)
    assert proc.returncode == -signal.SIGPIPE, proc.stderr
    assert proc.stderr == b""


def test_head_in_a_shell_sees_141_and_no_error(gitops: Path) -> None:
    bash = require_tool("bash")
    script = f'"{OBS_IAC}" fields | head -n 1; echo "status=${{PIPESTATUS[0]}}"'
    proc = subprocess.run(
        [bash, "-c", script], cwd=gitops, capture_output=True, text=True, check=False
    )
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("DCGM_FI_")
    assert lines[-1] == "status=141"  # 128 + SIGPIPE, as for `seq 1e6 | head -n 1`
    assert proc.stderr == ""
    # An open pipe to the end is an ordinary exit 0.
    whole = subprocess.run(
        [bash, "-c", f'"{OBS_IAC}" fields | wc -l; echo "status=${{PIPESTATUS[0]}}"'],
        cwd=gitops,
        capture_output=True,
        text=True,
        check=False,
    )
    assert whole.stdout.split()[-1] == "status=0"
    assert int(whole.stdout.split()[0]) > 1000


def _previous_previews(out: Path) -> dict[str, bytes]:
    out.mkdir()
    for name in ("obs-iac-recomm-v2.svg", "obs-iac-recomm-v2.png", "notes.txt"):
        (out / name).write_bytes(b"previous " + name.encode())
    return tree_bytes(out)


def test_preview_png_without_chromium_is_exit_2_and_changes_nothing(
    run_subprocess: Sub, tmp_path: Path
) -> None:
    out = tmp_path / "previews"
    before = _previous_previews(out)
    empty = tmp_path / "bin"
    empty.mkdir()
    result = run_subprocess(
        ["--root", str(REPO), "preview", "--out", str(out), "--png"],
        tmp_path,
        env={"PATH": str(empty)},
    )
    assert result.exit_code == 2, result.output
    assert "error[preview/no-chromium]" in result.stderr
    assert "apt-get install chromium" in result.stderr
    _no_traceback(result)
    assert tree_bytes(out) == before


def test_a_failing_chromium_leaves_the_previous_previews(
    run_subprocess: Sub, tmp_path: Path
) -> None:
    out = tmp_path / "previews"
    before = _previous_previews(out)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "chromium"
    fake.write_text("#!/bin/sh\necho 'no display' >&2\nexit 1\n")
    fake.chmod(0o755)
    result = run_subprocess(
        ["--root", str(REPO), "preview", "--out", str(out), "--png"],
        tmp_path,
        env={"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"},
    )
    assert result.exit_code == 2, result.output
    assert "error[preview/chromium-failed]" in result.stderr
    assert "no display" in result.stderr
    _no_traceback(result)
    assert tree_bytes(out) == before  # no new SVG either, and no staging folder left


def test_preview_replaces_the_svgs_and_keeps_other_files(
    run_subprocess: Sub, tmp_path: Path
) -> None:
    out = tmp_path / "previews"
    _previous_previews(out)
    result = run_subprocess(["--root", str(REPO), "preview", "--out", str(out)], tmp_path)
    assert result.exit_code == 0, result.output
    assert "wrote 3 dashboard previews (SVG)" in result.stderr
    svg = (out / "obs-iac-recomm-v2.svg").read_text()
    assert svg.startswith("<svg") and "data-panel-id" in svg
    assert (out / "notes.txt").read_bytes() == b"previous notes.txt"
    assert sorted(p.name for p in out.iterdir()) == [
        "notes.txt",
        "obs-iac-fleet-overview.svg",
        "obs-iac-image-classify-v3.svg",
        "obs-iac-recomm-v2.png",
        "obs-iac-recomm-v2.svg",
    ]


def test_make_preview_without_chromium_draws_svgs_and_says_so(tmp_path: Path) -> None:
    make = require_tool("make")
    empty = tmp_path / "bin"
    empty.mkdir()
    out = tmp_path / "previews"
    venv = Path(sys.executable).parent.parent
    proc = subprocess.run(
        [make, "-s", "preview", f"PREVIEWS={out}", f"VENV={venv}"],
        cwd=REPO,
        env={**os.environ, "PATH": str(empty)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Chromium not found, SVG only (apt-get install chromium" in proc.stdout
    assert sorted(p.suffix for p in out.iterdir()) == [".svg", ".svg", ".svg"]


def test_commands_that_need_no_repository_work_outside_one(
    run_subprocess: Sub, tmp_path: Path
) -> None:
    assert run_subprocess(["fields", "GPU_UTIL"], tmp_path).exit_code == 0
    listed = run_subprocess(["plugins"], tmp_path)
    assert listed.exit_code == 0 and "prometheus-rules" in listed.stdout
    assert run_subprocess(["schema"], tmp_path).exit_code == 0
    rules = tmp_path / "rules.yml"
    rules.write_text("groups:\n  - name: g\n    rules:\n      - record: a:b:c\n        expr: up\n")
    assert run_subprocess(["lint", str(rules)], tmp_path).exit_code == 0
    # ...while lint of the repository's own output needs one.
    whole = run_subprocess(["lint"], tmp_path)
    assert whole.exit_code == 2
    assert "error[repo/not-found]" in whole.stderr
