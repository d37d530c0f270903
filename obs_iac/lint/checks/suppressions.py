"""Suppressions that have outlived their expiry date."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

from obs_iac.diagnostics import Diagnostic, Location, Severity
from obs_iac.lint.checks import CorpusRule
from obs_iac.lint.engine import Corpus
from obs_iac.lint.suppress import expired
from obs_iac.plan import views
from obs_iac.plan.model import Plan
from obs_iac.plugins import LintContext, LintScope


class ExpiredSuppression(CorpusRule):
    code: ClassVar[str] = "lint/expired-suppression"
    # Whole plan, not per service: whether a date has passed changes without any input
    # changing, and per-service findings are cached.
    scope: ClassVar[LintScope] = "plan"
    default_severity: ClassVar[Severity] = Severity.WARNING
    description: ClassVar[str] = "A blueprint suppression whose `until` date has passed."

    def fleet_view(self, shard: Plan, ctx: LintContext) -> Any:
        # The engine's key holds the date.
        return views.services(shard, "source", "suppressions")

    def run(self, corpus: Corpus) -> Iterator[Diagnostic]:
        for svc, entry in expired(corpus.plan, corpus.today):
            target = f" for {entry['target']}" if entry.get("target") else ""
            yield Diagnostic(
                self.code,
                self.default_severity,
                f"the suppression of {entry['code']}{target} expired on {entry['until']}; "
                "its findings are reported again",
                hint=f"fix the findings, or renew it with a new `until` and a reason "
                f"(was: {entry['reason']!r})",
                location=Location(svc.source.file, svc.source.line),
                object_path=(svc.name, "suppress", str(entry["code"])),
                origin=self.code,
            )
