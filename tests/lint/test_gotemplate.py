"""The Go template subset Prometheus rejects (messages as promtool 2.42 prints them)."""

from __future__ import annotations

import pytest

from obs_iac.lint.gotemplate import label_references, parse_error


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("{{ $labels.job ", "unclosed action"),
        ("{{/* note }}", "unclosed comment"),
        ("{{ end }}", "unexpected {{end}}"),
        ("{{ else }}", "unexpected {{else}}"),
        ("{{ if true }}x", "unexpected EOF"),
        ("{{}}", "missing value for command"),
        ("{{ | }}", 'unexpected "|" in command'),
        ("{{ (1 }}", "unclosed left paren"),
        ("{{ nosuch 1 }}", 'function "nosuch" not defined'),
        ("{{ tmpl }}", 'function "tmpl" not defined'),
        ("{{ $nope }}", 'undefined variable "$nope"'),
        ("{{ range $i := $labels }}{{ end }}{{ $i }}", 'undefined variable "$i"'),
    ],
)
def test_rejected(text: str, error: str) -> None:
    assert parse_error(text) == error


@pytest.mark.parametrize(
    "text",
    [
        "plain text }} with braces",
        "{{ if gt $value 1.0 }}high{{ else if eq $value 1.0 }}one{{ else }}low{{ end }}",
        "{{ range $k, $v := $labels }}{{ $k }}={{ $v }} {{ end }}",
        '{{ "}}" }}',
        "{{/* c */}}{{- $labels.job -}}",
        "{{ $value | humanizePercentage }} {{ $externalURL }} {{ .Labels.job }}",
        '{{ "{{" }} $labels.job }}',
    ],
)
def test_accepted(text: str) -> None:
    assert parse_error(text) is None


def test_label_references_only_inside_actions() -> None:
    text = 'GPU {{ $labels.a }} {{ index $labels "b.c" }} {{ "{{" }} $labels.literal }}'
    assert label_references(text) == ["a", "b.c"]
