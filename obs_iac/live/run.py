"""A live run: build the world, start each stack once, play the timeline on the fake
targets while polling Prometheus and Alertmanager, then judge what really happened."""

from __future__ import annotations

import contextlib
import itertools
import json
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from obs_iac.live import framework
from obs_iac.live.inventory import (
    AlertRule,
    InhibitRule,
    expected_muted,
    labels_of,
    load_alerts,
    load_inhibit_rules,
)
from obs_iac.live.minimum import check_minimums
from obs_iac.live.procs import StackError, Supervisor
from obs_iac.live.scenarios import Scenario, World, build_world
from obs_iac.live.stack import Stack, StackConfig, Target
from obs_iac.live.timescale import parse_ms
from obs_iac.toolchain import find_tool

DEFAULT_SCALE = 60


@dataclass
class Poll:
    t: float  # seconds since the fault phase began (negative: the healthy run)
    prom: list[dict[str, Any]]
    am: list[dict[str, Any]]


@dataclass
class StackResult:
    stack: str
    versions: dict[str, str]
    alerts: list[dict[str, Any]] = field(default_factory=list)
    edges: list[dict[str, Any]] = field(default_factory=list)
    storm: list[dict[str, Any]] = field(default_factory=list)
    # One entry per fired alert instance: what storm.compare holds against the table.
    storm_alerts: list[dict[str, Any]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    error: str = ""


@dataclass
class LiveResult:
    time_scale: int
    wall_seconds: float
    stacks: list[StackResult]
    provisional_shapes: bool
    timings: dict[str, float] = field(default_factory=dict)
    upgraded: dict[str, str] = field(default_factory=dict)  # host -> exporter version

    @property
    def passed(self) -> bool:
        return all(not s.failures and not s.error for s in self.stacks)


def _fingerprint(labels: Mapping[str, str]) -> str:
    return json.dumps(sorted(labels.items()))


def run_live(
    root: Path,
    stacks: Sequence[str],
    time_scale: int = DEFAULT_SCALE,
    timeout: float = 30.0,
    generated: Path | None = None,
    keep: Path | None = None,
    services: Sequence[str] | None = None,
    upgraded_exporter: str | None = None,
) -> LiveResult:
    from obs_iac.live import shapes, storm
    from obs_iac.pipeline import build_plan, open_workspace
    from obs_iac.plugins import discover

    started = time.monotonic()
    ws = open_workspace(root)
    plan = build_plan(ws, discover(ws.config)).model_dump(mode="json", by_alias=True)
    if services is not None:
        plan["services"] = [s for s in plan["services"] if s["name"] in services]
    gen = generated or ws.output
    if not (gen / "alertmanager" / "inhibit_rules.yml").is_file():
        from obs_iac.diagnostics import Diagnostic, InputError, Severity

        raise InputError(
            [
                Diagnostic(
                    "live/not-rendered",
                    Severity.ERROR,
                    f"{gen} holds no rendered configuration (alertmanager/inhibit_rules.yml)",
                    hint="run `obs-iac render` first: the live run tests what is committed",
                )
            ]
        )
    alerts = [
        a
        for a in load_alerts(gen / "prometheus" / "rules")
        if services is None or a.service in services
    ]
    rules = [
        r
        for r in load_inhibit_rules(gen / "alertmanager" / "inhibit_rules.yml")
        if services is None or r.service in services
    ]
    # Every duration of the plan divides by the knob into whole milliseconds, or we stop
    # before starting anything (timescale.ScaleError is a usage error).
    parse_ms(plan["evaluation_interval"])
    configs = [
        StackConfig(
            name=name,
            prometheus=find_tool("prometheus", name),  # type: ignore[arg-type]
            alertmanager=find_tool("alertmanager", name),  # type: ignore[arg-type]
            time_scale=time_scale,
            evaluation_interval=plan["evaluation_interval"],
        )
        for name in stacks
    ]
    for cfg in configs:
        check_minimums(
            cfg.name,
            [cfg.prometheus, cfg.alertmanager],
            {
                "prometheus": ws.config.prometheus_min_version,
                "alertmanager": ws.config.alertmanager_min_version,
            },
            str(ws.config.naming),
        )
    world = build_world(plan, gen, alerts, time_scale, upgraded_exporter)
    relabel = {
        p.name.split(".")[0]: (yaml.safe_load(p.read_text("utf-8")) or {})["metric_relabel_configs"]
        for p in sorted((gen / "prometheus" / "relabel").glob("*.metric_relabel_configs.yml"))
    }
    honor = {
        "dcgm-exporter": any(
            bool((s.get("gpu") or {}).get("honor_labels")) for s in plan["services"]
        )
    }
    results: list[StackResult] = []
    timings: dict[str, float] = {}
    tmp_ctx = tempfile.TemporaryDirectory(prefix="obs-iac-live-")
    workdir = Path(keep) if keep else Path(tmp_ctx.name)
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        with Supervisor(workdir) as sup:
            for _job, ep, _labels in world.endpoints:
                ep.start()
            targets = [Target(job, ep.port, labels) for job, ep, labels in world.endpoints]
            live: list[tuple[StackConfig, Stack]] = []
            training = None
            try:
                # The Collectors and the ranks, once for both stacks: each stack scrapes
                # the same Collector, as two Prometheus replicas would.
                training, collectors = framework.start(
                    world.framework, gen, workdir, time_scale, timeout, sup
                )
                targets += [Target(c.job, c.metrics_port, {}) for c in collectors]
                honor.update({c.job: c.honor_labels for c in collectors})
                for cfg in configs:
                    d = workdir / cfg.name
                    d.mkdir(exist_ok=True)
                    st = Stack(cfg, d, gen, targets, relabel, honor, timeout, sup)
                    st.start()
                    live.append((cfg, st))
                for _cfg, st in live:
                    st.warm(timeout)
                timings["start"] = round(time.monotonic() - started, 1)
                polls = _play(world, [s for _, s in live], time_scale)
                if training is not None and training.dead():
                    # A rank that crashed sent no spans: its alerts would fail for a
                    # reason that is ours, not the generated config's.
                    raise StackError(
                        f"training ranks exited with an error: {', '.join(training.dead())}"
                    )
                timings["scenarios"] = round(time.monotonic() - started - timings["start"], 1)
                for (cfg, st), stack_polls in zip(live, polls, strict=True):
                    assert st.webhook is not None
                    res = judge(
                        cfg,
                        alerts,
                        rules,
                        world,
                        stack_polls,
                        st.webhook.snapshot(),
                        time_scale,
                    )
                    # The committed storm table (a generated artifact) must be what fired.
                    res.failures += storm.compare(storm.load_table(gen), res.storm_alerts, services)
                    results.append(res)
            finally:
                if training is not None:
                    training.stop()
                for _, st in live:
                    st.stop()
                for _job, ep, _labels in world.endpoints:
                    ep.stop()
    finally:
        if keep is None:
            tmp_ctx.cleanup()
    return LiveResult(
        time_scale=time_scale,
        wall_seconds=round(time.monotonic() - started, 1),
        stacks=results,
        provisional_shapes=shapes.provisional(),
        timings=timings,
        upgraded=dict(world.upgraded),
    )


def phase_lengths(scale: int) -> dict[str, float]:
    """Compressed seconds of each phase: a short healthy run of every SLO (the GPU healthy
    run is a healthy node per service throughout), the GPU faults for the longest `for:`
    of the GPU alerts (30m) plus 10m, the slow burn and then the fast burn 10m each."""
    minute = 60 / scale
    return {"healthy": 5 * minute, "faults": 40 * minute, "slow": 10 * minute, "fast": 10 * minute}


def _play(world: World, stacks: Sequence[Stack], scale: int) -> list[list[Poll]]:
    lengths = phase_lengths(scale)
    polls: list[list[Poll]] = [[] for _ in stacks]
    stop = threading.Event()
    t_fault = time.monotonic() + lengths["healthy"]
    period = max(0.25, 30 / scale)

    def poller(i: int, st: Stack) -> None:
        while not stop.is_set():
            t = time.monotonic() - t_fault
            with contextlib.suppress(OSError):
                polls[i].append(Poll(t, st.prometheus_alerts(), st.alertmanager_alerts()))
            stop.wait(period)

    threads = [
        threading.Thread(target=poller, args=(i, s), daemon=True) for i, s in enumerate(stacks)
    ]
    for th in threads:
        th.start()
    timeline: list[tuple[float, Any]] = []
    for s in world.scenarios:
        offset = lengths["slow"] if s.name == "slo-fast-burn" else 0.0
        for a in s.actions:
            timeline.append((offset + a.at, a.do))
    timeline.sort(key=lambda x: x[0])
    end = max(lengths["faults"], lengths["slow"] + lengths["fast"])
    try:
        for at, do in timeline:
            _sleep_until(t_fault + at, stacks)
            do()
        _sleep_until(t_fault + end, stacks)
    finally:
        stop.set()
        for th in threads:
            th.join(timeout=10)
    return polls


def _sleep_until(deadline: float, stacks: Sequence[Stack]) -> None:
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        for st in stacks:
            for child in st.sup.children:
                if not child.alive():
                    from obs_iac.live.procs import log_tail

                    raise StackError(f"{child.name} died during the run:\n{log_tail(child.log)}")
        time.sleep(min(left, 0.2))


def _scenario_of(
    labels: Mapping[str, str], t: float, world: World, lengths: Mapping[str, float]
) -> str:
    host = labels.get("host_name", "")
    group = labels.get("nccl_group_id", "")
    if group in world.framework.healthy_groups:
        return "healthy"
    for s in world.scenarios:
        if group and s.name == group and s.service == labels.get("service"):
            return s.name
        if host and host in s.hosts:
            return s.name
    if host in world.healthy_hosts:
        return "healthy"
    if labels.get("slo"):
        return "slo-slow-burn" if t < lengths["slow"] else "slo-fast-burn"
    return "unattributed"


def judge(
    cfg: StackConfig,
    alerts: Sequence[AlertRule],
    rules: Sequence[InhibitRule],
    world: World,
    polls: Sequence[Poll],
    notifications: Sequence[Mapping[str, Any]],
    scale: int,
) -> StackResult:
    res = StackResult(
        stack=cfg.name,
        versions={"prometheus": cfg.prometheus.version, "alertmanager": cfg.alertmanager.version},
    )
    lengths = phase_lengths(scale)
    # 1. What fired in Prometheus, first time seen.
    fired: dict[str, tuple[float, dict[str, str]]] = {}
    for p in polls:
        for a in p.prom:
            if a.get("state") == "firing":
                labels = labels_of(a)
                fired.setdefault(_fingerprint(labels), (p.t, labels))
    # The healthy run: nothing at all before the faults, nothing on a healthy node ever.
    for t, labels in fired.values():
        if (
            t < 0
            or labels.get("host_name") in world.healthy_hosts
            or labels.get("nccl_group_id") in world.framework.healthy_groups
        ):
            res.failures.append(
                f"{labels.get('alertname')} fired in the healthy run ({_short(labels)})"
            )
    # 2. Every alert in the scenario made for it, on the labels it names.
    by_alert = {(s.service, a): (s, want) for s in world.scenarios for a, want in s.proves.items()}
    for rule in sorted(alerts, key=lambda r: (r.service, r.name)):
        entry: dict[str, Any] = {"service": rule.service, "alert": rule.name}
        key = (rule.service, rule.name)
        if key in world.unproven:
            entry.update(status="unproven", scenario="", detail=world.unproven[key])
        elif key not in by_alert:
            entry.update(status="unproven", scenario="", detail="no scenario")
        else:
            scen, want = by_alert[key]
            hits = [
                (t, ls)
                for t, ls in fired.values()
                if ls.get("alertname") == rule.name
                and ls.get("service") == rule.service
                and all(ls.get(k) == v for k, v in want.items())
            ]
            need = scen.episodes.get(rule.name, 1)
            seen = _episodes(polls, rule, want) if need > 1 else 1
            if hits and seen >= need:
                t = min(t for t, _ in hits)
                detail = f"fired after {t:.1f} s"
                if need > 1:
                    detail += f", {seen} separate times"
                entry.update(status="proven", scenario=scen.name, detail=detail)
            elif hits:
                entry.update(
                    status="FAILED",
                    scenario=scen.name,
                    detail=f"fired {seen} time(s), the scenario makes {need} faults",
                )
                res.failures.append(
                    f"{rule.service}/{rule.name} fired {seen} time(s) for {need} faults "
                    f"in {scen.name}"
                )
            else:
                entry.update(
                    status="FAILED",
                    scenario=scen.name,
                    detail=f"did not fire with {_short(want)}",
                )
                res.failures.append(f"{rule.service}/{rule.name} did not fire in {scen.name}")
        res.alerts.append(entry)
    # 3. Inhibition, poll by poll: what Alertmanager muted against what the rules say.
    exercised: dict[str, int] = {r.key: 0 for r in rules}
    wrong: dict[str, list[float]] = {}
    missed: dict[str, list[float]] = {}
    muted_ever: dict[str, dict[str, str]] = {}
    # fingerprint -> alertnames of the alerts Alertmanager says muted it (inhibitedBy)
    muted_by: dict[str, set[str]] = {}
    mutable_ever: set[str] = set()
    first_seen: dict[str, float] = {}
    always_expected: dict[str, bool] = {}
    previous: list[dict[str, str]] = []
    for p in polls:
        am = [a for a in p.am if (a.get("status") or {}).get("state") in ("active", "suppressed")]
        label_sets = [labels_of(a) for a in am]
        names_by_fp = {
            str(a.get("fingerprint")): labels.get("alertname", "")
            for a, labels in zip(am, label_sets, strict=True)
        }
        expect = expected_muted(label_sets, rules)
        for a, alert_labels, keys in zip(am, label_sets, expect, strict=True):
            fp = _fingerprint(alert_labels)
            if fp not in first_seen:
                first_seen[fp] = p.t
                # Muted from the start only if a source was already there one poll
                # earlier: an alert that fires together with its source may be notified
                # before Alertmanager's inhibitor has seen the source (a race inside
                # group_wait that Alertmanager does not promise to win).
                always_expected[fp] = bool(expected_muted([*previous, alert_labels], rules)[-1])
            suppressed = bool((a.get("status") or {}).get("inhibitedBy"))
            always_expected[fp] = always_expected[fp] and bool(keys)
            if suppressed:
                muted_ever[fp] = alert_labels
                muted_by.setdefault(fp, set()).update(
                    names_by_fp.get(str(f), "")
                    for f in (a.get("status") or {}).get("inhibitedBy") or ()
                )
            if keys:
                mutable_ever.add(fp)
            if suppressed and keys:
                for k in keys:
                    exercised[k] += 1
            elif suppressed:
                wrong.setdefault(fp, []).append(p.t)
            elif keys:
                missed.setdefault(fp, []).append(p.t)
        previous = label_sets
    # Alertmanager fills its source cache asynchronously: a disagreement must last two
    # polls in a row to count.
    for kind, table in (("muted although no edge names it", wrong), ("not muted", missed)):
        for fp, times in table.items():
            if _run_of(times, 2, polls):
                bad = {str(k): str(v) for k, v in json.loads(fp)}
                res.failures.append(f"{bad.get('alertname')} {kind} ({_short(bad)})")
    for r in rules:
        status = "proven" if exercised[r.key] else "unproven"
        detail = f"muted targets in {exercised[r.key]} polls"
        if not exercised[r.key]:
            detail = "no scenario made a target fire while its source fired"
            targets = sorted(
                a.name
                for a in alerts
                if a.service == r.service
                # The series' labels are not known here: the rule's name and service.
                and all(
                    m.matches({**a.labels, "alertname": a.name})
                    for m in r.target
                    if m.name in ("alertname", "service")
                )
            )
            if targets and all((r.service, n) in world.unproven for n in targets):
                detail = f"its targets cannot fire in this run ({targets[0]}: " + (
                    world.unproven[(r.service, targets[0])] + ")"
                )
        res.edges.append({"service": r.service, "edge": r.name, "status": status, "detail": detail})
    # 4. The webhook: what reached the receiver.
    notified: dict[str, tuple[float, dict[str, str]]] = {}
    for n in notifications:
        for a in n.get("alerts") or []:
            if a.get("status") == "firing":
                sent = labels_of(a)
                notified.setdefault(_fingerprint(sent), (0.0, sent))
    for fp, expected in always_expected.items():
        if expected and fp in notified:
            sent = notified[fp][1]
            res.failures.append(
                f"{sent.get('alertname')} was notified although muted from the start "
                f"({_short(sent)})"
            )
    # 5. The storm: per scenario, fired / muted / notified.
    rows: dict[tuple[str, str], dict[str, int]] = {}
    for fp, (t, fired_labels) in fired.items():
        row = rows.setdefault(
            (fired_labels.get("service", ""), _scenario_of(fired_labels, t, world, lengths)),
            {"fired": 0, "muted": 0, "notified": 0},
        )
        row["fired"] += 1
        row["muted"] += fp in muted_ever
        row["notified"] += fp in notified
        res.storm_alerts.append(
            {
                "service": fired_labels.get("service", ""),
                "scenario": _scenario_of(fired_labels, t, world, lengths),
                "alert": fired_labels.get("alertname", ""),
                "host_name": fired_labels.get("host_name", ""),
                "resource_gpu_id": fired_labels.get("resource_gpu_id", ""),
                "slo": fired_labels.get("slo", ""),
                "muted": fp in muted_ever,
                "muted_by": sorted(n for n in muted_by.get(fp, ()) if n),
                "mutable": fp in mutable_ever,
                "notified": fp in notified,
            }
        )
    res.storm = [
        {"service": svc, "scenario": scen, **counts} for (svc, scen), counts in sorted(rows.items())
    ]
    return res


def _episodes(polls: Sequence[Poll], rule: AlertRule, want: Mapping[str, str]) -> int:
    """How many times the alert started firing (absent or pending, then firing)."""
    count, before = 0, False
    for p in polls:
        now = any(
            a.get("state") == "firing"
            and labels_of(a).get("alertname") == rule.name
            and labels_of(a).get("service") == rule.service
            and all(labels_of(a).get(k) == v for k, v in want.items())
            for a in p.prom
        )
        count += now and not before
        before = now
    return count


def _run_of(times: Sequence[float], n: int, polls: Sequence[Poll]) -> bool:
    index = {p.t: i for i, p in enumerate(polls)}
    idx = sorted(index[t] for t in times if t in index)
    run = 1
    for a, b in itertools.pairwise(idx):
        run = run + 1 if b == a + 1 else 1
        if run >= n:
            return True
    return n <= 1 and bool(idx)


def _short(labels: Mapping[str, str]) -> str:
    keep = ("service", "host_name", "resource_gpu_id", "slo", "nccl_group_id")
    return ", ".join(f"{k}={labels[k]}" for k in keep if k in labels)


def scenarios_of(world: World) -> list[Scenario]:
    return world.scenarios
