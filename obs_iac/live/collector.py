"""The real OpenTelemetry Collector of a live run, one per service with a framework
section, started once with that service's generated ``otel/<svc>/collector.yaml``.

What is rewritten in the run's copy, and nothing else:

- every listen address: the OTLP receiver's ``grpc``/``http`` endpoints and the prometheus
  exporter's ``endpoint`` move from ``0.0.0.0:<port>`` to free ``127.0.0.1`` ports (two
  services' collectors would share 4317/4318/8889 otherwise);
- the collector's own telemetry server (``service.telemetry.metrics``, :8888 by default,
  not written by obs-iac) is turned off with ``level: none``, for the same reason;
- the spanmetrics connector's ``metrics_flush_interval`` (unset in the generated file, so
  the connector's default of 60s, facts.md "spanmetrics") is divided by ``--time-scale``
  like every other interval of the run, so a flush still spans the same number of scrapes.

The connector's namespace, histogram, dimensions, the exporter's
``resource_constant_labels`` and the pipelines stay byte-for-byte what obs-iac generated.
The scrape job comes from ``prometheus/scrape/<svc>.otel-collector.yml`` with only its
target address pointed at the exporter's port."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from obs_iac.live.procs import Supervisor, free_port
from obs_iac.live.timescale import format_ms, parse_ms
from obs_iac.toolchain import Tool

# spanmetricsconnector factory.go, createDefaultConfig (facts.md, "spanmetrics").
DEFAULT_FLUSH_INTERVAL = "60s"


class NotScrapedRoute(ValueError):
    """A collector config that exports over OTLP instead of the scraped route."""


def _kind(component_id: str) -> str:
    return component_id.split("/", 1)[0]


def live_config(
    doc: dict[str, Any], grpc_port: int, http_port: int, prom_port: int, time_scale: int
) -> dict[str, Any]:
    """The generated collector config with only the rewrites of the module docstring."""
    out = copy.deepcopy(doc)
    for rid, receiver in (out.get("receivers") or {}).items():
        if _kind(rid) != "otlp":
            continue
        protocols = receiver.get("protocols") or {}
        if "grpc" in protocols:
            protocols["grpc"]["endpoint"] = f"127.0.0.1:{grpc_port}"
        if "http" in protocols:
            protocols["http"]["endpoint"] = f"127.0.0.1:{http_port}"
    exporters = out.get("exporters") or {}
    prom = [eid for eid in exporters if _kind(eid) == "prometheus"]
    if not prom:
        raise NotScrapedRoute(
            "the collector exports over OTLP (the otlp path); the live run proves the "
            "scraped route only"
        )
    for eid in prom:
        exporters[eid]["endpoint"] = f"127.0.0.1:{prom_port}"
    for cid, connector in (out.get("connectors") or {}).items():
        if _kind(cid) in ("spanmetrics", "span_metrics"):
            flush = str((connector or {}).get("metrics_flush_interval") or DEFAULT_FLUSH_INTERVAL)
            connector["metrics_flush_interval"] = format_ms(parse_ms(flush) // time_scale)
    service = out.setdefault("service", {})
    service.setdefault("telemetry", {})["metrics"] = {"level": "none"}
    return out


def live_scrape_job(doc: dict[str, Any], prom_port: int) -> tuple[str, bool]:
    """(job_name, honor_labels) of the generated scrape file's single job; the run points
    its target at 127.0.0.1:<prom_port> and keeps the rest."""
    jobs = doc.get("scrape_configs") or []
    if len(jobs) != 1:
        raise ValueError(f"expected one scrape job, found {len(jobs)}")
    return str(jobs[0]["job_name"]), bool(jobs[0].get("honor_labels", False))


@dataclass
class Collector:
    service: str
    otlp_http: str  # http://127.0.0.1:<port>, for OTEL_EXPORTER_OTLP_ENDPOINT
    metrics_port: int  # the prometheus exporter's port, scraped by every stack
    job: str
    honor_labels: bool


def start_collector(
    tool: Tool,
    generated: Path,
    service: str,
    workdir: Path,
    time_scale: int,
    timeout: float,
    sup: Supervisor,
) -> Collector:
    src = generated / "otel" / service / "collector.yaml"
    doc = yaml.safe_load(src.read_text(encoding="utf-8")) or {}
    ports: dict[str, int] = {}
    cfg = workdir / f"otelcol-{service}.yaml"

    def argv(port: int) -> list[str]:
        ports.update(grpc=free_port(), http=free_port(), prom=port)
        live = live_config(doc, ports["grpc"], ports["http"], port, time_scale)
        cfg.write_text(yaml.safe_dump(live, sort_keys=False), encoding="utf-8")
        return [str(tool.path), f"--config={cfg}"]

    _, port = sup.start(
        f"otelcol-{service}", argv, lambda p: f"http://127.0.0.1:{p}/metrics", timeout
    )
    scrape = generated / "prometheus" / "scrape" / f"{service}.otel-collector.yml"
    job, honor = live_scrape_job(yaml.safe_load(scrape.read_text(encoding="utf-8")) or {}, port)
    return Collector(service, f"http://127.0.0.1:{ports['http']}", port, job, honor)
