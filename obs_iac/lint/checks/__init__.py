"""The built-in lint checks, one LintRule plugin each."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, ClassVar

from obs_iac.diagnostics import Diagnostic
from obs_iac.lint.engine import Corpus, corpus_for
from obs_iac.plugins import LintContext, LintRule

if TYPE_CHECKING:
    from obs_iac.plan.model import Plan
    from obs_iac.render.artifact import Artifact


class CorpusRule(LintRule):
    """A check over the shared corpus (rule groups + catalogue + analyses)."""

    docs: ClassVar[str] = ""

    def check(
        self, plan: Plan, artifacts: tuple[Artifact, ...], ctx: LintContext
    ) -> Iterable[Diagnostic]:
        return list(self.run(corpus_for(plan, artifacts, ctx)))

    def run(self, corpus: Corpus) -> Iterator[Diagnostic]:
        raise NotImplementedError
