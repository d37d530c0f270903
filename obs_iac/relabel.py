"""What Prometheus does to a scraped series' labels before it stores it.

Test inputs must be the series Prometheus really stores: the exporter's exposition (from
the exporter-shape catalogue), merged with the target's labels under ``honor_labels``,
then put through the generated ``metric_relabel_configs``. This module applies those
semantics so every generator's tests derive post-relabel series the same way; it is
checked against a real Prometheus scraping a catalogue exposition
(tests/test_relabel_sim.py).

Semantics, from prometheus/prometheus scrape/scrape.go (mutateSampleLabels) and
model/relabel/relabel.go (Process, relabel) of v2.42.0: target labels are merged first
(a clashing exposed label is kept as ``exported_<name>`` unless honor_labels); then the
rules run in order; a label whose value ends up empty is dropped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import lru_cache

from obs_iac.plan.model import RelabelRule

DEFAULT_SEPARATOR = ";"
DEFAULT_REGEX = "(.*)"
DEFAULT_REPLACEMENT = "$1"
_GO_TEMPLATE = re.compile(r"\$(?:\{([A-Za-z0-9_]+)\}|([A-Za-z0-9_]+))")


def merge_target_labels(
    exposed: Mapping[str, str], target: Mapping[str, str], *, honor_labels: bool
) -> dict[str, str]:
    """The sample's labels after the scrape adds the target's (job, instance, ...)."""
    out = dict(exposed)
    for name, value in target.items():
        if name not in out:
            out[name] = value
            continue
        if honor_labels:
            continue  # the exposed label wins
        renamed = f"exported_{name}"
        while renamed in out:
            renamed = f"exported_{renamed}"
        out[renamed] = out[name]
        out[name] = value
    return {k: v for k, v in out.items() if v != ""}


@lru_cache(maxsize=256)
def _anchored(regex: str) -> re.Pattern[str]:
    # Prometheus anchors every relabel regex: ^(?:regex)$.
    return re.compile(f"^(?:{regex})$", re.DOTALL)


def _expand(template: str, match: re.Match[str]) -> str:
    """Go's regexp.Expand: $name / ${name}; a name is the longest run of word characters,
    a number is a group index, anything unknown expands to nothing."""

    def sub(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        if name.isdigit():
            index = int(name)
            if index <= (match.re.groups or 0):
                return match.group(index) or ""
            return ""
        try:
            return match.group(name) or ""
        except IndexError:
            return ""

    return _GO_TEMPLATE.sub(sub, template.replace("$$", "\x00")).replace("\x00", "$")


def apply(labels: Mapping[str, str], rules: Sequence[RelabelRule]) -> dict[str, str] | None:
    """The labels after ``metric_relabel_configs``; None when a rule drops the series."""
    out = {k: v for k, v in labels.items() if v != ""}
    for rule in rules:
        regex = _anchored(rule.regex if rule.regex is not None else DEFAULT_REGEX)
        separator = rule.separator if rule.separator is not None else DEFAULT_SEPARATOR
        value = separator.join(out.get(name, "") for name in rule.source_labels)
        action = rule.action
        if action == "replace":
            match = regex.match(value)
            if match is None:
                continue
            target = _expand(rule.target_label or "", match)
            # Any non-empty name: Prometheus 2.x refuses a non-classic target_label when
            # it loads the config, and 3.x validates it under its UTF-8 name scheme
            # (model/relabel/relabel.go @v3.14.0, relabel: IsValidLabelName(target)),
            # so only an empty expansion is skipped at run time.
            if not target:
                continue
            result = _expand(
                rule.replacement if rule.replacement is not None else DEFAULT_REPLACEMENT, match
            )
            if result:
                out[target] = result
            else:
                out.pop(target, None)
        elif action == "keep":
            if regex.match(value) is None:
                return None
        elif action == "drop":
            if regex.match(value) is not None:
                return None
        elif action == "labeldrop":
            out = {k: v for k, v in out.items() if regex.match(k) is None}
        elif action == "labelkeep":
            out = {k: v for k, v in out.items() if regex.match(k) is not None}
        else:
            raise NotImplementedError(f"relabel action {action!r} is not simulated")
    return out
