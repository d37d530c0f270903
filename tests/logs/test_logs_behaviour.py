"""The generated pipelines, run over realistic training logs with RE2 semantics.

Alloy/promtail cannot run here; ``obs_iac.logs_sim`` models the stages (see its module
docstring). The stages are read back from the *generated files*, so escaping or a lost
option in a generator changes the records and fails these tests.
"""

from __future__ import annotations

from collections import Counter

import pytest

from obs_iac.logs_sim import Entry, run_pipeline
from obs_iac.packs.logs import LogsPack, build_stages
from obs_iac.packs.logs.section import LogsSection
from obs_iac.pipeline import Render
from obs_iac.plan.model import LogStage
from tests.logs.logs_helpers import fixture_lines, stages_from_alloy, stages_from_promtail

POD = {
    "namespace": "recsys",
    "pod": "recomm-v2-trainer-1",
    "container": "trainer",
    # promtail's file target adds it; one file per pod, so it must not stay a label.
    "filename": "/var/log/pods/recsys_recomm-v2-trainer-1_5f0c/trainer/0.log",
}
AGENTS = ("alloy", "promtail")


def _stages(rendered: Render, agent: str, service: str) -> list[LogStage]:
    if agent == "alloy":
        return stages_from_alloy(rendered.files[f"alloy/{service}.alloy"].decode())
    return stages_from_promtail(rendered.files[f"promtail/{service}.yml"].decode())


def _record(records: list[Entry], first_line: str) -> Entry:
    found = [r for r in records if r.line.split("\n", 1)[0] == first_line]
    assert len(found) == 1, f"{len(found)} records start with {first_line!r}"
    return found[0]


def _cri_content(lines: list[str]) -> list[str]:
    """What the application wrote: the CRI framing removed, partial lines joined."""
    out: list[str] = []
    pending = ""
    for line in lines:
        _time, _stream, flag, content = line.split(" ", 3)
        pending += content
        if flag == "F":
            out.append(pending)
            pending = ""
    return out


@pytest.fixture(params=AGENTS)
def recomm_records(request: pytest.FixtureRequest, rendered: Render) -> list[Entry]:
    stages = _stages(rendered, request.param, "recomm-v2")
    return run_pipeline(stages, fixture_lines("recomm_v2.cri.log"), POD)


def test_every_line_lands_in_exactly_one_record(recomm_records: list[Entry]) -> None:
    written = Counter(_cri_content(fixture_lines("recomm_v2.cri.log")))
    stored = Counter(line for r in recomm_records for line in r.line.split("\n"))
    dropped = Counter(line for line in written if line.startswith("2024-01-31 12:00:05,512 DEBUG"))
    assert dropped, "the fixture has a DEBUG record for the drop rule"
    assert stored == written - dropped


def test_chained_traceback_logged_with_asctime_is_one_record(recomm_records: list[Entry]) -> None:
    record = _record(
        recomm_records,
        "2024-01-31 12:00:06,000 ERROR recomm.data: failed to load sample 8812, skipping",
    )
    lines = record.line.split("\n")
    assert lines[-1] == "recomm.data.SampleError: missing row 8812"
    assert "KeyError: 8812" in lines
    assert "The above exception was the direct cause of the following exception:" in lines
    assert lines.count("Traceback (most recent call last):") == 2
    assert record.labels["level"] == "ERROR"
    # The exception finally raised, not the first one of the chain.
    assert record.metadata["exception_class"] == "recomm.data.SampleError"


def test_following_record_is_not_swallowed(recomm_records: list[Entry]) -> None:
    after = _record(
        recomm_records, "2024-01-31 12:00:06,010 INFO recomm.train: step 101 loss 0.4307 lr 3.0e-04"
    )
    assert after.line.count("\n") == 0
    assert after.labels["level"] == "INFO"
    assert "exception_class" not in after.metadata


def test_rank_prefixed_traceback_stays_whole_despite_interleaving(
    recomm_records: list[Entry],
) -> None:
    record = _record(recomm_records, "[rank3]: Traceback (most recent call last):")
    lines = record.line.split("\n")
    assert all(line.startswith("[rank3]: ") for line in lines), "ranks must not mix"
    assert len(lines) == 9
    assert lines[-1].startswith("[rank3]: torch.OutOfMemoryError: CUDA out of memory.")
    # The CRI partial line was joined before multiline saw it.
    assert lines[-1].endswith("#environment-variables)")
    assert record.metadata["framework_pytorch_rank"] == "3"
    assert record.metadata["exception_class"] == "torch.OutOfMemoryError"
    assert record.metadata["cuda_oom_requested"] == "2.00 GiB"
    assert record.metadata["cuda_device"] == "1"
    # The rank is metadata, never a stream label: neither the temporary nor a real one.
    assert not {"obs_iac_rank", "framework_pytorch_rank", "pod"} & set(record.labels)


