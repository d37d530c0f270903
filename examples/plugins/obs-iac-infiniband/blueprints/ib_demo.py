from obs_iac import GpuFleet, service

service(
    name="llm-pretrain",
    team="foundation",
    sla_id="llm_pretrain",
    objective="Pre-training keeps 40 % model FLOPs utilisation",
    runbook_base_url="https://runbooks.example.com/llm-pretrain",
    gpu=GpuFleet(
        model="H100-SXM5-80GB",
        count=512,
        driver_version="550.54.15",
        profiling=True,
    ),
    infiniband={"hcas": ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]},
)
