"""obs_iac.relabel against a real Prometheus: what the simulation says is stored is what
Prometheus stores after scraping a catalogue exposition through the generated
metric_relabel_configs."""

from __future__ import annotations

import http.server
import json
import subprocess
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from obs_iac.catalog.exporter_shapes import GpuDevice, PodAttribution, render_exposition, shape
from obs_iac.plan.model import RelabelRule
from obs_iac.relabel import apply, merge_target_labels
from tests.inhibit_support import free_port
from tests.test_gpu_reality import RELABEL, generated_relabelling
from tests.tools import require_tool


def test_replace_follows_go_expand_and_anchoring() -> None:
    rule = RelabelRule(source_labels=("device",), regex="nvidia([0-9]+)", target_label="g")
    assert apply({"device": "nvidia3"}, (rule,)) == {"device": "nvidia3", "g": "3"}
    # Anchored: "xnvidia3" does not match, so nothing is written.
    assert apply({"device": "xnvidia3"}, (rule,)) == {"device": "xnvidia3"}
    # "$1x" is the group named "1x" in Go, which does not exist: empty, so no label.
    odd = RelabelRule(source_labels=("device",), regex="(.+)", target_label="g", replacement="$1x")
    assert "g" not in (apply({"device": "a"}, (odd,)) or {})
    braces = RelabelRule(
        source_labels=("device",), regex="(.+)", target_label="g", replacement="${1}x"
    )
    assert (apply({"device": "a"}, (braces,)) or {})["g"] == "ax"


def test_utf8_target_labels_are_written() -> None:
    # naming = "utf8" (Prometheus 3): target_label "resource.gpu.id" is a valid name.
    rule = RelabelRule(source_labels=("device",), regex="(nvidia[0-9]+)", target_label="a.b")
    assert (apply({"device": "nvidia0"}, (rule,)) or {})["a.b"] == "nvidia0"


def test_keep_drop_and_target_merge() -> None:
    keep = RelabelRule(source_labels=("job",), regex="dcgm", action="keep")
    assert apply({"job": "other"}, (keep,)) is None
    merged = merge_target_labels(
        {"pod": "w", "x": ""}, {"pod": "e", "job": "j"}, honor_labels=False
    )
    assert merged == {"pod": "e", "exported_pod": "w", "job": "j"}
    honored = merge_target_labels({"pod": "w"}, {"pod": "e"}, honor_labels=True)
    assert honored == {"pod": "w"}
    with pytest.raises(NotImplementedError):
        apply({}, (RelabelRule(action="hashmod"),))


@contextmanager
def _serve(body: str) -> Iterator[int]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def _series(base: str) -> list[dict[str, str]]:
    query = urllib.parse.urlencode({"match[]": '{__name__=~"DCGM_.+"}'})
    with urllib.request.urlopen(f"{base}/api/v1/series?{query}", timeout=2) as resp:
        data: list[dict[str, str]] = json.loads(resp.read())["data"]
        return data


@pytest.mark.parametrize("tag", ["4.5.3-4.8.2", "4.5.3-4.9.0"])
def test_simulation_matches_a_real_prometheus_scrape(tag: str) -> None:
    prometheus = require_tool("prometheus")
    exporter = shape(tag)
    device = GpuDevice(
        gpu=1,
        uuid="GPU-11111111-2222-3333-4444-555555555555",
        model_name="NVIDIA H100 80GB HBM3",
        hostname="dgx-01",
        pci_bus_id="00000000:1B:00.0",
        driver_version="550.54.15",
    )
    pod = PodAttribution("recsys", "trainer-0", "trainer", {"business_sla_id": "recomm_v2"})
    fields = [
        ("DCGM_FI_DEV_GPU_TEMP", None, 71.0),
        ("DCGM_FI_DEV_XID_ERRORS", {"err_code": "79"}, 79.0),
        ("DCGM_EXP_XID_ERRORS_COUNT", {"xid": "79"}, 2.0),
    ]
    samples = [
        (f, exporter.series(f, device, kubernetes=pod, value_labels=vl), v) for f, vl, v in fields
    ]
    target = {"namespace": "gpu-operator", "pod": "exporter-x", "container": "exporter"}
    rules = generated_relabelling()
    with _serve(render_exposition(exporter, samples)) as port, tempfile.TemporaryDirectory() as tmp:
        instance = f"127.0.0.1:{port}"
        config = {
            "global": {"scrape_interval": "1s"},
            "scrape_configs": [
                {
                    "job_name": "dcgm-exporter",
                    "honor_labels": False,
                    "static_configs": [{"targets": [instance], "labels": target}],
                    "metric_relabel_configs": yaml.safe_load(RELABEL.read_text())[
                        "metric_relabel_configs"
                    ],
                }
            ],
        }
        cfg = Path(tmp) / "prometheus.yml"
        cfg.write_text(yaml.safe_dump(config))
        web = free_port()
        log = (Path(tmp) / "prom.log").open("w")
        proc = subprocess.Popen(
            [
                prometheus,
                f"--config.file={cfg}",
                f"--storage.tsdb.path={tmp}/data",
                f"--web.listen-address=127.0.0.1:{web}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            got: list[dict[str, str]] = []
            deadline = time.monotonic() + 30
            while len(got) < len(fields):
                assert proc.poll() is None, (Path(tmp) / "prom.log").read_text()[-2000:]
                assert time.monotonic() < deadline, "no scrape within 30 s"
                time.sleep(0.5)
                try:
                    got = _series(f"http://127.0.0.1:{web}")
                except OSError:
                    continue
        finally:
            proc.terminate()
            proc.wait(timeout=10)
            log.close()
    expected = []
    for name, labels, _ in samples:
        merged = merge_target_labels(
            labels, {"job": "dcgm-exporter", "instance": instance, **target}, honor_labels=False
        )
        out = apply(merged, rules)
        assert out is not None
        expected.append({"__name__": name, **out})
    key = lambda s: s["__name__"]  # noqa: E731
    assert sorted(got, key=key) == sorted(expected, key=key)
