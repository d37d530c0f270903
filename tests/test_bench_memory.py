"""bench/memory.py: the process-tree sampler sees what the workers of a pool allocate."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

# Loaded by path: bench/ is scripts, not a package, and stays off sys.path for other tests.
_spec = importlib.util.spec_from_file_location(
    "obs_iac_bench_memory", Path(__file__).resolve().parent.parent / "bench" / "memory.py"
)
assert _spec is not None and _spec.loader is not None
memory = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = memory
_spec.loader.exec_module(memory)
descendants, process_kib, run_measured = memory.descendants, memory.process_kib, memory.run_measured

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="Linux /proc only")

# Bytes multiplied out are written, so every page is really resident (a zeroed bytearray
# may stay untouched copy-on-write zero pages).
ALLOCATE = "import time; b = b'x' * (100 << 20); time.sleep(0.4)"
IDLE = "import time; time.sleep(0.4)"


def spawn_child(code: str) -> str:
    return textwrap.dedent(
        f"""
        import subprocess, sys
        subprocess.run([sys.executable, "-c", {code!r}], check=True)
        """
    )


def test_a_grandchild_allocating_100_mib_is_seen() -> None:
    measured = run_measured([sys.executable, "-c", spawn_child(ALLOCATE)])
    assert measured.returncode == 0, measured.stderr
    assert measured.peak_mib >= 100, measured
    assert measured.method in ("pss", "pss+rss", "rss")


def test_the_same_tree_idle_stays_well_below() -> None:
    measured = run_measured([sys.executable, "-c", spawn_child(IDLE)])
    assert measured.returncode == 0, measured.stderr
    assert measured.peak_mib < 80, measured
    assert measured.seconds >= 0.4


def test_descendants_and_pss_of_this_process() -> None:
    import os

    tree = descendants(os.getpid())
    assert tree[0] == os.getpid()
    measured = process_kib(os.getpid())
    assert measured is not None and measured[0] > 1000
