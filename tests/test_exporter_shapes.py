"""The exporter-shape catalogue, checked against the exporter's own test fixtures.

The expected texts below are hand-copied from NVIDIA/dcgm-exporter at the named tag (not
produced by obs-iac), so a wrong fact in exporter_shapes.toml fails here.
"""

from __future__ import annotations

import pytest

from obs_iac.catalog import dcgm
from obs_iac.catalog.exporter_shapes import (
    GpuDevice,
    PodAttribution,
    known_versions,
    render_exposition,
    shape,
    xid_message,
)
from obs_iac.diagnostics import InputError

# The device of the exporter's Test_render fixture (internal/pkg/rendermetrics/
# render_metrics_test.go getMetricsByCounterWithTestMetric): GPU 0, no PCI bus id.
FIXTURE_4_0 = GpuDevice(
    gpu=0,
    uuid="GPU-00000000-0000-0000-0000-000000000000",
    model_name="NVIDIA T400 4GB",
    hostname="testhost",
)


def _test_metric(tag: str, device: GpuDevice) -> str:
    """TEST_METRIC (not a DCGM field, empty help, gauge) as obs-iac renders it."""
    s = shape(tag)
    labels = s.series("DCGM_FI_DEV_GPU_TEMP", device)
    line = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return f"# HELP TEST_METRIC \n# TYPE TEST_METRIC gauge\nTEST_METRIC{{{line}}} 42\n"


def test_golden_4_0_0_matches_the_exporters_render_fixture() -> None:
    # NVIDIA/dcgm-exporter 4.0.0-4.0.1 internal/pkg/rendermetrics/render_metrics_test.go:72-75
    upstream = (
        "# HELP TEST_METRIC \n"
        "# TYPE TEST_METRIC gauge\n"
        'TEST_METRIC{gpu="0",UUID="GPU-00000000-0000-0000-0000-000000000000",pci_bus_id="",'
        'device="nvidia0",modelName="NVIDIA T400 4GB",Hostname="testhost"} 42\n'
    )
    assert _test_metric("4.0.0-4.0.1", FIXTURE_4_0) == upstream


def test_golden_4_5_3_matches_the_exporters_render_fixture() -> None:
    # NVIDIA/dcgm-exporter 4.5.3-4.8.2 internal/pkg/rendermetrics/render_metrics_test.go:74-77
    # (the fixture's UUID label name is "test-uuid" there; the exporter's own is "UUID").
    device = GpuDevice(
        gpu=0,
        uuid="GPU-test-uuid-0000-0000-0000-000000000000",
        model_name="Test GPU Model",
        hostname="testhost",
        device="testdevice",
    )
    upstream = (
        'TEST_METRIC{gpu="0",test-uuid="GPU-test-uuid-0000-0000-0000-000000000000",'
        'pci_bus_id="",device="testdevice",modelName="Test GPU Model",Hostname="testhost"} 42\n'
    )
    ours = _test_metric("4.5.3-4.8.2", device).splitlines(keepends=True)[2]
    assert ours == upstream.replace("test-uuid=", "UUID=")


def test_golden_main_after_4_8_2_spells_hostname_lowercase() -> None:
    # NVIDIA/dcgm-exporter d5e5f51 (#655) internal/pkg/rendermetrics/render_metrics_test.go:76
    device = GpuDevice(
        gpu=0,
        uuid="GPU-test-uuid-0000-0000-0000-000000000000",
        model_name="Test GPU Model",
        hostname="testhost",
        device="testdevice",
    )
    upstream = (
        'TEST_METRIC{gpu="0",UUID="GPU-test-uuid-0000-0000-0000-000000000000",'
        'pci_bus_id="",device="testdevice",modelName="Test GPU Model",hostname="testhost"} 42\n'
    )
    assert _test_metric("4.5.3-4.9.0", device).splitlines(keepends=True)[2] == upstream


