from obs_iac import GpuFleet, Suppression, service

service(
    name="svc-a",
    team="team-a",
    sla_id="svc_a",
    objective="Batch scored within 10 minutes",
    runbook_base_url="https://runbooks.example.com/svc-a",
    gpu=GpuFleet(model="A100-SXM4-80GB", count=8, driver_version="535.129.03"),
    suppress=(
        Suppression(
            code="naming/record-format",
            reason="legacy record names kept until the dashboards move",
            until="2026-12-31",
        ),
    ),
)
