"""One live stack: the real Prometheus and Alertmanager of one version pair, configured
from the generated files as they are (rules time-compressed into the run's temp dir, see
timescale.py), plus a webhook receiver of our own that records every notification."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from obs_iac.live.procs import Supervisor, pick_port
from obs_iac.live.timescale import format_ms, parse_ms, scale_rule_file
from obs_iac.toolchain import Tool


@dataclass(frozen=True)
class Target:
    job: str
    port: int
    labels: Mapping[str, str]


class Webhook:
    """Alertmanager's webhook receiver: keeps every notification it is sent."""

    def __init__(self) -> None:
        self.notifications: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with hook.lock:
                    hook.notifications.append({"received": time.monotonic(), **body})
                self.send_response(200)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", pick_port()), Handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def snapshot(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.notifications)


def get_json(url: str, timeout: float = 5.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.loads(resp.read())


@dataclass
class StackConfig:
    name: str  # floor | current
    prometheus: Tool
    alertmanager: Tool
    time_scale: int
    evaluation_interval: str  # the plan's, uncompressed
    # Prometheus's default scrape interval. Compressed it is still the scrape timeout, so
    # it also bounds how slow a fake target may answer on a loaded machine: a failed
    # scrape writes stale markers and resets every pending `for:` of that target.
    scrape_interval: str = "1m"


class Stack:
    def __init__(
        self,
        cfg: StackConfig,
        workdir: Path,
        generated: Path,
        targets: Sequence[Target],
        relabel: Mapping[str, list[dict[str, Any]]],
        honor_labels: Mapping[str, bool],
        timeout: float,
        supervisor: Supervisor,
    ) -> None:
        self.cfg, self.workdir, self.generated = cfg, workdir, generated
        self.targets, self.relabel, self.honor_labels = targets, relabel, honor_labels
        self.timeout, self.sup = timeout, supervisor
        self.webhook: Webhook | None = None
        self.prom_url = self.am_url = ""

    def scaled(self, duration: str) -> str:
        return format_ms(parse_ms(duration) // self.cfg.time_scale)

    def _rule_files(self) -> list[str]:
        out_dir = self.workdir / "rules"
        out_dir.mkdir(parents=True, exist_ok=True)
        paths = []
        for src in sorted((self.generated / "prometheus" / "rules").glob("*.yml")):
            doc = yaml.safe_load(src.read_text(encoding="utf-8")) or {}
            dest = out_dir / src.name
            dest.write_text(yaml.safe_dump(scale_rule_file(doc, self.cfg.time_scale)))
            paths.append(str(dest))
        return paths

    def _prometheus_yml(self, am_port: int, rules: bool = True) -> dict[str, Any]:
        jobs: dict[str, list[Target]] = {}
        for t in self.targets:
            jobs.setdefault(t.job, []).append(t)
        scrape_configs = []
        for job, targets in sorted(jobs.items()):
            entry: dict[str, Any] = {
                "job_name": job,
                "honor_labels": self.honor_labels.get(job, False),
                "static_configs": [
                    {"targets": [f"127.0.0.1:{t.port}"], "labels": dict(t.labels)} for t in targets
                ],
            }
            if job in self.relabel:
                # The generated metric_relabel_configs, exactly as rendered.
                entry["metric_relabel_configs"] = self.relabel[job]
            scrape_configs.append(entry)
        return {
            "global": {
                "scrape_interval": self.scaled(self.cfg.scrape_interval),
                "scrape_timeout": self.scaled(self.cfg.scrape_interval),
                "evaluation_interval": self.scaled(self.cfg.evaluation_interval),
            },
            "rule_files": self._rule_files() if rules else [],
            "alerting": {
                "alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{am_port}"]}]}]
            },
            "scrape_configs": scrape_configs,
        }

    def _alertmanager_yml(self, hook_port: int) -> str:
        # Our route and receiver (every alert its own group, so each is one notification),
        # then the generated inhibit_rules file appended byte for byte.
        route = {
            "route": {
                "receiver": "obs-iac-live",
                "group_by": ["..."],
                "group_wait": self.scaled("30s"),
                "group_interval": self.scaled("5m"),
                "repeat_interval": self.scaled("4h"),
            },
            "receivers": [
                {
                    "name": "obs-iac-live",
                    "webhook_configs": [
                        {"url": f"http://127.0.0.1:{hook_port}/", "send_resolved": True}
                    ],
                }
            ],
        }
        inhibit = (self.generated / "alertmanager" / "inhibit_rules.yml").read_text("utf-8")
        return yaml.safe_dump(route) + inhibit

    def start(self) -> None:
        self.webhook = Webhook()
        work = self.workdir
        am_cfg = work / "alertmanager.yml"
        am_cfg.write_text(self._alertmanager_yml(self.webhook.port))
        am = self.cfg.alertmanager

        def am_argv(port: int) -> list[str]:
            return [
                str(am.path),
                f"--config.file={am_cfg}",
                f"--storage.path={work / 'am-data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--cluster.listen-address=",
            ]

        _, am_port = self.sup.start(
            f"{self.cfg.name}-alertmanager",
            am_argv,
            lambda p: f"http://127.0.0.1:{p}/-/ready",
            self.timeout,
        )
        self.am_url = f"http://127.0.0.1:{am_port}"
        self._am_port = am_port
        # Rules come after the warm-up (warm()): evaluated before the first scrape, an
        # absent() would count the start-up itself as bad SLO slices.
        prom_cfg = self._prom_cfg = work / "prometheus.yml"
        prom_cfg.write_text(
            yaml.safe_dump(self._prometheus_yml(am_port, rules=False), sort_keys=False)
        )
        prom = self.cfg.prometheus

        def prom_argv(port: int) -> list[str]:
            return [
                str(prom.path),
                f"--config.file={prom_cfg}",
                f"--storage.tsdb.path={work / 'prom-data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                f"--query.lookback-delta={self.scaled('5m')}",
                f"--rules.alert.resend-delay={self.scaled('1m')}",
            ]

        self._prom, prom_port = self.sup.start(
            f"{self.cfg.name}-prometheus",
            prom_argv,
            lambda p: f"http://127.0.0.1:{p}/-/ready",
            self.timeout,
        )
        self.prom_url = f"http://127.0.0.1:{prom_port}"

    def warm(self, timeout: float) -> None:
        """Wait until every target has been scraped twice, then load the rules (SIGHUP:
        Prometheus rereads its configuration) and wait until they are evaluated."""
        import os
        import signal

        from obs_iac.live.procs import StackError, log_tail

        deadline = time.monotonic() + timeout
        interval = parse_ms(self.cfg.scrape_interval) / self.cfg.time_scale / 1000
        while True:
            active = get_json(f"{self.prom_url}/api/v1/targets")["data"]["activeTargets"]
            if len(active) == len(self.targets) and all(t["health"] == "up" for t in active):
                break
            if time.monotonic() > deadline:
                down = [t["scrapeUrl"] + ": " + (t.get("lastError") or t["health"]) for t in active]
                raise StackError(
                    f"{self.cfg.name}-prometheus: targets not up within {timeout:g} s: "
                    f"{'; '.join(down[:5])}\n{log_tail(self._prom.log)}"
                )
            time.sleep(0.1)
        time.sleep(2 * interval)
        self._prom_cfg.write_text(
            yaml.safe_dump(self._prometheus_yml(self._am_port), sort_keys=False)
        )
        os.kill(self._prom.pid, signal.SIGHUP)
        while True:
            groups = get_json(f"{self.prom_url}/api/v1/rules")["data"]["groups"]
            # A group not evaluated yet reports Go's zero time (0001-01-01...).
            if groups and all(
                not str(g.get("lastEvaluation", "0001")).startswith("0001") for g in groups
            ):
                return
            if time.monotonic() > deadline:
                raise StackError(
                    f"{self.cfg.name}-prometheus did not load the rules within {timeout:g} s:\n"
                    f"{log_tail(self._prom.log)}"
                )
            time.sleep(0.1)

    def stop(self) -> None:
        if self.webhook is not None:
            self.webhook.stop()

    def prometheus_alerts(self) -> list[dict[str, Any]]:
        data = get_json(f"{self.prom_url}/api/v1/alerts")
        alerts: list[dict[str, Any]] = data["data"]["alerts"]
        return alerts

    def alertmanager_alerts(self) -> list[dict[str, Any]]:
        alerts: list[dict[str, Any]] = get_json(f"{self.am_url}/api/v2/alerts")
        return alerts

    def query(self, expr: str) -> list[dict[str, Any]]:
        from urllib.parse import quote

        data = get_json(f"{self.prom_url}/api/v1/query?query={quote(expr)}")
        result: list[dict[str, Any]] = data["data"]["result"]
        return result
