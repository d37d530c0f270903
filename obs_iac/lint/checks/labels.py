"""Label spelling: a label the canonical model spells differently."""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

from obs_iac.diagnostics import Diagnostic, Severity
from obs_iac.lint.checks import CorpusRule
from obs_iac.lint.checks.promql import label_refs
from obs_iac.lint.engine import Corpus, canonical_suggestion, describe_ref
from obs_iac.plugins import LintScope


class DidYouMean(CorpusRule):
    code: ClassVar[str] = "labels/did-you-mean"
    # Reads only its own rule groups and dashboards; the catalogue is the fleet's in
    # every shard.
    scope: ClassVar[LintScope] = "service"
    default_severity: ClassVar[Severity] = Severity.ERROR
    description: ClassVar[str] = (
        "A label that does not exist where it is used, but is canonical under another "
        "spelling (gpu_id -> resource_gpu_id)."
    )

    def run(self, corpus: Corpus) -> Iterator[Diagnostic]:
        for unit, rule in corpus.rules():
            for ref in label_refs(corpus, rule):
                wanted = canonical_suggestion(ref, corpus.naming)
                if wanted is None:
                    continue
                yield corpus.diag(
                    self.code,
                    self.default_severity,
                    f"{rule.name}: {describe_ref(ref)}; did you mean {wanted!r}?",
                    unit,
                    rule,
                    hint=f"the canonical label model spells it {wanted!r} (relabelled from the "
                    "exporter's native labels); use that name",
                    at_expr=ref.context != "template",
                )
