"""``obs-iac init DIR``: a new GitOps repository that renders, checks and diffs from day one.

The CI recipes here are the same text docs/gitops.md shows, so the documented and the
scaffolded workflow cannot drift apart (a test holds them together).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from obs_iac.config import find_root, is_repo_root
from obs_iac.diagnostics import Diagnostic, InputError, Location, Severity
from obs_iac.scaffold.source import Source, constraints, running

GITHUB_WORKFLOW = """\
# obs-iac: render must be committed, lint must pass, and every pull request gets a
# comment that says what the change means for production. ci.sh installs the obs-iac
# pinned in requirements.txt into .venv; the diff uses that same obs-iac.
name: obs-iac
on:
  pull_request:
  push:
    branches: [main]
permissions:
  contents: read
  pull-requests: write # to post the diff comment
jobs:
  obs-iac:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
        with:
          fetch-depth: 0 # obs-iac diff --base needs the base branch's commits
      - uses: actions/setup-python@v5
        with:
          python-version: "3.11"
      - name: render --check, lint, test
        run: sh ci.sh
      - name: Diff against the base branch
        if: github.event_name == 'pull_request'
        run: >-
          .venv/bin/obs-iac diff --base "origin/${{ github.base_ref }}" --format markdown
          > obs-iac-diff.md
      - name: Post the diff on the pull request
        # Also when the diff step failed on a risk flag: the reviewer must see why.
        if: always() && github.event_name == 'pull_request' && hashFiles('obs-iac-diff.md') != ''
        env:
          GH_TOKEN: ${{ github.token }}
          PR: ${{ github.event.pull_request.number }}
        run: >-
          gh pr comment "$PR" --edit-last --body-file obs-iac-diff.md
          || gh pr comment "$PR" --body-file obs-iac-diff.md
"""

GITLAB_CI = """\
# obs-iac: render must be committed, lint must pass, and every merge request gets a
# note that says what the change means for production. ci.sh installs the obs-iac pinned
# in requirements.txt into .venv. OBS_IAC_GITLAB_TOKEN: a project access token with the
# `api` scope (CI_JOB_TOKEN cannot post notes), as a masked variable.
obs-iac:
  image: python:3.11
  rules:
    - if: $CI_PIPELINE_SOURCE == "merge_request_event"
    - if: $CI_COMMIT_BRANCH == $CI_DEFAULT_BRANCH
  variables:
    GIT_DEPTH: 0 # obs-iac diff --base needs the target branch's commits
  script:
    - sh ci.sh
    - |
      if [ -n "$CI_MERGE_REQUEST_IID" ]; then
        git fetch origin "$CI_MERGE_REQUEST_TARGET_BRANCH_NAME"
        status=0
        .venv/bin/obs-iac diff --base "origin/$CI_MERGE_REQUEST_TARGET_BRANCH_NAME" \\
          --format markdown > obs-iac-diff.md || status=$?
        if [ -s obs-iac-diff.md ]; then
          curl --fail -sS --request POST --header "PRIVATE-TOKEN: $OBS_IAC_GITLAB_TOKEN" \\
            --data-urlencode "body@obs-iac-diff.md" \\
            "$CI_API_V4_URL/projects/$CI_PROJECT_ID/merge_requests/$CI_MERGE_REQUEST_IID/notes"
        fi
        exit $status
      fi
  artifacts:
    when: always
    paths: [obs-iac-diff.md]
