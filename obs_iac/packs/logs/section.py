"""The blueprint's ``logs`` section (schema v1), owned by the logs pack."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from obs_iac.blueprint.models import BlueprintModel
from obs_iac.labels import K8S_CONTAINER, K8S_NAMESPACE, K8S_POD

ErrorKind = Literal["cuda-oom", "nccl-timeout", "xid", "python-exception"]
ALL_ERRORS: tuple[ErrorKind, ...] = ("cuda-oom", "nccl-timeout", "xid", "python-exception")


class DropRule(BlueprintModel):
    """Drops whole records whose text matches an RE2 pattern (after multiline)."""

    expression: str = Field(description="RE2 pattern searched in the record.")
    reason: str = Field(
        pattern=r"^[a-z][a-z0-9_]{0,62}$",
        description="drop_counter_reason: how the dropped-lines counter labels these drops.",
    )


class RateLimit(BlueprintModel):
    # Neither Alloy nor promtail has an infinite rate; no limit is rate_limit=None.
    rate: float = Field(
        gt=0, allow_inf_nan=False, description="Lines per second the pipeline lets through."
    )
    burst: int = Field(ge=1, description="Lines allowed above the rate in a burst.")
    drop: bool = Field(
        default=True,
        description="Drop lines over the limit. False makes the agent wait instead, which "
        "holds back every stream behind the noisy one.",
    )


class Logs(BlueprintModel):
    """How a service's container logs are read, joined into records and labelled."""

    runtime: Literal["cri", "docker", "none"] = Field(
        default="cri",
        description="Container runtime line format: cri (containerd, CRI-O), docker "
        "(json-file), or none (lines arrive as the application wrote them).",
    )
    format: Literal["python-asctime", "python-basic", "json", "custom"] = Field(
        default="python-asctime",
        description="The application's record layout; 'custom' needs record_start.",
    )
    rank_prefix: Literal["none", "pytorch-rank-prefix", "torchrun-tee"] = Field(
        default="none",
        description="A per-process prefix that tells ranks sharing one container stream apart: "
        "PyTorch >= 2.3 '[rankN]: ' on tracebacks, or torchrun --tee '[default0]:'.",
    )
    record_start: str | None = Field(
        default=None,
        description="RE2 pattern that matches the first line of every record, anchored with "
        "^ (format='custom' only). Named groups are extracted; (?P<level>...) becomes a label.",
    )
    extract: tuple[ErrorKind, ...] = Field(
        default=ALL_ERRORS, description="Errors whose details go to structured metadata."
    )
    incoming_labels: dict[str, str] = Field(
        default_factory=lambda: {
            "namespace": K8S_NAMESPACE,
            "pod": K8S_POD,
            "container": K8S_CONTAINER,
        },
        description="Labels the log agent sets before the pipeline -> the canonical key each "
        "carries. Bounded keys stay stream labels (renamed canonically); high-cardinality "
        "ones move to structured metadata.",
    )
    stream_labels: tuple[str, ...] = Field(
        default=(),
        description="Further keys wanted as stream labels (canonical keys or extracted "
        "fields). Only bounded keys are allowed.",
    )
    static_labels: dict[str, str] = Field(
        default_factory=dict, description="Constant stream labels, e.g. {'cluster': 'gpu-a'}."
    )
    drop_labels: tuple[str, ...] = Field(
        default=("filename",),
        description="Incoming labels to remove. promtail and loki.source.file add "
        "'filename', which names one file per pod: as a stream label it would bring back "
        "the per-pod streams that moving the pod to structured metadata avoids.",
    )
    drop: tuple[DropRule, ...] = Field(default=(), description="Records to drop.")
    rate_limit: RateLimit | None = Field(default=None, description="Optional rate limit.")
    max_lines: int = Field(
        default=128, ge=2, le=10_000, description="Longest record, in lines (multiline)."
    )
    max_wait_time: str = Field(
        default="3s",
        pattern=r"^[1-9][0-9]*(ms|s|m)$",
        description="How long multiline waits for the next line of a record.",
    )
    oom_burst_threshold: int = Field(
        default=3,
        ge=1,
        description="CudaOutOfMemoryBurst fires when more OOM records than this arrive in 5m.",
    )

    @model_validator(mode="after")
    def _custom_needs_pattern(self) -> Logs:
        if self.format == "custom" and not self.record_start:
            raise ValueError("format='custom' needs record_start (an RE2 pattern)")
        if self.format != "custom" and self.record_start is not None:
            raise ValueError("record_start is only used with format='custom'")
        return self


# The name it had before it was exported as ``obs_iac.Logs``; the pack still uses it.
LogsSection = Logs
