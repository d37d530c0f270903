"""Record-start and extraction patterns for the log formats PyTorch training jobs write.

Every pattern here is RE2 (Go regexp) syntax, checked by the tests with google-re2.
A record start must match the *first line of every record*, never the error text:
matching ``^Traceback`` would glue every log line after a traceback onto it.
"""

from __future__ import annotations

from dataclasses import dataclass

LEVELS = "DEBUG|INFO|WARNING|ERROR|CRITICAL"

# logging's default asctime is "2024-01-31 12:00:00,123"; ISO 8601 "T" is accepted too.
ASCTIME = r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}"


@dataclass(frozen=True)
class FormatPreset:
    """The application's own record layout, without any process prefix."""

    name: str
    record_start: str  # unanchored fragment: what the first line of a record begins with
    level: str | None  # fragment after the record's prefix, with a (?P<level>) group
    description: str


FORMATS: dict[str, FormatPreset] = {
    "python-asctime": FormatPreset(
        "python-asctime",
        ASCTIME,
        # The first level word on the first line, wherever the format puts it.
        ASCTIME + rf"[^\n]*?\b(?P<level>{LEVELS})\b",
        "Python logging with %(asctime)s first, e.g. '2024-01-31 12:00:00,123 INFO ...'.",
    ),
    "python-basic": FormatPreset(
        "python-basic",
        rf"(?:{LEVELS}):",
        rf"(?P<level>{LEVELS}):",
        "logging.basicConfig's default '%(levelname)s:%(name)s:%(message)s' (no timestamp).",
    ),
    "json": FormatPreset(
        "json",
        r"\{",
        None,  # the json stage reads the level
        "One JSON object per line (python-json-logger, structlog JSONRenderer).",
    ),
}

# JMESPath: the common spellings of the level key in JSON loggers.
JSON_LEVEL = "level || levelname || severity"


# Records PyTorch itself starts, whatever the application's format. Each one begins a
# record of its own, so it is not glued onto the application's previous log line.
PYTORCH_STARTS: tuple[str, ...] = (
    # PyTorch >= 2.3 excepthook: every line of an uncaught traceback gets "[rankN]: ".
    r"\[rank\d+\]: Traceback \(most recent call last\):",
    # c10 (C++) log lines once the rank is known, e.g. "[rank1]:[E131 12:10:09.45 ...".
    r"\[rank\d+\]:\[[EWIF]",
    # torch's own Python logging (torchrun, elastic agent): "W0131 11:59:58.000000 140 ...".
    r"[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d+ +\d+ ",
    # std::terminate on an uncaught C++ exception (the NCCL watchdog's DistBackendError).
    r"terminate called after throwing an instance of ",
)


@dataclass(frozen=True)
class RankPrefix:
    """A per-process prefix some lines carry, which tells ranks apart in a shared stream."""

    name: str
    separation: str  # anchored, one named group: the rank
    rank_key: str  # the extracted key (and structured metadata key) of the rank
    prefix: str  # unanchored fragment matching the prefix itself, no groups
    on_every_line: bool  # torchrun --tee prefixes every line; the excepthook only tracebacks
    description: str


RANK_PREFIXES: dict[str, RankPrefix] = {
    "pytorch-rank-prefix": RankPrefix(
        "pytorch-rank-prefix",
        r"^\[rank(?P<framework_pytorch_rank>\d+)\]:",
        "framework_pytorch_rank",
        r"\[rank\d+\]: ?",
        False,
        "PyTorch >= 2.3 '[rankN]: ' on uncaught tracebacks and c10 log lines (global rank).",
    ),
    "torchrun-tee": RankPrefix(
        "torchrun-tee",
        r"^\[[A-Za-z_][A-Za-z0-9_-]*?(?P<framework_pytorch_local_rank>\d+)\]:",
        "framework_pytorch_local_rank",
        r"\[[A-Za-z_][A-Za-z0-9_-]*?\d+\]:",
        True,
        "torchrun --tee '[<role><local_rank>]:' on every line, e.g. '[default0]:'.",
    ),
}

# Patterns for the errors the pack can extract; each group lands in structured metadata.
TRACEBACK_HEAD = r"Traceback \(most recent call last\):"
EXCEPTION_CLASS = (
    r"(?P<exception_class>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
    r"(?:Error|Exception|Interrupt|Exit))(?::|$)"
)


def exception_pattern(prefix: str) -> str:
    """The class of the *last* exception of a record that holds a traceback.

    Greedy ``.*`` with (?s) makes RE2 prefer the last line that looks like an exception,
    which in a chained traceback is the one that was finally raised."""
    opt = f"(?:{prefix})?" if prefix else ""
    return rf"(?ms)\A.*^{opt}{TRACEBACK_HEAD}$.*^{opt}{EXCEPTION_CLASS}"


ERRORS: dict[str, str] = {
    # PyTorch: "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total ..."
    # (2.1+) and "... Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity ..." (older).
    "cuda-oom": r"CUDA out of memory\. Tried to allocate "
    r"(?P<cuda_oom_requested>[0-9.]+ [KMGTP]?i?B)(?:\. GPU | \(GPU )(?P<cuda_device>\d+)",
    # c10d watchdog: "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2,
    # OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for ..."; newer builds
    # write "[PG ID 0 PG GUID 0(default_pg) Rank 1] ...". The rank is within the group.
    "nccl-timeout": r"Rank (?P<nccl_rank>\d+)\] Watchdog caught collective operation timeout: "
    r"WorkNCCL\(SeqNum=(?P<nccl_seq_num>\d+), OpType=(?P<nccl_op_type>[A-Z_]+)[^\n]*?"
    r"Timeout\(ms\)=(?P<nccl_timeout_ms>\d+)\)",
    # Kernel log: "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen ..."
    "xid": r"NVRM: Xid \(PCI:(?P<pci_bus_id>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})\): "
    r"(?P<xid>\d+),",
}

# The literal text LogQL line filters look for (one record counts once after multiline).
ERROR_TEXT: dict[str, str] = {
    "cuda-oom": "CUDA out of memory",
    "nccl-timeout": "Watchdog caught collective operation timeout",
    "xid": "NVRM: Xid",
    "python-exception": "Traceback (most recent call last):",
}

# Extracted keys by cardinality: only bounded ones may ever become stream labels.
BOUNDED_EXTRACTED = frozenset({"level", "nccl_op_type"})
