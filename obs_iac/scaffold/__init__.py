"""``obs-iac new pack|generator|lint-rule NAME``: a working plugin package skeleton.

The skeleton installs with pip, registers itself through the right entry-point group,
and ships a test (using ``obs_iac.testing``) that passes as generated.
"""

from __future__ import annotations

import re
from pathlib import Path

from jinja2 import Environment, PackageLoader, StrictUndefined

from obs_iac.diagnostics import Diagnostic, InputError, Location, Severity

KINDS = {
    "pack": ("obs_iac.packs", "pack.py.j2"),
    "generator": ("obs_iac.generators", "generator.py.j2"),
    "lint-rule": ("obs_iac.lint_rules", "lint_rule.py.j2"),
}
NAME = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")


def scaffold(kind: str, name: str, parent: Path) -> Path:
    if not NAME.fullmatch(name):
        raise InputError(
            [
                Diagnostic(
                    "scaffold/name",
                    Severity.ERROR,
                    f"plugin name {name!r} is not kebab-case",
                    hint="use lowercase letters, digits and single dashes, e.g. 'infiniband'",
                )
            ]
        )
    target = parent / f"obs-iac-{name}"
    if target.exists():
        raise InputError(
            [
                Diagnostic(
                    "scaffold/exists",
                    Severity.ERROR,
                    f"{target} already exists",
                    hint="choose another name or remove the folder",
                    location=Location(str(target)),
                )
            ]
        )
    group, template = KINDS[kind]
    module = "obs_iac_" + name.replace("-", "_")
    camel = "".join(part.capitalize() for part in name.split("-"))
    env = Environment(
        loader=PackageLoader("obs_iac.scaffold", "templates"),
        undefined=StrictUndefined,
        keep_trailing_newline=True,
    )
    values = {
        "kind": kind,
        "name": name,
        "module": module,
        "camel": camel,
        "group": group,
        "code": f"custom/{name}",
    }
    files = {
        "pyproject.toml": env.get_template("pyproject.toml.j2").render(values),
        "README.md": env.get_template("README.md.j2").render(values),
        f"src/{module}/__init__.py": env.get_template(template).render(values),
        f"tests/test_{module}.py": env.get_template(f"test_{template}").render(values),
    }
    for rel, text in files.items():
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return target
