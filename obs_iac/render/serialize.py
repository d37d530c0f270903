"""Bytes from artifacts: stable key order, fixed indentation, trailing newline, and no
timestamps or versions, so the same plan always gives the same bytes."""

from __future__ import annotations

import csv
import io
from typing import Any

import yaml

from obs_iac import conventions
from obs_iac.render.artifact import Artifact
from obs_iac.render.jsontext import dumps_indented

_BaseDumper: type = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Dumper(_BaseDumper):  # type: ignore[misc]
    pass


def _str(dumper: Any, value: str) -> Any:
    # Multi-line strings (PromQL, CSV payloads) as literal blocks: readable in review.
    if "\n" in value and not any(c in value for c in "\r\t") and not value.startswith(" "):
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _str)
_Dumper.add_representer(tuple, lambda d, v: d.represent_list(list(v)))


def dump_yaml(data: Any) -> str:
    text: str = yaml.dump(
        data,
        Dumper=_Dumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=False,
        width=4096,
        indent=2,
    )
    return text


def _header(artifact: Artifact, prefix: str) -> str:
    if not artifact.sources or len(artifact.sources) > 4:
        source = f"{len(artifact.sources) or 'the'} blueprints"
    else:
        source = ", ".join(artifact.sources)
    header = f"{prefix} {conventions.HEADER.format(source=source)}\n"
    if artifact.comment:
        header += f"{prefix} {artifact.comment}\n"
    return header


def serialize(artifact: Artifact) -> bytes:
    # The same bytes as dump_yaml, without PyYAML's representer for plain trees.
    from obs_iac.render.fastyaml import dump_simple

    fmt = artifact.format
    if fmt == "yaml":
        body = dump_simple(artifact.data)
        text = (_header(artifact, "#") if artifact.header else "") + body
    elif fmt == "yaml-multi":
        docs = [dump_simple(doc) for doc in artifact.data]
        text = (_header(artifact, "#") if artifact.header else "") + "---\n".join(docs)
    elif fmt == "json":
        text = dumps_indented(artifact.data) + "\n"
    elif fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
        writer.writerows(artifact.data)
        text = (_header(artifact, "#") if artifact.header else "") + buf.getvalue()
    else:
        text = str(artifact.data)
        if not text.endswith("\n"):
            text += "\n"
    return text.encode("utf-8")
