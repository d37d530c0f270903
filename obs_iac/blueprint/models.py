"""Blueprint schema v1: what a platform team writes, once per SLA-bound service.

These models are the user-facing contract. They are versioned apart from the plan (the
internal IR), so the plan can change without breaking a single blueprint.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from obs_iac.escaping import Template, text_or_template
from obs_iac.labels import SLA_ID_PATTERN

SCHEMA_VERSION = 1

SERVICE_NAME_PATTERN = r"^[a-z][a-z0-9-]{0,62}$"
RUNBOOK_URL_PATTERN = r"^https?://[^\s\"'<>]+$"
if TYPE_CHECKING:
    _Objective = str | Template
    _RunbookUrl = str | Template
else:
    _Objective = text_or_template(Annotated[str, StringConstraints(min_length=1, max_length=500)])
    _RunbookUrl = text_or_template(Annotated[str, StringConstraints(pattern=RUNBOOK_URL_PATTERN)])
EXPORTER_VERSION_PATTERN = r"^(\d+\.\d+\.\d+)-(\d+\.\d+\.\d+)$"

# GPU families DCGM supports that a compute center is likely to run; a model string must
# start with one of them (e.g. "A100-SXM4-80GB").
GPU_FAMILIES = (
    "V100", "T4", "A10", "A16", "A30", "A40", "A100", "A800", "L4", "L20", "L40S", "L40",
    "H20", "H100", "H200", "H800", "GH200", "B200", "B300", "GB200", "GB300",
)  # fmt: skip


class BlueprintModel(BaseModel):
    """Base of every model a blueprint writes: frozen, unknown keys rejected, and strict
    types, so ``count="16"`` or ``profiling=1`` is an error rather than a silent coercion
    (pydantic's lax mode turns ``"16"`` into 16 and ``True`` into 1)."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True, strict=True)

    @model_validator(mode="before")
    @classmethod
    def _lists_as_tuples(cls, data: Any) -> Any:
        # Strict mode accepts only tuples for tuple fields; a list is what users (and
        # TOML) write, and it carries the same meaning, so it alone is converted.
        if isinstance(data, dict) and any(isinstance(v, list) for v in data.values()):
            return {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
        return data


class GpuFleet(BlueprintModel):
    """The GPUs a service runs on and the dcgm-exporter that watches them."""

    model: str = Field(description="GPU model, e.g. 'A100-SXM4-80GB' or 'H100-SXM5-80GB'.")
    count: int = Field(ge=1, le=100_000, description="Number of GPUs the service uses.")
    driver_version: str = Field(
        pattern=r"^\d{3}\.\d{2,3}(\.\d{2})?$",
        description="NVIDIA driver version on the nodes, e.g. '535.129.03'.",
    )
    dcgm_exporter_version: str = Field(
        default="4.5.3-4.8.2",
        pattern=EXPORTER_VERSION_PATTERN,
        description="dcgm-exporter release tag '<DCGM version>-<exporter version>'; decides "
        "which DCGM field names the exporter accepts and its host label spelling.",
    )
    profiling: bool = Field(
        default=False,
        description="Whether DCP profiling fields (DCGM_FI_PROF_*) are collected; needs "
        "SYS_ADMIN on the exporter and a GPU that supports the profiling metric groups.",
    )
    extra_fields: tuple[str, ...] = Field(
        default=(),
        description="DCGM fields to collect beyond those the generated rules and dashboards use.",
    )
    honor_labels: bool = Field(
        default=False,
        description="The exporter's ServiceMonitor honorLabels. The dcgm-exporter chart sets "
        "false, which renames the exporter's pod/namespace/container to exported_*.",
    )
    idle_threshold: float = Field(
        default=0.10,
        gt=0,
        lt=1,
        description="A GPU counts as idle (wasted) below this utilisation, as a 0-1 ratio.",
    )
    temperature_limit_celsius: int = Field(
        default=85, ge=40, le=120, description="GPU temperature that raises GpuTemperatureHigh."
    )
    nvlink_drop_ratio: float = Field(
        default=0.5,
        gt=0,
        lt=1,
        description="GpuNvlinkThroughputDrop fires when throughput falls by this share "
        "against one minute earlier.",
    )

    @field_validator("model")
    @classmethod
    def _known_family(cls, value: str) -> str:
        family = re.split(r"[-_ ]", value.upper(), maxsplit=1)[0]
        if family not in GPU_FAMILIES:
            raise ValueError(
                f"unknown GPU model {value!r}; expected one of the families "
                f"{', '.join(GPU_FAMILIES)} (optionally followed by '-<variant>')"
            )
        return value

    @property
    def dcgm_version(self) -> str:
        match = re.match(EXPORTER_VERSION_PATTERN, self.dcgm_exporter_version)
        assert match is not None
        return match.group(1)

    @property
    def exporter_version(self) -> str:
        match = re.match(EXPORTER_VERSION_PATTERN, self.dcgm_exporter_version)
        assert match is not None
        return match.group(2)


class Suppression(BlueprintModel):
    """Silences one lint finding for this service, with a reason and an optional expiry."""

    code: str = Field(
        pattern=r"^[a-z0-9-]+/[a-z0-9-]+$", description="Lint code, e.g. 'promql/label-flow'."
    )
    reason: str = Field(min_length=3, description="Why this finding is accepted.")
    target: str | None = Field(
        default=None, description="Alert or record name the suppression is limited to."
    )
    until: str | None = Field(
        default=None,
        pattern=r"^\d{4}-\d{2}-\d{2}$",
        description="ISO date after which the suppression expires (then a warning).",
    )


# What a service runs on its GPUs. It decides which conformance requirements and
# maturity items apply (docs/governance.md, "Workload kinds"); inference packs (issue 21)
# extend what each kind gets, never the names.
WorkloadKind = Literal["training", "inference", "batch"]
WORKLOAD_KINDS: tuple[WorkloadKind, ...] = ("training", "inference", "batch")
# A conformance requirement: "<dimension>/<requirement>", or a whole dimension.
CHECK_PATTERN = r"^[a-z]+(/[a-z0-9-]+)?$"


class Waiver(BlueprintModel):
    """Accepts one failing `obs-iac check` requirement for this service, with a reason and
    an optional expiry, like a lint suppression."""

    check: str = Field(
        pattern=CHECK_PATTERN,
        description="Requirement code, e.g. 'collection/otel-wiring', or a whole "
        "dimension ('storage'); `obs-iac check --format json` shows each failure's code.",
    )
    reason: str = Field(min_length=3, description="Why the service may go without it.")
    until: str | None = Field(
        default=None,
        pattern=r"^\d{4}-\d{2}-\d{2}$",
        description="ISO date after which the waiver expires (the check fails again).",
    )


class Acknowledgement(BlueprintModel):
    """Accepts one risk flag of ``obs-iac diff`` (e.g. a dropped canonical label), with why."""

    code: str = Field(
        pattern=r"^diff/[a-z0-9-]+$", description="Diff flag code, e.g. 'diff/label-dropped'."
    )
    reason: str = Field(min_length=3, description="Why the change is intended and safe.")
    target: str | None = Field(
        default=None, description="Object the acknowledgement is limited to (alert, label...)."
    )


class Service(BlueprintModel):
    """One SLA-bound service: the core fields every pack can rely on."""

    name: str = Field(
        pattern=SERVICE_NAME_PATTERN,
        description="Service name: lowercase letters, digits and '-'; used in file names.",
    )
    team: str = Field(
        pattern=r"^[a-z0-9][a-z0-9_-]{0,62}$", description="Owning team, as a routing label."
    )
    sla_id: str = Field(
        pattern=f"^{SLA_ID_PATTERN}$",
        description="The business.sla_id every signal of this service carries.",
    )
    # Text is literal everywhere it lands (alert annotations are Go templates, and a "{{"
    # in it is escaped); Template("...") is the one way to write template actions.
    objective: _Objective = Field(
        description="The SLA in words, e.g. 'model refreshed within 15 minutes'; literal "
        "text, or Template('...') for Go template actions in alert annotations.",
    )
    runbook_base_url: _RunbookUrl = Field(
        description="Base URL of the runbooks; alerts link to <base>/<AlertName>. Literal "
        "text, or Template('...') for Go template actions (e.g. {{ $labels.team }}).",
    )
    gpu: GpuFleet = Field(description="The GPU fleet profile.")
    workload: WorkloadKind = Field(
        default="training",
        description="What the service runs: training (distributed PyTorch/NCCL jobs; needs "
        "a framework section), inference (model serving) or batch (offline jobs). Decides "
        "which `obs-iac check` requirements and maturity items apply.",
    )
    waive: tuple[Waiver, ...] = Field(
        default=(), description="Accepted `obs-iac check` failures for this service."
    )
    suppress: tuple[Suppression, ...] = Field(
        default=(), description="Accepted lint findings for this service."
    )
    acknowledge: tuple[Acknowledgement, ...] = Field(
        default=(), description="Accepted risk flags of `obs-iac diff` for this change."
    )

    @field_validator("objective")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the objective must say something (it is blank)")
        return value

    @field_validator("runbook_base_url")
    @classmethod
    def _strip_slash(cls, value: str | Template) -> str | Template:
        if isinstance(value, Template):
            if not re.match(r"https?://", value.source):
                raise ValueError(f"{value.source!r} does not start with http:// or https://")
            return Template(value.source.rstrip("/"))
        return value.rstrip("/")


CORE_FIELDS = frozenset(Service.model_fields)


def service_schema(sections: dict[str, type[BaseModel]]) -> dict[str, Any]:
    """JSON Schema of a service() call: the core fields plus every installed pack section."""
    schema = Service.model_json_schema()
    defs = schema.setdefault("$defs", {})
    for name, model in sorted(sections.items()):
        sub = model.model_json_schema(ref_template="#/$defs/{model}")
        defs.update(sub.pop("$defs", {}))
        defs[model.__name__] = sub
        doc = (model.__doc__ or f"The {name} section.").strip().splitlines()[0]
        schema["properties"][name] = {"$ref": f"#/$defs/{model.__name__}", "description": doc}
    schema["title"] = f"obs-iac service blueprint v{SCHEMA_VERSION}"
    # pydantic drops a field's description next to a bare $ref; editors show the
    # referenced model's docstring instead, so copy it onto the property.
    for model_schema in (schema, *defs.values()):
        for prop in model_schema.get("properties", {}).values():
            ref = prop.get("$ref", "")
            if ref and "description" not in prop:
                target = defs.get(ref.rsplit("/", 1)[-1], {})
                if "description" in target:
                    prop["description"] = target["description"]
    return schema