def test_lines_of_other_ranks_written_mid_traceback_are_their_own_records(
    recomm_records: list[Entry],
) -> None:
    step = _record(
        recomm_records, "2024-01-31 12:00:09,000 INFO recomm.train: step 102 loss 0.4301 lr 3.0e-04"
    )
    assert "\n" not in step.line
    warn = _record(
        recomm_records,
        "2024-01-31 12:00:09,020 WARNING recomm.train: rank 3 stopped reporting; "
        "waiting on allreduce",
    )
    assert "\n" not in warn.line and warn.labels["level"] == "WARNING"


def test_nccl_watchdog_lines_are_records_with_details(recomm_records: list[Entry]) -> None:
    first = (
        "[rank2]:[E131 12:10:09.456789012 ProcessGroupNCCL.cpp:616] [Rank 2] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=2043, OpType=ALLREDUCE, "
        "NumelIn=25165824, NumelOut=25165824, Timeout(ms)=600000) ran for 600072 "
        "milliseconds before timing out."
    )
    record = _record(recomm_records, first)
    assert "\n" not in record.line
    assert record.metadata["framework_pytorch_rank"] == "2"
    assert record.metadata["nccl_rank"] == "2"
    assert record.metadata["nccl_op_type"] == "ALLREDUCE"
    assert record.metadata["nccl_seq_num"] == "2043"
    assert record.metadata["nccl_timeout_ms"] == "600000"
    # std::terminate's report is one record of its own, not glued to a log line.
    term = _record(
        recomm_records, "terminate called after throwing an instance of 'c10::DistBackendError'"
    )
    assert term.line.split("\n")[-1].startswith("frame #1: c10d::ProcessGroupNCCL::WorkNCCL")
    assert "framework_pytorch_rank" not in term.metadata


def test_lines_before_the_first_record_pass_through(recomm_records: list[Entry]) -> None:
    stdout = [r for r in recomm_records if r.labels.get("stream") == "stdout"]
    assert [r.line.split(" ", 2)[:2] for r in stdout[:2]] == [["+", "exec"], ["Loading", "config"]]
    assert all("level" not in r.labels for r in stdout[:2])
    assert stdout[2].line.startswith("2024-01-31 12:10:16,000 INFO")


def test_stream_labels_are_bounded_and_carry_the_sla(recomm_records: list[Entry]) -> None:
    for record in recomm_records:
        assert record.labels["business_sla_id"] == "recomm_v2"
        assert record.labels["service_name"] == "recomm-v2"
        assert set(record.labels) <= {
            "business_sla_id",
            "service_name",
            "level",
            "stream",
            "k8s_namespace_name",
            "k8s_container_name",
        }
        assert record.metadata["k8s_pod_name"] == "recomm-v2-trainer-1"


@pytest.mark.parametrize("agent", AGENTS)
def test_torchrun_tee_local_ranks_are_separated(rendered: Render, agent: str) -> None:
    stages = _stages(rendered, agent, "image-classify-v3")
    records = run_pipeline(stages, fixture_lines("image_classify_v3.tee.cri.log"), POD)
    for record in records:
        prefixes = {line.split("]:", 1)[0] for line in record.line.split("\n")}
        assert len(prefixes) == 1, f"ranks mixed in {record.line!r}"
        assert record.metadata["framework_pytorch_local_rank"] == next(iter(prefixes))[-1]
    error = _record(
        records, "[default0]:2024-01-31 12:00:01,000 ERROR vision.eval: validation batch 17 failed"
    )
    lines = error.line.split("\n")
    assert lines[1] == "[default0]:Traceback (most recent call last):"
    assert lines[-2].startswith("[default0]:torch.OutOfMemoryError")
    assert lines[-1] == "[default0]:"
    assert error.labels["level"] == "ERROR"
    assert error.metadata["exception_class"] == "torch.OutOfMemoryError"
    assert error.metadata["cuda_oom_requested"] == "1.50 GiB"
    # Local rank 1's line written in the middle of rank 0's traceback stays rank 1's.
    step = _record(
        records,
        "[default1]:2024-01-31 12:00:01,050 INFO vision.train: epoch 3 step 501 loss 1.238 "
        "throughput 2207 img/s",
    )
    assert "\n" not in step.line
    warn = _record(
        records,
        "[default1]:[rank1]:[W131 12:00:02.500000000 reducer.cpp:1400] Warning: "
        "find_unused_parameters=True was specified in DDP constructor, but did not find any "
        "unused parameters in the forward pass.",
    )
    assert "\n" not in warn.line
    assert len(records) == 8  # 3 records of local rank 0, 5 of local rank 1


