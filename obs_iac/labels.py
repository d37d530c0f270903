"""The unified label model: canonical keys, declared once, spelled per backend.

Every signal obs-iac wires up carries the same canonical keys. A key is written the
OpenTelemetry way (``resource.gpu.id``); each backend gets one spelling of it, chosen by
the repository's naming strategy:

- ``classic`` (default): dots become underscores (``resource_gpu_id``), exactly what
  Prometheus's own OTLP translation produces, so OTLP-ingested and scraped series agree.
- ``utf8``: Prometheus 3 UTF-8 label names, quoted in PromQL (``"resource.gpu.id"``).

Loki only accepts ``[a-zA-Z_:][a-zA-Z0-9_:]*`` label names, so it always gets the
underscore spelling; high-cardinality keys go to structured metadata there.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from functools import lru_cache

from obs_iac.escaping import TEMPLATE_OPEN_ESCAPED as TEMPLATE_OPEN_ESCAPED
from obs_iac.escaping import go_string
from obs_iac.escaping import template_literal as template_literal


class Cardinality(enum.StrEnum):
    BOUNDED = "bounded"  # tens of values per tenant: safe as a Loki stream label
    HIGH = "high"  # per GPU, per rank, per pod: never a Loki stream label


class NamingStrategy(enum.StrEnum):
    CLASSIC = "classic"
    UTF8 = "utf8"


@dataclass(frozen=True, slots=True)
class CanonicalKey:
    key: str
    description: str
    value_pattern: str
    cardinality: Cardinality
    example: str

    @property
    def classic(self) -> str:
        return classic_name(self.key)

    def matches(self, value: str) -> bool:
        return re.fullmatch(self.value_pattern, value) is not None


SLA_ID = "business.sla_id"
GPU_ID = "resource.gpu.id"
HOST = "host.name"
K8S_NAMESPACE = "k8s.namespace.name"
K8S_POD = "k8s.pod.name"
K8S_CONTAINER = "k8s.container.name"
PYTORCH_RANK = "framework.pytorch.rank"
NCCL_GROUP = "nccl.group_id"
NCCL_RANK = "nccl.rank"

SLA_ID_PATTERN = r"[a-z][a-z0-9_]{0,62}"

CANONICAL_KEYS: tuple[CanonicalKey, ...] = (
    CanonicalKey(
        SLA_ID,
        "The business SLA a signal belongs to; the primary key that joins every layer.",
        SLA_ID_PATTERN,
        Cardinality.BOUNDED,
        "recomm_v2",
    ),
    CanonicalKey(
        GPU_ID,
        "The GPU within its host, as the driver names the device node (nvidia<N>).",
        r"nvidia[0-9]{1,3}",
        Cardinality.HIGH,
        "nvidia0",
    ),
    CanonicalKey(
        HOST,
        "The node the signal comes from (Kubernetes node name where there is one).",
        r"[A-Za-z0-9][A-Za-z0-9.\-]{0,252}",
        Cardinality.HIGH,
        "gpu-node-17",
    ),
    CanonicalKey(
        K8S_NAMESPACE,
        "The Kubernetes namespace of the workload using the GPU.",
        r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?",
        Cardinality.BOUNDED,
        "recsys",
    ),
    CanonicalKey(
        K8S_POD,
        "The Kubernetes pod of the workload using the GPU.",
        r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?",
        Cardinality.HIGH,
        "trainer-0",
    ),
    CanonicalKey(
        K8S_CONTAINER,
        "The container within the pod.",
        r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?",
        Cardinality.BOUNDED,
        "trainer",
    ),
    CanonicalKey(
        PYTORCH_RANK,
        "The global rank of a PyTorch distributed process.",
        r"0|[1-9][0-9]{0,5}",
        Cardinality.HIGH,
        "3",
    ),
    CanonicalKey(
        NCCL_GROUP,
        "The NCCL communicator (process group) a collective runs in.",
        r"[A-Za-z0-9_\-]{1,64}",
        Cardinality.HIGH,
        "dp0",
    ),
    CanonicalKey(
        NCCL_RANK,
        "The rank within its NCCL communicator.",
        r"0|[1-9][0-9]{0,5}",
        Cardinality.HIGH,
        "1",
    ),
)

KEYS_BY_NAME: dict[str, CanonicalKey] = {k.key: k for k in CANONICAL_KEYS}

_CLASSIC_INVALID = re.compile(r"[^a-zA-Z0-9_]")
_CLASSIC_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


# Keys come from a small fixed vocabulary (canonical keys, exporter labels) and are spelled
# hundreds of thousands of times in a large fleet; bounded, so odd inputs cannot grow it.
@lru_cache(maxsize=4096)
def classic_name(key: str) -> str:
    """The Prometheus OTLP translation of an attribute name (dots and others -> ``_``)."""
    name = _CLASSIC_INVALID.sub("_", key)
    if name[:1].isdigit():
        name = "key_" + name
    return name


def is_classic_label_name(name: str) -> bool:
    return _CLASSIC_LABEL.fullmatch(name) is not None


def canonical_for_spelling(name: str) -> CanonicalKey | None:
    """The canonical key that a backend label name spells, in either strategy."""
    for key in CANONICAL_KEYS:
        if name in (key.key, key.classic):
            return key
    return None


@dataclass(frozen=True, slots=True)
class LabelNaming:
    """Spells canonical keys for one backend under the repository's strategy."""

    strategy: NamingStrategy = NamingStrategy.CLASSIC

    def prom(self, key: str) -> str:
        """The label name as stored in Prometheus (YAML keys, relabel targets)."""
        if self.strategy is NamingStrategy.UTF8:
            return key
        return classic_name(key)

    def promql(self, key: str) -> str:
        """The label name as written inside PromQL (quoted when it is not classic)."""
        name = self.prom(key)
        return name if is_classic_label_name(name) else promql_string(name)

    def matcher(self, key: str, value: str, op: str = "=") -> str:
        return f"{self.promql(key)}{op}{promql_string(value)}"

    @staticmethod
    def loki(key: str) -> str:
        return classic_name(key)


# One escaper per output language lives in obs_iac.escaping; these names stay for the
# packs and plugins that import them from here.
promql_string = go_string
