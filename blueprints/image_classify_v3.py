"""Image classification v3: distributed training on an H100 pool.

SLA: a training epoch completes within its budget so the daily model ships on time.
"""

from obs_iac import EdgeSpec, Framework, GpuFleet, Inhibitions, Logs, RateLimit, service
from obs_iac.packs.slo import ErrorRatioSli, LatencySli, Series, Slo

STEP_TIME = Series(
    name="image_classify_train_step_duration_seconds",
    type="histogram",
    unit="seconds",
    labels=("business_sla_id", "job", "pytorch_rank"),
    buckets=(0.1, 0.2, 0.3, 0.45, 0.6, 1.0, 2.0),
    help="Wall time of one training step (data load + forward + backward + optimizer).",
)
INFERENCE_LATENCY = Series(
    name="image_classify_inference_duration_seconds",
    type="histogram",
    unit="seconds",
    labels=("business_sla_id", "instance", "job"),
    buckets=(0.025, 0.05, 0.1, 0.2, 0.5, 1.0),
    help="Latency of one classification request.",
)
REQUESTS = Series(
    name="image_classify_requests_total",
    type="counter",
    unit="requests",
    labels=("business_sla_id", "instance", "job"),
    help="Classification requests received.",
)
FAILED_REQUESTS = Series(
    name="image_classify_request_errors_total",
    type="counter",
    unit="requests",
    labels=("business_sla_id", "instance", "job"),
    help="Classification requests answered with an error.",
)

service(
    name="image-classify-v3",
    team="vision",
    sla_id="image_classify_v3",
    objective="Daily model trained and published by 06:00 UTC; p95 step time under 450 ms",
    runbook_base_url="https://runbooks.example.com/image-classify-v3",
    gpu=GpuFleet(
        model="H100-SXM5-80GB",
        count=128,
        driver_version="550.54.15",
        dcgm_exporter_version="4.5.3-4.8.2",
        profiling=True,
        temperature_limit_celsius=87,
        extra_fields=("DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"),
    ),
    inhibitions=Inhibitions(
        add=(
            EdgeSpec(
                name="nvlink-drop-mutes-util-low",
                reason="A collective stalled on a degraded NVLink idles the GPUs waiting "
                "on it; the utilisation warning is a symptom of the link.",
                source_alerts=("GpuNvlinkThroughputDrop",),
                target_alerts=("GpuUtilizationLow",),
                equal=("business_sla_id", "host_name", "resource_gpu_id"),
            ),
        ),
    ),
    # torchrun --tee 3 prefixes every line with "[default<local_rank>]:"; the eight local
    # ranks of a node share one container stream.
    logs=Logs(
        runtime="cri",
        format="python-asctime",
        rank_prefix="torchrun-tee",
        rate_limit=RateLimit(rate=500, burst=2000),
    ),
    # The collector's prometheus exporter is scraped here, so resource attributes reach
    # Prometheus through resource_constant_labels instead of OTLP promotion.
    framework=Framework(
        world_size=128,
        ranks_per_node=8,
        collector_version="0.160.0",
        resource_attributes="collector-exporter",
        collector_metrics_target="otel-collector.vision.svc:8889",
        step_time_budget_seconds=0.45,
    ),
    slo=[
        Slo(
            name="step-latency",
            description="95 % of training steps finish within 450 ms.",
            objective=95.0,
            window="28d",
            sli=LatencySli(histogram=STEP_TIME, threshold_seconds=0.45),
            # Ticket only: a slow training step costs schedule, not users.
            page=False,
        ),
        Slo(
            name="inference-latency",
            description="99 % of classification requests are answered within 200 ms.",
            objective=99.0,
            window="30d",
            sli=LatencySli(histogram=INFERENCE_LATENCY, threshold_seconds=0.2),
            min_events=100,
        ),
        Slo(
            name="inference-errors",
            description="99.9 % of classification requests succeed.",
            objective=99.9,
            window="30d",
            sli=ErrorRatioSli(total=REQUESTS, bad=FAILED_REQUESTS),
            min_events=100,
        ),
    ],
)
