"""The slowest host (issue 31, scale/dp_host.host_slowdown; DDP since 2026-11-27, FSDP since 2026-12-06): the
expected maximum of N standard normals against its closed forms, and the slowdown's laws: 1 for one rank, never
smaller for more ranks, and only where the host sets the step."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, strategies as st

from habitat_trace import pipeline
from habitat_trace.ingest.trace import load
from habitat_trace.scale import dp_host
from tests.test_anchor import MLP_FIXTURE


@pytest.mark.parametrize("n, closed", [(1, 0.0), (2, 1 / math.sqrt(math.pi)), (3, 1.5 / math.sqrt(math.pi)),
                                       (4, 1.0294), (5, 1.1630)])
def test_the_expected_maximum_meets_its_closed_forms(n: int, closed: float) -> None:
    """e_2 = 1/sqrt(pi), e_3 = 3/(2 sqrt(pi)); e_4, e_5 from Tippett's (1925) tables."""
    assert dp_host.expected_max_normal(n) == pytest.approx(closed, abs=1e-4)


@given(st.integers(1, 600))
def test_more_ranks_never_run_the_host_faster(n: int) -> None:
    assert dp_host.host_slowdown(1) == 1.0
    assert 1.0 <= dp_host.host_slowdown(n) <= dp_host.host_slowdown(n + 1)


def test_a_launch_bound_step_follows_the_slowest_host_with_ddp_and_fsdp(monkeypatch) -> None:
    """The launch-bound MLP fixture: DDP at 8 ranks against the same plan on a host that slow by --cpu-speed; without
    the spread of the hosts' pace (HOST_CV 0) both strategies' steps are shorter."""
    trace = load(MLP_FIXTURE)

    def it(strategy: str, cpu_speed: float = 1.0, world: int = 8) -> float:
        opts = pipeline.Options.of(world_size=world, strategy=strategy, cpu_speed=cpu_speed)
        return pipeline.Run([trace], opts).baseline().ranks[0].headline.iteration_ms

    s = dp_host.host_slowdown(8)
    assert it("ddp") > it("ddp", world=1)
    assert it("ddp", cpu_speed=s) == pytest.approx(it("ddp", cpu_speed=1.0) / s, rel=0.03)  # host-bound: ~1/speed
    split = pipeline.Run([trace], pipeline.Options.of(world_size=8, strategy="ddp")).scale_out_split(None)
    assert split["host_work_ms"] > 0
    assert sum(split[k] for k in ("one_gpu_ms", "communication_ms", "host_work_ms", "interference_ms")) == \
        pytest.approx(split["iteration_ms"])
    ddp, fsdp = it("ddp"), it("fsdp")
    monkeypatch.setattr(dp_host, "HOST_CV", 0.0)
    assert it("ddp") < ddp and it("fsdp") < fsdp
