"""honorLabels: true keeps the exporter's pod/namespace/container; a hypothetical newer
exporter tag (4.5.3-4.9.0) spells the host label `hostname`."""

from obs_iac import GpuFleet, service

service(
    name="batch-l40s",
    team="batch",
    sla_id="batch_l40s",
    objective="Nightly batch finished by 07:00 UTC",
    runbook_base_url="https://runbooks.example.com/batch-l40s",
    gpu=GpuFleet(
        model="L40S",
        count=32,
        driver_version="550.54.15",
        dcgm_exporter_version="4.5.3-4.9.0",
        honor_labels=True,
    ),
)
