"""bench/run.py's own checks: the gates that fail a bench and the verdicts it reports."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _load(name: str) -> ModuleType:
    # bench/ is scripts, not a package; run.py puts bench/ on sys.path for its siblings,
    # which is undone here so other tests never import a stray "fleet" or "memory".
    saved = list(sys.path)
    try:
        spec = importlib.util.spec_from_file_location(f"obs_iac_bench_{name}", BENCH / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path[:] = saved


run = _load("run")
fleet = _load("fleet")


def test_tree_differences_finds_changed_missing_and_extra_files(tmp_path: Path) -> None:
    left, right = tmp_path / "left", tmp_path / "right"
    for top in (left, right):
        (top / "a").mkdir(parents=True)
        (top / "a" / "same.yml").write_bytes(b"x: 1\n")
        (top / "changed.json").write_bytes(b"{}\n")
    assert run.tree_differences(left, right) == []
    (right / "changed.json").write_bytes(b"{} \n")
    (left / "a" / "only-left.yml").write_bytes(b"")
    (right / "only-right.csv").write_bytes(b"")
    assert run.tree_differences(left, right) == [
        "only in left: a/only-left.yml",
        "only in right: only-right.csv",
        "differs: changed.json",
    ]
    with pytest.raises(run.BenchError, match="3 files"):
        run.assert_identical(left, right, "incremental render")


def test_bar_drawn_tells_a_bar_from_terminal_line_endings() -> None:
    assert run.bar_drawn(b"\rrendering  10/30 services [###...]  33%   2.1 s")
    assert not run.bar_drawn(b"rendered 30 services into generated/\r\n")
    assert not run.bar_drawn("rendered 30 services into generated/\n")


def test_every_threshold_edit_is_new_valid_and_not_the_default(tmp_path: Path) -> None:
    limits = list(run.fresh_limits())
    assert len(limits) == len(set(limits)) >= 25  # five repetitions x (incremental + 4 diffs)
    assert 85 not in limits and all(40 <= v <= 120 for v in limits)
    path = tmp_path / "svc.py"
    original = fleet.blueprint(0, random.Random(1))
    run.set_limit(path, original, limits[0])
    edited = path.read_text()
    assert f"temperature_limit_celsius={limits[0]}," in edited
    compile(edited, str(path), "exec")
    with pytest.raises(run.BenchError):
        run.set_limit(path, "service(name='x')\n", 90)


def test_engine_options_only_when_the_cli_has_them() -> None:
    old, new = run.Engine(jobs=False, no_cache=False), run.Engine(jobs=True, no_cache=True)
    assert old.render(jobs=1, no_cache=True) == [run.CLI, "render"]
    assert new.render(jobs=1, no_cache=True) == [run.CLI, "render", "--jobs", "1", "--no-cache"]
    assert new.render() == [run.CLI, "render"]


def _report(**overrides: Any) -> dict[str, Any]:
    render = [
        {"services": n, "ms_per_service": ms, "render_over_floor": 2.5, "peak_mib": 900.0}
        for n, ms in ((10, 90.0), (100, 40.0), (1000, 44.0), (5000, 49.0))
    ]
    for r in render:
        r["bar_on_pipe"] = False
    report: dict[str, Any] = {
        "machine": {"cores": 8},
        "render": render,
        "startup": {"help_seconds": 0.05, "check_examples_seconds": 0.6},
        "lint": {"ratio": 0.8, "services": 1000},
        "incremental": {"ratio": 0.04, "identical_to_uncached": True},
        "jobs_1": {"speedup": 3.1, "identical_output": True},
        "diff": {
            k: {"ratio": 0.9}
            for k in ("generated_warm", "generated_cold", "HEAD_warm", "HEAD_cold")
        },
        "progress": {"seconds": 12.0, "bar_on_terminal": True},
    }
    report.update(overrides)
    return report


def test_targets_all_met_and_each_verdict_can_fail() -> None:
    assert all(t["met"] for t in run.targets(_report(), 1000))
    verdicts = {t["target"]: t["met"] for t in run.targets(_report(), 1000)}
    assert len(verdicts) == 13

    slow = _report()
    slow["render"][3]["ms_per_service"] = 51.0  # +27.5 % against 100
    failed = {t["target"] for t in run.targets(slow, 1000) if t["met"] is False}
    assert failed == {"2. time per service, 100 upwards"}

    piped = _report()
    piped["render"][0]["bar_on_pipe"] = True
    failed = {t["target"] for t in run.targets(piped, 1000) if t["met"] is False}
    assert failed == {"8. progress bar on a terminal only"}


def test_targets_not_judged_off_the_target_size_or_without_the_feature() -> None:
    small = _report(jobs_1=None, progress={"seconds": 1.0, "bar_on_terminal": False})
    small["render"] = small["render"][:2]
    verdicts = {t["target"]: t["met"] for t in run.targets(small, 100)}
    assert verdicts["1. render / floor, 1000 services"] is None
    assert verdicts["5. cores: default jobs vs --jobs 1"] is None
    assert verdicts["8. progress bar on a terminal only"] is None, "a 1 s render shows no bar"
    assert verdicts["6. obs-iac --help"] is True