"""

CI_SCRIPT = """\
#!/bin/sh
# The whole CI of this repository, the same on every runner and on a laptop (the GitHub
# Actions and GitLab CI files call it): install the obs-iac pinned in requirements.txt
# into .venv, then check that generated/ is up to date, lint it, and run its tests.
set -eu
cd "$(dirname "$0")"
make venv
make check
"""

MAKEFILE = """\
# obs-iac for this repository. The first target that needs it creates .venv and installs
# exactly the obs-iac of requirements.txt, with the versions of constraints.txt, so every
# machine and CI renders with the same code.
# OBS_IAC: another obs-iac command instead of .venv's (e.g. `make check OBS_IAC=obs-iac`).
# BASE: what `make diff` compares with (a git ref).
PYTHON ?= python3
VENV ?= .venv
STAMP := $(VENV)/.obs-iac-installed
OBS_IAC ?= $(VENV)/bin/obs-iac
BASE ?= origin/main
# .venv is needed only when OBS_IAC is its own command.
NEEDS := $(if $(filter $(VENV)/bin/obs-iac,$(OBS_IAC)),$(STAMP))

.PHONY: venv render check diff lint pin

venv: $(STAMP)

# A changed pin rebuilds .venv from nothing, so it holds exactly what the files say.
$(STAMP): requirements.txt constraints.txt
\t$(PYTHON) -m venv --clear $(VENV)
\t$(VENV)/bin/python -m pip install --quiet -r requirements.txt -c constraints.txt
\ttouch $(STAMP)

# Render every blueprint into generated/ (commit the result with the blueprint change).
render: $(NEEDS)
\t$(OBS_IAC) render

# What CI runs (ci.sh): generated/ is up to date, lint passes, the generated tests pass.
check: $(NEEDS)
\t$(OBS_IAC) render --check
\t$(OBS_IAC) lint
\t@if $(OBS_IAC) test --help >/dev/null 2>&1; then $(OBS_IAC) test; \\
\telse echo "obs-iac test: not in this obs-iac release; skipped"; fi

# What this change means for production, against BASE.
diff: $(NEEDS)
\t$(OBS_IAC) diff --base $(BASE)

lint: $(NEEDS)
\t$(OBS_IAC) lint

# After editing requirements.txt: rewrite constraints.txt from what .venv then holds
# (which is then exactly the pin, so .venv is not rebuilt for it).
pin: $(STAMP)
\t{ echo "# The versions of obs-iac's dependencies this repository renders with (make pin)."; \\
\t  $(VENV)/bin/python -m pip freeze --exclude obs-iac; } > constraints.txt
\ttouch $(STAMP)
"""

PYPROJECT = """\
# A GitOps repository for obs-iac: blueprints in, generated configuration out. The obs-iac
# it renders with is pinned in requirements.txt (not here: this is no Python package).
[tool.obs-iac]
blueprints = "blueprints"
output = "generated"
"""

REQUIREMENTS = """\
# The obs-iac this repository renders with; `make venv` installs exactly this.
# {note}
{requirement}
"""

BLUEPRINT = '''\
"""Example service: replace the names, the SLA and the GPU fleet with your own.

One file per SLA-bound service; `make render` compiles it into DCGM collectors,
Prometheus rules and relabelling under generated/.
"""

from obs_iac import Framework, GpuFleet, service

service(
    name="example-training",
    team="ml-platform",
    sla_id="example_training",
    objective="Training checkpoints land at least every 30 minutes",
    runbook_base_url="https://runbooks.example.com/example-training",
    # training needs a framework section; "inference" and "batch" need an SLO instead
    # (see `obs-iac check`).
    workload="training",
    gpu=GpuFleet(
        model="H100-SXM5-80GB",
        count=8,
        driver_version="550.54.15",
        temperature_limit_celsius=85,
    ),
    # One PyTorch/NCCL job of 8 ranks on one node; its step time budget is the SLA.
    framework=Framework(world_size=8, ranks_per_node=8, step_time_budget_seconds=2.0),
)
'''

README = """\
# {name}

Observability as code with obs-iac: one blueprint per SLA-bound service in `blueprints/`;
everything under `generated/` is rendered from them.

- `make render`: render `generated/` (commit it together with the blueprint change); the
  first run creates `.venv` with the obs-iac pinned in `requirements.txt`
- `make check`, or `sh ci.sh` from a fresh clone: what CI runs (`generated/` up to date,
  lint, the generated tests)
- `make diff`: what the change means for production, against `origin/main`

