"""Naming conventions (prometheus.io/docs/practices/naming and rules)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, ClassVar

from obs_iac.diagnostics import Diagnostic, Severity
from obs_iac.lint.checks import CorpusRule
from obs_iac.lint.engine import Corpus
from obs_iac.plan.memo import per_catalogue
from obs_iac.plugins import LintScope

if TYPE_CHECKING:
    from obs_iac.plan.model import MetricSpec

# Histogram and summary parts are counters named by their own convention.
COUNTER_SUFFIXES = ("_total", "_count", "_sum", "_bucket")
# level:metric_total:operations keeps the counter's name in the metric part.
COUNTER_NAME = re.compile(r"_(total|count|sum|bucket)(:|$)")
RECORD_FORMAT = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*:[a-zA-Z_][a-zA-Z0-9_]*:[a-zA-Z0-9_]+")
# Series whose names the exporter owns: renaming them breaks every dashboard that uses them.
EXPORTER_NATIVE_PREFIXES = ("DCGM_",)
EXPORTER_NATIVE_SOURCES = frozenset({"dcgm"})


def exporter_native(name: str, source: str) -> bool:
    return name.startswith(EXPORTER_NATIVE_PREFIXES) or source in EXPORTER_NATIVE_SOURCES


class CounterTotal(CorpusRule):
    code: ClassVar[str] = "naming/counter-total"
    # Per service: the recording-rule half reads the service's own groups. The catalogue
    # half reads plan.metrics, which every shard holds whole; each shard then makes the
    # same finding, which obs-iac reports once (findings are a set).
    scope: ClassVar[LintScope] = "service"
    default_severity: ClassVar[Severity] = Severity.WARNING
    description: ClassVar[str] = "A counter (catalogued or recorded) whose name lacks _total."

    def run(self, corpus: Corpus) -> Iterator[Diagnostic]:
        # Findings about the catalogue alone: worked out once per catalogue, not per shard.
        metrics = corpus.plan.metrics
        key = (type(self), self.code, self.default_severity)
        yield from per_catalogue(metrics, key, lambda: tuple(self._catalogue(metrics)))
        for unit, rule in corpus.rules():
            if rule.kind != "record" or COUNTER_NAME.search(rule.name):
                continue
            facts = corpus.catalogue.get(rule.name)
            if facts is None or facts.type != "counter":
                continue
            yield corpus.diag(
                self.code,
                self.default_severity,
                f"{rule.name} records a counter (the expression keeps counter semantics) "
                "but its metric part does not end in _total",
                unit,
                rule,
                hint="name it level:<metric>_total:operations, or record rate(...) instead "
                "and name it level:<metric>:rate5m",
            )

    def _catalogue(self, metrics: tuple[MetricSpec, ...]) -> Iterator[Diagnostic]:
        for spec in metrics:
            if str(spec.type) != "counter" or spec.source == "recording":
                continue
            if spec.name.endswith(COUNTER_SUFFIXES) or exporter_native(spec.name, spec.source):
                continue
            yield Diagnostic(
                self.code,
                self.default_severity,
                f"counter {spec.name} (from {spec.source}) does not end in _total",
                hint="name counters <name>_total; if an exporter owns the name, document the "
                "exception",
                object_path=("metrics", spec.name),
                origin=self.code,
            )


class RecordFormat(CorpusRule):
    code: ClassVar[str] = "naming/record-format"
    scope: ClassVar[LintScope] = "service"
    default_severity: ClassVar[Severity] = Severity.WARNING
    description: ClassVar[str] = "A recorded series not named level:metric:operations."

    def run(self, corpus: Corpus) -> Iterator[Diagnostic]:
        for unit, rule in corpus.rules():
            if rule.kind != "record" or not rule.name or RECORD_FORMAT.fullmatch(rule.name):
                continue
            yield corpus.diag(
                self.code,
                self.default_severity,
                f"recording rule {rule.name!r} is not named level:metric:operations",
                unit,
                rule,
                hint="e.g. job:http_requests:rate5m or gpu:dcgm_gpu_utilization:ratio; three "
                "colon-separated parts (Mimir's `mimirtool rules check` enforces the colons)",
            )
