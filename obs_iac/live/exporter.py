"""The fake targets of a live run: one dcgm-exporter per GPU node, serving exactly the
series the exporter-shape catalogue says that exporter release emits for the fields of the
service's generated collectors.csv, and one application endpoint per service serving its
SLI series. Scenarios change their values (and take a node off the network) while the real
Prometheus scrapes them."""

from __future__ import annotations

import threading
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from obs_iac.live import shapes
from obs_iac.live.procs import pick_port

# A healthy, busy training GPU. Every value a generated alert compares is well away from
# its threshold, so the healthy run can only fire through a wrong rule.
HEALTHY: Mapping[str, float] = {
    "DCGM_FI_DEV_GPU_TEMP": 62,
    "DCGM_FI_DEV_POWER_USAGE": 310,
    "DCGM_FI_DEV_GPU_UTIL": 85,
    "DCGM_FI_DEV_MEM_COPY_UTIL": 40,
    "DCGM_FI_DEV_XID_ERRORS": 0,
    "DCGM_FI_DEV_FB_FREE": 20480,
    "DCGM_FI_DEV_FB_USED": 61440,
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": 0,
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": 0,
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": 0,
    "DCGM_FI_PROF_SM_ACTIVE": 0.82,
    "DCGM_FI_PROF_SM_OCCUPANCY": 0.55,
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0.6,
    "DCGM_FI_PROF_DRAM_ACTIVE": 0.5,
    "DCGM_FI_PROF_NVLINK_TX_BYTES": 4.0e9,
    "DCGM_FI_PROF_NVLINK_RX_BYTES": 4.0e9,
}
XID = "DCGM_FI_DEV_XID_ERRORS"
XID_COUNT = "DCGM_EXP_XID_ERRORS_COUNT"
# DCGM_EXPORTER_XID_COUNT_WINDOW_SIZE default (ms), facts.md section 2.
XID_WINDOW_MS = 300_000


class Endpoint:
    """One HTTP server on 127.0.0.1 serving ``render()`` at /metrics; stop() closes its
    socket, so Prometheus sees the target down (connection refused), as for a dead node."""

    def __init__(self, render: Callable[[], str]) -> None:
        self.render = render
        self.port = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        render = self.render

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?")[0] != "/metrics":
                    self.send_error(404)
                    return
                body = render().encode("utf-8")
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    return  # the scraper gave up (scrape timeout); it records the failure

            def log_message(self, format: str, *args: Any) -> None:
                return

        for _ in range(3):
            port = pick_port(self.port or None)
            try:
                self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
                break
            except OSError:
                self.port = 0
        if self._server is None:
            raise OSError("no free port for a fake target")
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


@dataclass
class GpuNode:
    """A node's dcgm-exporter: its GPUs, the pod on them, and the current field values."""

    host: str
    service: str
    sla_id: str
    exporter_version: str
    model: str
    driver_version: str
    fields: Sequence[tuple[str, str, str]]  # (field, prometheus type, help) from collectors.csv
    gpus: int
    node_index: int
    values: dict[tuple[int, str], float] = field(default_factory=dict)
    xid_code: dict[int, int] = field(default_factory=dict)
    xid_events: list[tuple[float, int, int]] = field(default_factory=list)  # (t, gpu, code)
    time_scale: int = 1
    _cache: tuple[Any, str] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        helps = {name: (help_, kind) for name, kind, help_ in self.fields}
        self.shape = shapes.shape_for(self.exporter_version, helps)
        self.devices = [
            shapes.gpu_device(
                gpu=i,
                uuid=f"GPU-{self.node_index:08x}-{zlib.crc32(self.service.encode()) % 65536:04x}"
                f"-4c1e-9f00-{i:012x}",
                model_name=self.model,
                hostname=self.host,
                pci_bus_id=f"00000000:{0x10 + i:02X}:00.0",
            )
            for i in range(self.gpus)
        ]
        # Pod labels: the workload pod carries business.sla_id, which the exporter copies
        # with DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS, its name sanitised to "_".
        self.pods = [
            shapes.pod_attribution(
                namespace=self.service,
                pod=f"{self.service}-trainer-{self.node_index}-{i}",
                container="trainer",
                labels={"business_sla_id": self.sla_id},
            )
            for i in range(self.gpus)
        ]
        for i in range(self.gpus):
            for name, _kind, _help in self.fields:
                self.values[(i, name)] = HEALTHY.get(name, 0.0)

    def set(self, gpu: int, name: str, value: float) -> None:
        with self.lock:
            self.values[(gpu, name)] = value

    def add(self, gpu: int, name: str, delta: float) -> None:
        with self.lock:
            self.values[(gpu, name)] = self.values.get((gpu, name), 0.0) + delta

    def xid(self, gpu: int, code: int) -> None:
        with self.lock:
            self.xid_code[gpu] = code
            self.values[(gpu, XID)] = code
            self.xid_events.append((time.monotonic(), gpu, code))

    def exposition(self) -> str:
        """The exporter's text; rendered again only when a value or the set of XIDs in
        the window changed (two Prometheus servers scrape every node a few times a
        second, and rendering through the catalogue is the costly part)."""
        horizon = time.monotonic() - XID_WINDOW_MS / 1000 / self.time_scale
        with self.lock:
            window = tuple(e for e in self.xid_events if e[0] >= horizon)
            key = (tuple(sorted(self.values.items())), window)
            if self._cache is not None and self._cache[0] == key:
                return self._cache[1]
            text = self._render(horizon)
            self._cache = (key, text)
            return text

    def _render(self, horizon: float) -> str:
        samples: list[tuple[str, Mapping[str, str], float]] = []
        # The exporter counts XIDs per code over its window (compressed like every
        # other duration of the run); the label keeps the configured window.
        for name, _kind, _help in self.fields:
            for device, pod in zip(self.devices, self.pods, strict=True):
                if name == XID_COUNT:
                    counts: dict[int, int] = {}
                    for t, gpu, code in self.xid_events:
                        if gpu == device.gpu and t >= horizon:
                            counts[code] = counts.get(code, 0) + 1
                    rows = [({"xid": str(c)}, float(n)) for c, n in sorted(counts.items())]
                    for extra, value in rows or [({}, 0.0)]:
                        labels = self.shape.series(
                            name,
                            device,
                            kubernetes=pod,
                            honor_labels=True,
                            value_labels={"window_size_in_ms": str(XID_WINDOW_MS), **extra},
                        )
                        samples.append((name, labels, value))
                    continue
                value_labels: dict[str, str] = {}
                if name == XID and self.shape.has_xid_err_labels:
                    value_labels["err_code"] = str(self.xid_code.get(device.gpu, 0))
                # honor_labels=True: the exporter's own names; Prometheus renames them
                # to exported_* at the scrape when the target labels clash.
                labels = self.shape.series(
                    name, device, kubernetes=pod, honor_labels=True, value_labels=value_labels
                )
                samples.append((name, labels, self.values[(device.gpu, name)]))
        return shapes.render(self.shape, samples)