To upgrade obs-iac, change `requirements.txt` (a wheel under `vendor/`, a git URL with a
tag, or a path), run `make pin`, `make render`, and commit all of it in one pull request:
the diff then shows what the new version changes.

Never edit `generated/` by hand: change the blueprint and run `make render`.
"""

GITIGNORE = """\
.venv/
__pycache__/
obs-iac-diff.md
# obs-iac's per-service render cache: local, safe to delete
.obs-iac-cache/
# held while obs-iac renders; staged files before they are swapped in
.obs-iac.lock
.obs-iac-staging/
"""


def files_for(name: str, ci: str, source: Source) -> dict[str, str]:
    files = {
        "blueprints/example_training.py": BLUEPRINT,
        "pyproject.toml": PYPROJECT,
        "requirements.txt": REQUIREMENTS.format(note=source.note, requirement=source.requirement),
        "constraints.txt": constraints(),
        "Makefile": MAKEFILE,
        "ci.sh": CI_SCRIPT,
        "README.md": README.format(name=name),
        ".gitignore": GITIGNORE,
    }
    if ci == "github":
        files[".github/workflows/obs-iac.yml"] = GITHUB_WORKFLOW
    elif ci == "gitlab":
        files[".gitlab-ci.yml"] = GITLAB_CI
    return files


def _project_name(directory: Path) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", directory.resolve().name).strip("-._")
    return name or "observability"


def _refuse(code: str, message: str, hint: str, where: Path) -> InputError:
    return InputError(
        [Diagnostic(code, Severity.ERROR, message, hint=hint, location=Location(str(where)))]
    )


def _git_work_tree(start: Path) -> Path | None:
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
    return None


def _check_target(directory: Path, force: bool) -> None:
    if directory.exists() and not directory.is_dir():
        raise _refuse(
            "init/not-a-directory",
            f"{directory} exists and is not a directory",
            "choose a new directory name",
            directory,
        )
    if directory.is_dir() and any(directory.iterdir()) and not force:
        raise _refuse(
            "init/not-empty",
            f"{directory} is not empty; obs-iac init will not mix into existing files",
            "choose an empty or new directory, or pass --force to write the scaffold files "
            "anyway (files with the same names are overwritten)",
            directory,
        )
    absolute = directory.resolve()
    # The nearest existing folder decides: the target itself may not exist yet.
    existing = next(p for p in (absolute, *absolute.parents) if p.is_dir())
    inside = find_root(existing, here_with_blueprints=False)
    if inside is not None:
        where = is_repo_root(inside)
        raise _refuse(
            "init/inside-repository",
            f"{directory} is inside the obs-iac repository {inside} ({where} there has "
            "the obs-iac settings)",
            f"add blueprints to {inside}/ instead, or scaffold outside it",
            directory,
        )
    git = _git_work_tree(existing)
    if git is not None and git != absolute and not force:
        raise _refuse(
            "init/inside-git",
            f"{directory} is inside the git work tree {git}; its CI files would sit in a "
            "subfolder, where GitHub and GitLab never run them",
            "scaffold a repository of its own, or pass --force for a monorepo subfolder "
            "(then call its ci.sh from the top-level CI)",
            directory,
        )


def scaffold_repo(
    directory: Path, force: bool = False, ci: str = "github", source: Source | None = None
) -> list[str]:
    """Writes the repository skeleton. Every check runs before the first file is written:
    a refused scaffold leaves nothing behind, not even the folder."""
    _check_target(directory, force)
    resolved = running() if source is None else source
    files = files_for(_project_name(directory), ci, resolved)
    for rel, text in sorted(files.items()):
        path = directory / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    (directory / "ci.sh").chmod(0o755)
    written = sorted(files)
    if resolved.wheel is not None:
        vendored = directory / "vendor" / resolved.wheel.name
        vendored.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(resolved.wheel, vendored)
        written = sorted([*written, f"vendor/{resolved.wheel.name}"])
    return written
