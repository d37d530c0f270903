from pathlib import Path

from obs_iac.testing import assert_deterministic, render_blueprints

from obs_iac_infiniband import InfinibandPack

BLUEPRINTS = Path(__file__).resolve().parent.parent / "blueprints"


def test_pack_contributes_rules_edge_and_row() -> None:
    result = render_blueprints(BLUEPRINTS)
    groups = [g for g in result.plan.rule_groups if g.pack == InfinibandPack.name]
    assert [g.name for g in groups] == ["obs-iac.llm-pretrain.infiniband"]
    edges = [e.name for e in result.plan.inhibit_edges if e.pack == InfinibandPack.name]
    assert edges == ["infiniband-port-down-inhibits-allreduce-slowness"]
    rules = result.files["prometheus/rules/llm-pretrain.rules.yml"].decode()
    assert "InfinibandPortDown" in rules and 'device=~"mlx5_0|mlx5_1|mlx5_2|mlx5_3"' in rules


def test_render_is_deterministic() -> None:
    assert_deterministic(BLUEPRINTS)
