"""Recommendation model v2: nightly-to-continuous retraining on an A100 pool.

SLA: the serving model is refreshed within 15 minutes of new training data landing.
"""

from obs_iac import GpuFleet, service
from obs_iac.packs.slo import FreshnessSli, LatencySli, Series, Slo

# Series the serving stack exports; every one carries business_sla_id.
MODEL_REFRESHED = Series(
    name="recomm_model_last_success_timestamp_seconds",
    type="gauge",
    unit="timestamp_seconds",
    labels=("business_sla_id", "instance", "job"),
    help="Unix time at which the serving fleet last loaded a freshly trained model.",
)
INFERENCE_LATENCY = Series(
    name="recomm_inference_duration_seconds",
    type="histogram",
    unit="seconds",
    labels=("business_sla_id", "instance", "job", "model_version"),
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
    help="Latency of one recommendation request.",
)

service(
    name="recomm-v2",
    team="recsys",
    sla_id="recomm_v2",
    objective="Recommendation model refreshed within 15 minutes of new data",
    runbook_base_url="https://runbooks.example.com/recomm-v2",
    gpu=GpuFleet(
        model="A100-SXM4-80GB",
        count=64,
        driver_version="535.129.03",
        dcgm_exporter_version="4.5.3-4.8.2",
        profiling=True,
        # The source document's "SM stall" field does not exist in DCGM; SM occupancy
        # and DRAM activity are the real profiling fields closest to what it wanted.
        extra_fields=(
            "DCGM_FI_DEV_MEM_COPY_UTIL",
            "DCGM_FI_PROF_SM_OCCUPANCY",
            "DCGM_FI_PROF_DRAM_ACTIVE",
        ),
    ),
    slo=[
        Slo(
            name="model-freshness",
            description="The serving model is refreshed within 15 minutes.",
            objective=99.5,
            window="28d",
            sli=FreshnessSli(last_success=MODEL_REFRESHED, max_age="15m"),
        ),
        Slo(
            name="inference-latency",
            description="Recommendations are served within 100 ms.",
            objective=99.0,
            window="28d",
            sli=LatencySli(histogram=INFERENCE_LATENCY, threshold_seconds=0.1),
            min_events=100,
        ),
    ],
)
