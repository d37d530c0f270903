"""A stack older than the repository's declared minimum cannot load its generated
configuration (UTF-8 names need Prometheus 3.0, say): say so before starting anything,
as a user error (exit 2) naming the stack, the versions and the stack that fits, instead
of a stack that does not come up."""

from __future__ import annotations

from collections.abc import Sequence

from obs_iac.config import version_tuple
from obs_iac.diagnostics import Diagnostic, InputError, Severity
from obs_iac.toolchain import Tool


def check_minimums(
    stack: str,
    tools: Sequence[Tool],
    minimums: dict[str, str],
    naming: str,
) -> None:
    problems = []
    for tool in tools:
        want = minimums.get(tool.name)
        if want and version_tuple(tool.version)[:2] < version_tuple(want)[:2]:
            problems.append(
                Diagnostic(
                    "live/stack-below-minimum",
                    Severity.ERROR,
                    f"the {stack} stack runs {tool.name} {tool.version}, older than this "
                    f"repository's {tool.name}_min_version {want} (naming = {naming!r}); "
                    "its generated configuration is written for that version and up",
                    hint="run `obs-iac test --live --stack current` (Prometheus 3.x, "
                    "Alertmanager 0.35 from `make tools`), or lower the minimum in "
                    "pyproject.toml [tool.obs-iac]",
                )
            )
    if problems:
        raise InputError(problems)