@pytest.mark.parametrize(
    ("tag", "template"),
    [
        # pkg/dcgmexporter/pipeline.go migMetricsFormat at each tag, the GPU line with the
        # MIG and Hostname branches taken (hand-copied, values substituted).
        (
            "3.3.5-3.4.0",
            'gpu="1",UUID="GPU-a",device="nvidia1",modelName="NVIDIA A100-SXM4-80GB",'
            'GPU_I_PROFILE="1g.10gb",GPU_I_ID="7",Hostname="n1"',
        ),
        (
            "3.3.9-3.6.1",
            'gpu="1",UUID="GPU-a",pci_bus_id="00000000:07:00.0",device="nvidia1",'
            'modelName="NVIDIA A100-SXM4-80GB",GPU_I_PROFILE="1g.10gb",GPU_I_ID="7",Hostname="n1"',
        ),
    ],
)
def test_golden_3_x_matches_the_pipeline_template(tag: str, template: str) -> None:
    device = GpuDevice(
        gpu=1,
        uuid="GPU-a",
        model_name="NVIDIA A100-SXM4-80GB",
        hostname="n1",
        pci_bus_id="00000000:07:00.0",
        mig_profile="1g.10gb",
        mig_instance_id="7",
    )
    labels = shape(tag).series("DCGM_FI_DEV_GPU_TEMP", device)
    assert ",".join(f'{k}="{v}"' for k, v in labels.items()) == template


def test_xid_labels_arrive_in_3_3_6_with_the_exporters_messages() -> None:
    device = GpuDevice(gpu=0, uuid="GPU-a", model_name="H100", hostname="n1")
    before = shape("3.3.5-3.4.1").series("DCGM_FI_DEV_XID_ERRORS", device)
    assert "err_code" not in before and "err_msg" not in before
    after = shape("3.3.6-3.4.2").series(
        "DCGM_FI_DEV_XID_ERRORS", device, value_labels={"err_code": "79"}
    )
    # gpu_collector_test.go at 4.5.3-4.8.2 asserts err_code = the value, err_msg from
    # xidErrCodeToText; 79 is "GPU has fallen off the bus" in xid_errors.go.
    assert list(after)[-2:] == ["err_code", "err_msg"]
    assert after["err_msg"] == "GPU has fallen off the bus"
    assert xid_message(0) == "No Error"
    assert xid_message(999) == "Unknown Error"
    with pytest.raises(ValueError, match="pass err_msg"):
        xid_message(100)


def test_kubernetes_attributes_sort_with_err_labels_and_rename_without_honor_labels() -> None:
    device = GpuDevice(
        gpu=0, uuid="GPU-a", model_name="H100", hostname="n1", driver_version="550.54.15"
    )
    pod = PodAttribution("team-a", "trainer-0", "main", {"business_sla_id": "recomm_v2"})
    s = shape("4.5.3-4.8.2")
    plain = s.series(
        "DCGM_FI_DEV_XID_ERRORS", device, kubernetes=pod, value_labels={"err_code": "48"}
    )
    assert list(plain)[6:] == [
        "DCGM_FI_DRIVER_VERSION",
        "business_sla_id",
        "container",
        "err_code",
        "err_msg",
        "namespace",
        "pod",
    ]
    renamed = s.series("DCGM_FI_DEV_XID_ERRORS", device, kubernetes=pod, honor_labels=False)
    assert {"exported_pod", "exported_namespace", "exported_container"} <= set(renamed)
    assert "pod" not in renamed and renamed["err_code"] == "0"


def test_xid_count_has_a_zero_series_without_xid_and_one_per_code() -> None:
    device = GpuDevice(gpu=0, uuid="GPU-a", model_name="H100", hostname="n1")
    s = shape("4.5.3-4.8.2")
    zero = s.series("DCGM_EXP_XID_ERRORS_COUNT", device)
    assert zero["window_size_in_ms"] == "300000" and "xid" not in zero
    seen = s.series("DCGM_EXP_XID_ERRORS_COUNT", device, value_labels={"xid": "79"})
    assert list(seen)[-2:] == ["window_size_in_ms", "xid"]


def test_a_label_the_field_does_not_carry_is_refused() -> None:
    device = GpuDevice(gpu=0, uuid="GPU-a", model_name="H100", hostname="n1")
    with pytest.raises(ValueError, match="has no label"):
        shape("4.5.3-4.8.2").series("DCGM_FI_DEV_GPU_TEMP", device, value_labels={"xid": "1"})


