"""Shared helpers for the inhibit tests: tool lookup, the example render, a real Alertmanager."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from obs_iac.pipeline import Render, open_workspace, render

ROOT = Path(__file__).resolve().parent.parent

# Route and receiver only: enough for Alertmanager to load, nothing that changes inhibition.
MINIMAL = {
    "route": {"receiver": "null", "group_by": ["..."]},
    "receivers": [{"name": "null"}],
}


def require_tool(*names: str) -> str:
    """The first of ``names`` on PATH; fails under CI=true, skips elsewhere."""
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    message = f"{' / '.join(names)} is not installed (Debian: prometheus-alertmanager)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


@lru_cache(maxsize=1)
def example_render() -> Render:
    """The committed example blueprints, rendered in memory (nothing written)."""
    return render(open_workspace(ROOT))


def text_of(result: Render, path: str) -> str:
    return result.files[path].decode("utf-8")


def config_with_rules(inhibit_rules_text: str) -> dict[str, Any]:
    rules = yaml.safe_load(inhibit_rules_text)
    return {**MINIMAL, **rules}


def amtool_check(config: dict[str, Any] | str, tmp: Path) -> subprocess.CompletedProcess[str]:
    amtool = require_tool("amtool")
    path = tmp / "alertmanager.yml"
    path.write_text(config if isinstance(config, str) else yaml.safe_dump(config))
    return subprocess.run(
        [amtool, "check-config", str(path)], capture_output=True, text=True, timeout=30
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Alertmanager:
    def __init__(self, base: str):
        self.base = base

    def post(self, alerts: list[dict[str, Any]]) -> None:
        req = urllib.request.Request(
            f"{self.base}/api/v2/alerts",
            data=json.dumps(alerts).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(req, timeout=5) as resp:
            assert resp.status == 200, resp.read()

    def alerts(self) -> list[dict[str, Any]]:
        with urllib.request.urlopen(f"{self.base}/api/v2/alerts", timeout=5) as resp:
            data: list[dict[str, Any]] = json.loads(resp.read())
            return data


@contextmanager
def running_alertmanager(config: dict[str, Any]) -> Iterator[Alertmanager]:
    """A real Alertmanager on 127.0.0.1 with temp storage and no clustering; always stopped."""
    binary = require_tool("prometheus-alertmanager", "alertmanager")
    with tempfile.TemporaryDirectory(prefix="obs-iac-am-") as tmp:
        cfg = Path(tmp) / "alertmanager.yml"
        cfg.write_text(yaml.safe_dump(config))
        port = free_port()
        log = (Path(tmp) / "am.log").open("w")
        proc = subprocess.Popen(
            [
                binary,
                f"--config.file={cfg}",
                f"--storage.path={tmp}/data",
                f"--web.listen-address=127.0.0.1:{port}",
                "--cluster.listen-address=",
                "--log.level=warn",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 10
            while True:
                if proc.poll() is not None:
                    log.flush()
                    pytest.fail(f"alertmanager exited: {(Path(tmp) / 'am.log').read_text()}")
                try:
                    with urllib.request.urlopen(f"{base}/-/ready", timeout=1) as resp:
                        if resp.status == 200:
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    pytest.fail("alertmanager did not become ready within 10 s")
                time.sleep(0.1)
            yield Alertmanager(base)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
            log.close()
