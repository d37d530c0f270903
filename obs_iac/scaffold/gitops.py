"""``obs-iac init DIR``: a new GitOps repository that renders, checks and diffs from day one.

The CI recipes here are the same text docs/gitops.md shows, so the documented and the
scaffolded workflow cannot drift apart (a test holds them together).
"""

from __future__ import annotations

import re
from pathlib import Path

from obs_iac.diagnostics import Diagnostic, InputError, Location, Severity

GITHUB_WORKFLOW = """\
# obs-iac: render must be committed, lint must pass, and every pull request gets a
# comment that says what the change means for production.
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
      - run: pip install obs-iac
      - name: generated/ is up to date
        run: obs-iac render --check
      - name: Lint
        run: obs-iac lint
      - name: Diff against the base branch
        if: github.event_name == 'pull_request'
        run: >-
          obs-iac diff --base "origin/${{ github.base_ref }}" --format markdown
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
# note that says what the change means for production. OBS_IAC_GITLAB_TOKEN: a project
# access token with the `api` scope (CI_JOB_TOKEN cannot post notes), as a masked variable.
obs-iac:
  image: python:3.11
  rules:
    - if: $CI_PIPELINE_SOURCE == "merge_request_event"
    - if: $CI_COMMIT_BRANCH == $CI_DEFAULT_BRANCH
  variables:
    GIT_DEPTH: 0 # obs-iac diff --base needs the target branch's commits
  script:
    - pip install obs-iac
    - obs-iac render --check
    - obs-iac lint
    - |
      if [ -n "$CI_MERGE_REQUEST_IID" ]; then
        git fetch origin "$CI_MERGE_REQUEST_TARGET_BRANCH_NAME"
        status=0
        obs-iac diff --base "origin/$CI_MERGE_REQUEST_TARGET_BRANCH_NAME" \\
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

MAKEFILE = """\
# obs-iac targets for a GitOps repository; copy them into an existing Makefile as they are.
# OBS_IAC: the obs-iac command (e.g. `OBS_IAC=.venv/bin/obs-iac make check`).
# BASE: what `make diff` compares with (a git ref).
OBS_IAC ?= obs-iac
BASE ?= origin/main

.PHONY: render check diff lint

# Render every blueprint into generated/ (commit the result with the blueprint change).
render:
\t$(OBS_IAC) render

# What CI runs: generated/ is up to date and lint passes.
check:
\t$(OBS_IAC) render --check
\t@if $(OBS_IAC) lint --help >/dev/null 2>&1; then $(OBS_IAC) lint; \\
\telse echo "obs-iac lint: not in this obs-iac release; skipped"; fi

# What this change means for production, against BASE.
diff:
\t$(OBS_IAC) diff --base $(BASE)

lint:
\t$(OBS_IAC) lint
"""

PYPROJECT = """\
# A GitOps repository for obs-iac: blueprints in, generated configuration out.
[project]
name = "{name}"
version = "0.1.0"
requires-python = ">=3.11"
dependencies = ["obs-iac>=0.1"]

[tool.obs-iac]
blueprints = "blueprints"
output = "generated"
"""

BLUEPRINT = '''\
"""Example service: replace the names, the SLA and the GPU fleet with your own.

One file per SLA-bound service; `make render` compiles it into DCGM collectors,
Prometheus rules and relabelling under generated/.
"""

from obs_iac import GpuFleet, service

service(
    name="example-training",
    team="ml-platform",
    sla_id="example_training",
    objective="Training checkpoints land at least every 30 minutes",
    runbook_base_url="https://runbooks.example.com/example-training",
    gpu=GpuFleet(
        model="H100-SXM5-80GB",
        count=8,
        driver_version="550.54.15",
        temperature_limit_celsius=85,
    ),
)
'''

README = """\
# {name}

Observability as code with [obs-iac](https://pypi.org/project/obs-iac/): one blueprint per
SLA-bound service in `blueprints/`, everything under `generated/` is rendered from them.

- `make render`: render `generated/` (commit it together with the blueprint change)
- `make check`: what CI runs (`generated/` up to date, lint)
- `make diff`: what the change means for production, against `origin/main`

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


def files_for(name: str, ci: str) -> dict[str, str]:
    files = {
        "blueprints/example_training.py": BLUEPRINT,
        "pyproject.toml": PYPROJECT.format(name=name),
        "Makefile": MAKEFILE,
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


def scaffold_repo(directory: Path, force: bool = False, ci: str = "github") -> list[str]:
    """Writes the repository skeleton; refuses a non-empty directory unless ``force``."""
    if directory.exists() and not directory.is_dir():
        raise InputError(
            [
                Diagnostic(
                    "init/not-a-directory",
                    Severity.ERROR,
                    f"{directory} exists and is not a directory",
                    hint="choose a new directory name",
                    location=Location(str(directory)),
                )
            ]
        )
    if directory.is_dir() and any(directory.iterdir()) and not force:
        raise InputError(
            [
                Diagnostic(
                    "init/not-empty",
                    Severity.ERROR,
                    f"{directory} is not empty; obs-iac init will not mix into existing files",
                    hint="choose an empty or new directory, or pass --force to write the "
                    "scaffold files anyway (files with the same names are overwritten)",
                    location=Location(str(directory)),
                )
            ]
        )
    files = files_for(_project_name(directory), ci)
    for rel, text in sorted(files.items()):
        path = directory / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return sorted(files)