def test_unknown_version_is_a_user_error_naming_the_known_ones() -> None:
    with pytest.raises(InputError) as caught:
        shape("2.4.6-2.6.10")
    assert "4.5.3-4.8.2" in (caught.value.diagnostics[0].hint or "")
    assert shape("4.8.2").tag == "4.5.3-4.8.2"


def test_exposition_writes_help_and_type_once_and_formats_values_like_the_exporter() -> None:
    device = GpuDevice(gpu=0, uuid="GPU-a", model_name="H100", hostname="n1")
    s = shape("4.5.3-4.8.2")
    temp = "DCGM_FI_DEV_GPU_TEMP"
    sm = "DCGM_FI_PROF_SM_ACTIVE"
    text = render_exposition(
        s,
        [
            (temp, s.series(temp, device), 81),
            (temp, s.series(temp, GpuDevice(1, "GPU-b", "H100", "n1")), 40),
            (sm, s.series(sm, device), 0.5),
        ],
    )
    lines = text.splitlines()
    # etc/default-counters.csv at 4.5.3-4.8.2:
    # "DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C)."
    assert lines[:2] == [
        f"# HELP {temp} GPU temperature (in C).",
        f"# TYPE {temp} gauge",
    ]
    assert sum(line.startswith(f"# HELP {temp}") for line in lines) == 1
    assert lines[2].endswith(" 81") and lines[3].endswith(" 40")
    # A double field prints with %f (gpu_collector.go toString).
    assert lines[-1].endswith(" 0.500000")


def test_catalogue_integrity() -> None:
    tags = known_versions()
    assert len(tags) == len(set(tags))
    assert "4.5.3-4.8.2" in tags
    catalog = dcgm.catalog()
    for tag in tags:
        s = shape(tag)
        assert s.host_label in ("Hostname", "hostname")
        # Every field the default CSV of that tag lists has a HELP and a TYPE.
        for name in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_XID_ERRORS"):
            help_text, prom_type = s.help_and_type(name)
            assert help_text and prom_type == catalog[name].prometheus_type
    assert [shape(t).has_pci_bus_id for t in ("3.3.6-3.4.2", "3.3.7-3.5.0")] == [False, True]
    assert shape("4.5.3-4.8.2").host_label == "Hostname"


def test_other_pseudo_fields_carry_their_own_labels_from_their_first_tag() -> None:
    device = GpuDevice(gpu=0, uuid="GPU-a", model_name="H100", hostname="n1")
    p2p = shape("4.5.3-4.8.2").series(
        "DCGM_EXP_P2P_STATUS", device, value_labels={"peer_gpu": "1", "link_status": "OK"}
    )
    assert list(p2p)[-2:] == ["link_status", "peer_gpu"]
    clock = shape("4.5.3-4.8.2").series("DCGM_EXP_CLOCK_EVENTS_COUNT", device)
    assert clock["window_size_in_ms"] == "300000"
    # The P2P collector arrived in 4.3.1-4.4.0: an older exporter has no such labels.
    assert shape("4.2.3-4.2.0").field_labels("DCGM_EXP_P2P_STATUS") == ()


def test_exposition_echoes_the_collectors_csv_it_runs_with() -> None:
    from pathlib import Path

    from obs_iac.catalog.exporter_shapes import read_collectors_csv

    root = Path(__file__).resolve().parent.parent
    text = (root / "generated/dcgm-exporter/recomm-v2/collectors.csv").read_text()
    collectors = read_collectors_csv(text)
    s = shape("4.5.3-4.8.2")
    device = GpuDevice(gpu=0, uuid="GPU-a", model_name="A100", hostname="n1")
    field = "DCGM_EXP_XID_ERRORS_COUNT"
    out = render_exposition(s, [(field, s.series(field, device), 0)], collectors=collectors)
    # obs-iac's CSV says gauge; the exporter's own default CSV comments it as counter.
    assert f"# TYPE {field} gauge" in out
    assert s.help_and_type(field)[1] == "counter"
    with pytest.raises(ValueError, match="3 fields"):
        read_collectors_csv("A, gauge, help, extra")
