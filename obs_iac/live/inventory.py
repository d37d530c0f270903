"""What the generated files promise: every alert of the rule files and every inhibit rule
of the Alertmanager file (with the edge name from its comment), and Alertmanager's
inhibition semantics, to say which alerts a set of firing alerts must mute."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


@dataclass(frozen=True)
class AlertRule:
    name: str
    service: str
    labels: Mapping[str, str]
    expr: str
    file: str


@dataclass(frozen=True)
class Matcher:
    name: str
    op: str
    value: str

    def matches(self, labels: Mapping[str, str]) -> bool:
        have = labels.get(self.name, "")
        if self.op == "=":
            return have == self.value
        if self.op == "!=":
            return have != self.value
        # Alertmanager anchors every regex: ^(?:...)$ (pkg/labels/matcher.go).
        hit = re.fullmatch(f"(?:{self.value})", have) is not None
        return hit if self.op == "=~" else not hit


_MATCHER = re.compile(r'^\s*([A-Za-z_][A-Za-z0-9_]*|"[^"]+")\s*(=~|!~|!=|=)\s*(.*?)\s*$')


def plain_name(name: str) -> str:
    """The judge reads every label in the classic spelling: under ``naming = "utf8"``
    the generated labels are dotted (``host.name``), and the rules, the alerts and the
    edges are all read through this one mapping, so both strategies are judged alike."""
    return name.replace(".", "_")


def parse_matcher(text: str) -> Matcher:
    match = _MATCHER.match(text)
    if match is None:
        raise ValueError(f"cannot read matcher {text!r}")
    name, op, raw = match.groups()
    value = json.loads(raw) if raw.startswith('"') else raw
    return Matcher(plain_name(name.strip('"')), op, str(value))


@dataclass(frozen=True)
class InhibitRule:
    name: str
    service: str
    source: tuple[Matcher, ...]
    target: tuple[Matcher, ...]
    equal: tuple[str, ...]

    @property
    def key(self) -> str:
        return f"{self.service}/{self.name}"

    def is_source(self, labels: Mapping[str, str]) -> bool:
        return all(m.matches(labels) for m in self.source)

    def is_target(self, labels: Mapping[str, str]) -> bool:
        return all(m.matches(labels) for m in self.target)

    def mutes(self, source: Mapping[str, str], target: Mapping[str, str]) -> bool:
        """Alertmanager's rule (inhibit/inhibit.go): a firing source whose ``equal``
        labels equal the target's (a missing label counts as empty), except that an alert
        matching both sides is never muted by one that matches both sides too."""
        if not (self.is_source(source) and self.is_target(target)):
            return False
        if any(source.get(k, "") != target.get(k, "") for k in self.equal):
            return False
        return not (self.is_source(target) and self.is_target(source))


_EDGE_COMMENT = re.compile(r"^# (\S+) \(([^,]+), pack ")


def load_inhibit_rules(path: Path) -> list[InhibitRule]:
    text = path.read_text(encoding="utf-8")
    names = [m.groups() for m in map(_EDGE_COMMENT.match, text.splitlines()) if m]
    doc = yaml.safe_load(text) or {}
    rules = []
    for i, raw in enumerate(doc.get("inhibit_rules") or []):
        name, service = names[i] if i < len(names) else (f"rule-{i + 1}", "")
        rules.append(
            InhibitRule(
                name=name,
                service=service,
                source=tuple(parse_matcher(m) for m in raw.get("source_matchers") or []),
                target=tuple(parse_matcher(m) for m in raw.get("target_matchers") or []),
                equal=tuple(plain_name(str(k)) for k in raw.get("equal") or ()),
            )
        )
    return rules


def load_alerts(rules_dir: Path) -> list[AlertRule]:
    out = []
    for path in sorted(rules_dir.glob("*.yml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        for group in doc.get("groups") or []:
            for rule in group.get("rules") or []:
                if "alert" not in rule:
                    continue
                labels = {plain_name(str(k)): str(v) for k, v in (rule.get("labels") or {}).items()}
                out.append(
                    AlertRule(
                        name=str(rule["alert"]),
                        service=labels.get("service", ""),
                        labels=labels,
                        expr=str(rule["expr"]),
                        file=str(path.name),
                    )
                )
    return out


def expected_muted(
    alerts: Sequence[Mapping[str, str]], rules: Sequence[InhibitRule]
) -> list[set[str]]:
    """For each alert, the keys of the rules that must mute it, given all of ``alerts``
    are firing (Alertmanager keeps muted alerts as sources too). Indexed by each rule's
    ``equal`` values, so a poll costs rules x alerts, not rules x alerts squared."""
    out: list[set[str]] = [set() for _ in alerts]
    for rule in rules:
        by_key: dict[tuple[str, ...], list[int]] = {}
        for i, a in enumerate(alerts):
            if rule.is_source(a):
                by_key.setdefault(tuple(a.get(k, "") for k in rule.equal), []).append(i)
        if not by_key:
            continue
        for j, target in enumerate(alerts):
            if not rule.is_target(target):
                continue
            key = tuple(target.get(k, "") for k in rule.equal)
            if any(i != j and rule.mutes(alerts[i], target) for i in by_key.get(key, ())):
                out[j].add(rule.key)
    return out


def labels_of(alert: Mapping[str, Any]) -> dict[str, str]:
    return {plain_name(str(k)): str(v) for k, v in (alert.get("labels") or {}).items()}