def _pipeline(section: LogsSection) -> list[LogStage]:
    return list(build_stages(section, "recomm_v2", "recomm-v2"))


def test_json_lines_under_docker() -> None:
    stages = _pipeline(LogsSection(runtime="docker", format="json", extract=("python-exception",)))
    records = run_pipeline(stages, fixture_lines("json.docker.log"), POD)
    assert [r.labels.get("level") for r in records] == ["INFO", "ERROR", "WARNING"]
    assert all(r.labels["stream"] == "stderr" for r in records)
    assert all(r.line.startswith("{") and "\n" not in r.line for r in records)


def test_python_basic_format_and_max_lines() -> None:
    lines = [
        "INFO:trainer:epoch 1",
        "ERROR:trainer:step failed",
        "Traceback (most recent call last):",
        '  File "train.py", line 3, in <module>',
        "ZeroDivisionError: division by zero",
        "WARNING:trainer:skipping batch",
    ]
    records = run_pipeline(_pipeline(LogsSection(runtime="none", format="python-basic")), lines)
    assert [r.line.split("\n")[0] for r in records] == [lines[0], lines[1], lines[5]]
    assert records[1].metadata["exception_class"] == "ZeroDivisionError"
    assert [r.labels["level"] for r in records] == ["INFO", "ERROR", "WARNING"]
    short = run_pipeline(
        _pipeline(LogsSection(runtime="none", format="python-basic", max_lines=2)), lines
    )
    # max_lines cuts the traceback into blocks of two lines; nothing is lost.
    assert [r.line.count("\n") + 1 for r in short] == [1, 2, 2, 1]


def test_the_seed_documents_firstline_would_glue_records() -> None:
    """Why firstline matches record starts: '^Traceback' glues the next log line on."""
    section = LogsSection(runtime="none", format="custom", record_start=r"^Traceback")
    lines = [
        "2024-01-31 12:00:00,000 ERROR x: failed",
        "Traceback (most recent call last):",
        "ValueError: bad",
        "2024-01-31 12:00:01,000 INFO x: next step",
    ]
    wrong = run_pipeline(_pipeline(section), lines)
    assert wrong[-1].line.endswith("ValueError: bad\n2024-01-31 12:00:01,000 INFO x: next step")
    right = run_pipeline(_pipeline(LogsSection(runtime="none")), lines)
    assert right[-1].line == "2024-01-31 12:00:01,000 INFO x: next step"


def test_rank_separation_is_what_keeps_ranks_apart() -> None:
    """Without the temporary rank label, interleaved tracebacks of two ranks merge."""
    lines = [
        "[rank0]: Traceback (most recent call last):",
        "[rank1]: Traceback (most recent call last):",
        "[rank0]: ValueError: a",
        "[rank1]: KeyError: 'b'",
    ]
    separated = run_pipeline(
        _pipeline(LogsSection(runtime="none", rank_prefix="pytorch-rank-prefix")), lines
    )
    assert sorted(r.line for r in separated) == [
        "[rank0]: Traceback (most recent call last):\n[rank0]: ValueError: a",
        "[rank1]: Traceback (most recent call last):\n[rank1]: KeyError: 'b'",
    ]
    assert sorted(r.metadata["exception_class"] for r in separated) == ["KeyError", "ValueError"]
    mixed = run_pipeline(_pipeline(LogsSection(runtime="none")), lines)
    assert any("[rank0]" in r.line and "[rank1]" in r.line for r in mixed)


def test_pack_is_registered_for_the_logs_section() -> None:
    assert LogsPack.sections == {"logs": LogsSection}