@dataclass
class SliSeries:
    """One SLI metric of the application. ``role``: total, bad or good (counters),
    latency (a histogram whose ``threshold`` bucket splits good from bad) or timestamp
    (a freshness gauge). ``slo`` names the SLO whose scenario drives it."""

    name: str
    role: str
    slo: str
    labels: Mapping[str, str]
    buckets: Sequence[float] = ()
    threshold: float = 0.0


@dataclass
class ServiceApp:
    """A service's own /metrics: counters and histograms advancing at a steady request
    rate with a settable bad-event ratio per SLO, and freshness timestamps (stale = the
    last success two hours ago)."""

    service: str
    series: list[SliSeries]
    rate_per_second: float = 50.0
    bad_ratio: dict[str, float] = field(default_factory=dict)
    stale: dict[str, bool] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    _counts: dict[str, float] = field(default_factory=dict)
    _last: float = field(default_factory=time.monotonic)

    def set_bad_ratio(self, slo: str, ratio: float) -> None:
        with self.lock:
            self._advance()
            self.bad_ratio[slo] = ratio

    def set_stale(self, slo: str, stale: bool) -> None:
        with self.lock:
            self.stale[slo] = stale

    def _bump(self, key: str, amount: float) -> None:
        self._counts[key] = self._counts.get(key, 0.0) + amount

    def _advance(self) -> None:
        now = time.monotonic()
        events, self._last = (now - self._last) * self.rate_per_second, now
        for s in self.series:
            bad = self.bad_ratio.get(s.slo, 0.0)
            if s.role == "total":
                self._bump(s.name, events)
            elif s.role == "bad":
                self._bump(s.name, events * bad)
            elif s.role == "good":
                self._bump(s.name, events * (1.0 - bad))
            elif s.role == "latency":
                self._bump(s.name + "_count", events)
                # Good requests take half the threshold, bad ones three times it.
                self._bump(s.name + "_sum", events * s.threshold * (0.5 * (1 - bad) + 3 * bad))
                for b in s.buckets:
                    share = (1.0 - bad) if b >= s.threshold * 0.5 else 0.0
                    if b >= s.threshold * 3:
                        share = 1.0
                    self._bump(f"{s.name}_bucket:{b:g}", events * share)

    def exposition(self) -> str:
        with self.lock:
            self._advance()
            out: list[str] = []
            for s in self.series:
                inner = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
                sep = "," if inner else ""
                if s.role in ("total", "bad", "good"):
                    out.append(f"# TYPE {s.name} counter\n")
                    out.append(f"{s.name}{{{inner}}} {self._counts.get(s.name, 0.0):.3f}\n")
                elif s.role == "latency":
                    out.append(f"# TYPE {s.name} histogram\n")
                    for b in s.buckets:
                        count = self._counts.get(f"{s.name}_bucket:{b:g}", 0.0)
                        out.append(f'{s.name}_bucket{{{inner}{sep}le="{b:g}"}} {count:.3f}\n')
                    total = self._counts.get(s.name + "_count", 0.0)
                    out.append(f'{s.name}_bucket{{{inner}{sep}le="+Inf"}} {total:.3f}\n')
                    out.append(
                        f"{s.name}_sum{{{inner}}} {self._counts.get(s.name + '_sum', 0.0):.3f}\n"
                    )
                    out.append(f"{s.name}_count{{{inner}}} {total:.3f}\n")
                else:
                    age = 7200 if self.stale.get(s.slo, False) else 5
                    out.append(
                        f"# TYPE {s.name} gauge\n{s.name}{{{inner}}} {time.time() - age:.3f}\n"
                    )
            return "".join(out)
