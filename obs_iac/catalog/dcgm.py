"""The DCGM field catalogue (every ``DCGM_FI_*`` of DCGM 2.1.4 to 4.6.0) and what each
dcgm-exporter release accepts. Built from the project's reference CSV, shipped as data."""

from __future__ import annotations

import csv
import difflib
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

from obs_iac.config import version_tuple

# The exporter build whose accepted names were read off its pinned go-dcgm.
MEASURED_EXPORTER = "4.5.3-4.8.2"
PROMETHEUS_TYPES = ("gauge", "counter", "histogram", "summary", "label")


@dataclass(frozen=True, slots=True)
class DcgmField:
    name: str
    field_id: int
    value_type: str
    prometheus_type: str
    help: str
    status: str
    canonical_name: str
    first_seen: str
    unit: str
    accepted_by_measured_exporter: bool

    @property
    def is_profiling(self) -> bool:
        return self.name.startswith("DCGM_FI_PROF_") or 1000 <= self.field_id <= 1099

    @property
    def is_pseudo(self) -> bool:
        return self.status == "dcgm_exporter_pseudo_field"

    @property
    def exporter_help(self) -> str:
        """Help text the exporter's CSV parser can take: no commas, no quotes."""
        text = self.help or self.name
        text = text.replace(",", ";").replace('"', "").replace("'", "")
        return re.sub(r"\s+", " ", text).strip()


def _prometheus_type(row: dict[str, str]) -> str:
    for column in ("prometheus_type_in_default_counters", "commented_type_in_default_counters"):
        if row[column] in PROMETHEUS_TYPES:
            return row[column]
    if row["value_type"] == "string":
        return "label"
    return "gauge"


@cache
def catalog() -> dict[str, DcgmField]:
    text = resources.files("obs_iac.catalog").joinpath("dcgm_fields.csv").read_text("utf-8")
    fields: dict[str, DcgmField] = {}
    for row in csv.DictReader(text.splitlines()):
        fields[row["name"]] = DcgmField(
            name=row["name"],
            field_id=int(row["field_id"]),
            value_type=row["value_type"],
            prometheus_type=_prometheus_type(row),
            help=row["help"],
            status=row["status"],
            canonical_name=row["canonical_name_dcgm_4_6"],
            first_seen=row["first_seen_dcgm"],
            unit=row["unit"],
            accepted_by_measured_exporter=row["accepted_by_dcgm_exporter_4_5_3_4_8_2"] == "yes",
        )
    return fields


_GENERIC_TOKENS = frozenset({"DCGM", "FI", "DEV", "PROF", "EXP", ""})


def _tokens(name: str) -> set[str]:
    return set(name.split("_")) - _GENERIC_TOKENS


def _token_overlap(wanted: set[str], candidate: set[str]) -> float:
    """Jaccard overlap of the words of two names; a shared prefix counts half."""
    if not wanted:
        return 0.0
    hits = 0.0
    for w in wanted:
        if w in candidate:
            hits += 1
        elif any(
            min(len(c), len(w)) >= 4 and (c.startswith(w) or w.startswith(c)) for c in candidate
        ):
            hits += 0.5
    return hits / len(wanted | candidate)


def suggest(name: str, exporter_tag: str | None = None, limit: int = 3) -> list[str]:
    """The nearest real names (shared words first, then spelling), preferring ones the
    given exporter accepts."""
    wanted = name.upper()
    wanted_tokens = _tokens(wanted)
    matcher = difflib.SequenceMatcher(autojunk=False)
    matcher.set_seq2(wanted)
    scored: list[tuple[float, str]] = []
    for field in catalog().values():
        if field.is_pseudo or (exporter_tag is not None and not accepted(field, exporter_tag)):
            continue
        matcher.set_seq1(field.name)
        score = 0.6 * _token_overlap(wanted_tokens, _tokens(field.name)) + 0.4 * matcher.ratio()
        scored.append((score, field.name))
    scored.sort(key=lambda item: (-item[0], item[1]))
    return [n for score, n in scored[:limit] if score >= 0.2]


def accepted(field: DcgmField, exporter_tag: str) -> bool:
    """Whether a dcgm-exporter release '<dcgm>-<exporter>' accepts this field name."""
    if exporter_tag == MEASURED_EXPORTER:
        return field.accepted_by_measured_exporter
    dcgm = version_tuple(exporter_tag.split("-", 1)[0])
    if field.first_seen and version_tuple(field.first_seen) > dcgm:
        return False
    removed = re.fullmatch(r"removed_after_(.+)", field.status)
    return not (removed and dcgm > version_tuple(removed.group(1)))


def accepted_alias(field: DcgmField, exporter_tag: str) -> str | None:
    """Another name for the same field id that this exporter accepts."""
    for other in sorted(catalog().values(), key=lambda f: f.name):
        same_id = other.field_id == field.field_id and other.name != field.name
        if same_id and accepted(other, exporter_tag) and not other.is_pseudo:
            return other.name
    return None
