"""The framework half of `obs-iac test --live` in isolation: what the run rewrites in the
generated collector config (listen addresses, the flush interval, the collector's own
telemetry, nothing else), the rank environment read off the generated launcher, the stage
profile of each scenario against the generated thresholds, and the offset guard."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path

import pytest
import yaml

from obs_iac.live.collector import NotScrapedRoute, live_config, live_scrape_job
from obs_iac.live.framework import offset_too_long
from obs_iac.live.training import RankSpec, launcher_env, stage_seconds

ROOT = Path(__file__).resolve().parent.parent
GEN = ROOT / "generated"
SVC = "recomm-v2"


def _collector() -> dict:  # type: ignore[type-arg]
    doc = yaml.safe_load((GEN / "otel" / SVC / "collector.yaml").read_text())
    assert isinstance(doc, dict)
    return doc


def test_live_config_rewrites_listen_addresses_and_flush_only() -> None:
    doc = _collector()
    live = live_config(doc, 1001, 1002, 1003, 60)
    rid = f"otlp/obs-iac-{SVC}"
    assert live["receivers"][rid]["protocols"]["grpc"]["endpoint"] == "127.0.0.1:1001"
    assert live["receivers"][rid]["protocols"]["http"]["endpoint"] == "127.0.0.1:1002"
    eid = f"prometheus/obs-iac-{SVC}"
    assert live["exporters"][eid]["endpoint"] == "127.0.0.1:1003"
    cid = next(iter(live["connectors"]))
    assert live["connectors"][cid]["metrics_flush_interval"] == "1s"  # 60s / 60
    assert live["service"]["telemetry"] == {"metrics": {"level": "none"}}
    # Everything else exactly as generated.
    back = copy.deepcopy(live)
    for r in back["receivers"].values():
        for proto in r["protocols"].values():
            proto.pop("endpoint")
    back["exporters"][eid].pop("endpoint")
    back["connectors"][cid].pop("metrics_flush_interval")
    back["service"].pop("telemetry")
    orig = copy.deepcopy(doc)
    for r in orig["receivers"].values():
        for proto in r["protocols"].values():
            proto.pop("endpoint")
    orig["exporters"][eid].pop("endpoint")
    assert back == orig
    assert doc["exporters"][eid]["endpoint"] == "0.0.0.0:8889"  # input not modified


def test_live_config_refuses_the_otlp_route() -> None:
    doc = _collector()
    doc["exporters"] = {"otlphttp/x": {"endpoint": "http://p:9090/api/v1/otlp"}}
    with pytest.raises(NotScrapedRoute):
        live_config(doc, 1, 2, 3, 60)


def test_scrape_job_is_the_generated_one() -> None:
    doc = yaml.safe_load((GEN / "prometheus" / "scrape" / f"{SVC}.otel-collector.yml").read_text())
    assert live_scrape_job(doc, 9) == (f"obs-iac-otel-{SVC}", True)
    with pytest.raises(ValueError):
        live_scrape_job({"scrape_configs": []}, 9)


def test_rank_env_comes_from_the_generated_launcher() -> None:
    launcher = GEN / "otel" / SVC / "with-otel-resource.sh"
    env = launcher_env(launcher, 2, 2, "node-a", "straggler-rank")
    assert env["OTEL_SERVICE_NAME"] == SVC
    attrs = dict(kv.split("=", 1) for kv in env["OTEL_RESOURCE_ATTRIBUTES"].split(","))
    assert attrs["host.name"] == "node-a"
    assert attrs["resource.gpu.id"] == "nvidia2"
    assert attrs["framework.pytorch.rank"] == "2"
    assert attrs["nccl.group_id"] == "straggler-rank"
    assert attrs["business.sla_id"] == "recomm_v2"
    # The launcher's own check refuses a group id it would not percent-encode.
    with pytest.raises(subprocess.CalledProcessError):
        launcher_env(launcher, 0, 0, "node-a", "bad group")


def _spec(kind: str, rank: int) -> RankSpec:
    return RankSpec(
        service=SVC,
        host="h",
        group=kind,
        rank=rank,
        local_rank=rank,
        kind=kind,
        budget=1.5,
        step_span="train_step",
        stages=("data_load", "forward", "backward", "allreduce", "optimizer"),
        data_load_stage="data_load",
        allreduce_stage="allreduce",
        env=(),
    )


def test_stage_profiles_cross_the_generated_thresholds_only_when_faulted() -> None:
    # Thresholds of the generated rules: data-load share 0.3, straggler 1.3 x the group
    # median, step budget 1.5 s (recomm-v2).
    text = (GEN / "prometheus" / "rules" / f"{SVC}.rules.yml").read_text()
    assert 'span_name="data_load"} > 0.3' in text and "ratio_to_group_median5m" in text

    def share(d: dict[str, float]) -> float:
        return d["data_load"] / sum(d.values())

    def compute(d: dict[str, float]) -> float:
        return sum(d.values()) - d["allreduce"]

    for kind in ("healthy", "data-loader-starvation", "straggler-rank", "nccl-errors"):
        healthy = stage_seconds(_spec(kind, 0), faulted=False)
        assert share(healthy) < 0.3 and sum(healthy.values()) < 1.5
    starved = stage_seconds(_spec("data-loader-starvation", 0), faulted=True)
    assert share(starved) > 0.3 and sum(starved.values()) < 1.5
    slow = stage_seconds(_spec("straggler-rank", 1), faulted=True)
    peer = stage_seconds(_spec("straggler-rank", 0), faulted=True)
    assert compute(slow) / compute(peer) > 1.3
    # The peers wait for the straggler: every rank's step is over budget.
    assert sum(peer.values()) == pytest.approx(sum(slow.values()))
    assert sum(peer.values()) > 1.5


def test_offset_guard() -> None:
    assert offset_too_long("x > 1.5 * (x offset 1d)") == "1d"
    assert offset_too_long("x > (x offset 5m)") == ""
    assert offset_too_long("rate(x[5m])") == ""
