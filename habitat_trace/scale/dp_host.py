"""The host work data parallelism adds to a step that a one-GPU trace cannot show, in a fixed host unit.

Contract: ``fsdp_hook_u(kind, nparams, fsdp2) -> float`` and ``fsdp2_optimizer_u(nparams, foreach_ops) -> float``: the
CPU time FSDP2 (``torch.distributed.fsdp.fully_shard``) spends in one of its per-module hooks, or stepping the
optimizer over DTensor parameters; the same for FSDP1's hooks; DDP_* what DDP's reducer spends per gradient and
issuing a bucket's all-reduce; in units of u = HOST_UNIT_NS, the median trivial-op time of the calibration hosts
(timeline/overhead.py). timeline/scaleout.py multiplies by it and lays the time on the host clock, whose speed is
the user's ``--cpu-speed`` (a host twice as fast at dispatching ops is twice as fast at FSDP2's Python hooks).
Until 2026-11-27 the unit was the trace's own u (the 10th percentile of its trivial ops); but that moves with the
workload's op mix more than with the host: over the one-GPU traces of one host session it spans 305-920 ns (CV
0.18-0.50 per session, the kernel-launch call 0.04-0.30), and a scale-out that priced the hooks with it was 16.2% off
over 167 measured rows against 14.6% with the fixed unit (each refitted in its unit; benchmarks/scaleout_eval.py).

Where the numbers come from. FSDP2 brackets every unit's work in record_functions (FSDP::pre_forward,
FSDP::post_forward, FSDP::pre_backward, RegisterPostBackwardFunctionBackward around FSDP::post_backward_*,
FSDP::root_post_backward_callback; torch/distributed/fsdp/_fully_shard/_fsdp_state.py and _fsdp_param_group.py,
torch 2.11), so their durations are measured in every rank trace. benchmarks/scaleout_fit.py reads them from the
FSDP2 rank traces collected by benchmarks/collect/collect_distributed.py (8 workloads, 2 and 4 ranks, two H100
hosts, 2026-11-26), takes out the profiler's own overhead inside each hook (timeline/overhead.py's per-op costs),
divides by HOST_UNIT_NS and fits cost = a + b x (parameters of the unit) per hook by least squares (the
parameter count is the length of the unit's fsdp::all_gather_copy_in / fsdp::chunk_cat tensor list): one
all-gather or reduce-scatter per unit (a), and a view, a DTensor or a copy per parameter (b). The optimizer's
extra time is DTensor dispatch per parameter per foreach op (torch/distributed/tensor/_dispatch.py runs sharding
propagation for every tensor of a list op). DDP's bucket: every c10d::allreduce_ of the DDP rank traces, the same
way; DDP's copy-out and forward as whole windows (scaleout_fit.window_rows: the reducer's C++ loop and DDP's Python
between its record_functions). Each coefficient refitted without each workload: benchmarks/results/scaleout/fit.md.
"""
from __future__ import annotations

import math
from functools import lru_cache

# The host unit u of every figure here: the median trivial-op time (timeline/overhead.py's u) of its 24 calibration
# traces (variant a, two H100 hosts), a fixed host, not the trace's own u (module doc); overhead.py's fallback u too
HOST_UNIT_NS = 468
# (a, b) per hook, in u: a per unit, b per parameter of the unit (benchmarks/results/scaleout/fit.md)
FSDP2_HOOK_U = {
    "pre_forward": (2574.0, 33.3),  # all-gather copy-in, the all-gather, copy-out into the unsharded parameters
    "post_forward": (228.0, 0.0),  # reshard: the sharded parameters set back
    "pre_backward": (1939.0, 40.3),  # the backward all-gather (and the prefetch of the next unit's)
    "post_backward": (1908.0, 62.1),  # gradients: chunk_cat, reduce-scatter, sharded DTensor gradients
}
# Once per step: the root's post-backward callback (waits queued, gradients finalized), the median over workloads
FSDP2_ROOT_CALLBACK_U = 3011.0
# The optimizer over DTensor parameters: per parameter per foreach op of the step (AdamW 9 foreach ops: ~123 u a
# parameter; SGD with momentum 3: ~41 u)
FSDP2_OPTIMIZER_U_PER_PARAM_OP = 13.7
# DDP: issuing one bucket's all-reduce from the reducer's autograd hook (c10d::allreduce_: record_param_comms, the
# NCCL launch and the event record/wait between the streams), per bucket, the median over workloads
DDP_BUCKET_U = 317.0
# DDP's reducer hook on each gradient (the AccumulateGrad node: mark_variable_ready and mul_out into the bucket,
# the one-GPU node's own cost, ~0 u, left in the trace)
DDP_GRAD_U = 22.0
# finalize_backward's copy_bucket_to_grad, per gradient: the whole window from the backward's last node to
# Optimizer.step less the one-GPU trace's same window, over the gradients (the record_functions alone, 11 u until
# 2026-11-27, missed the reducer's loop between them); leave one workload out 20.0-21.1
DDP_COPY_OUT_U = 21.0
# DistributedDataParallel.forward's own time, per step, outside the module's ops: _pre_forward (the reducer's
# prepare_for_forward, the buffers' broadcast set-up) and _post_forward (prepare_for_backward); leave one workload
# out 1712-2157
DDP_FORWARD_U = 1992.0
# DDP's broadcast of the module's buffers at every forward (broadcast_buffers=True, its default: distributed.py
# _sync_buffers -> _broadcast_coalesced; c10d comm.cpp broadcast_coalesced: per dtype a flatten, a broadcast from rank
# 0, an unflatten and a copy_ back into each buffer): (a, b) in u, a per step, b per buffer; the window from its first
# op to the module's first op in the DDP rank traces (scaleout_fit._buffer_sync: ResNet-50's 159 buffers, BERT's and
# Llama's 2), leave one workload out a 1544-1641, b 18.0-18.6
DDP_BUFFERS_U = (1586.0, 18.4)
# The ranks wait for the slowest host. Every collective starts when the last rank launches it (DDP's buckets, FSDP's
# all-gathers and reduce-scatters), so a launch-bound step runs at the pace of the slowest of N hosts, not of one: if
# each rank's host time per step varies independently with coefficient of variation c, the step is E[max of N] = (1 + c
# e_N) times the mean (e_N the expected maximum of N standard normals: Tippett, Biometrika 1925; e_2 = 1/sqrt(pi) =
# 0.564, e_4 = 1.029). c is measured where nothing synchronizes the ranks: the solo runs (every GPU runs the one-GPU
# step at once, ground_truth/h100x4-solo-20261126), the ranks' per-iteration sample CV, median over the iterations, of
# the launch-bound workloads (BERT-large, GPT-2 b2, Llama, ResNet-50 bf16; their step over 1.2x their GPU busy time) at
# 2 and 4 ranks: 0.048-0.122, median 0.104 (GPU-bound workloads 0.003-0.007: their GPUs set the step). Applied to the
# host clock of every strategy's rank (timeline/scaleout.scale_out): a GPU-bound step does not follow it. FSDP's too
# since 2026-12-06: its measured host-bound steps grow from 2 to 4 ranks (4-rank over 2-rank step, same session: 1.10 on
# average where the added host work exceeds the one-GPU step, 31 pairs; predicted 1.00 without this, 1.05 with it), and
# over the twenty-six sessions' 366 rows predicted from another host's one-GPU traces FSDP2 at 4 ranks went from -9.7%
# to -0.2% bias, all rows 12.0% -> 11.2% (docs/distributed.md, "The slowest host for FSDP too"). It was left out for
# FSDP on the reading that the fitted hook costs (FSDP2_HOOK_U) hold the waits for the peers; those are per unit and the
# same at every N, so they cannot carry the growth with N; the 2-rank rows moved +5.5% (-3.4% -> +2.1%).
HOST_CV = 0.104


@lru_cache(maxsize=None)
def expected_max_normal(n: int) -> float:
    """E[max of ``n`` independent standard normals]: the integral of x n phi(x) Phi(x)^(n-1) (midpoint rule over
    -12..12 in steps of 1/400; e_1 = 0, e_2 = 0.5642, e_4 = 1.0294)."""
    if n <= 1:
        return 0.0
    h, total = 1.0 / 400, 0.0
    for i in range(24 * 400):
        x = -12.0 + (i + 0.5) * h
        pdf = math.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
        cdf = 0.5 * (1 + math.erf(x / math.sqrt(2)))
        total += x * n * pdf * cdf ** (n - 1)
    return total * h


def ddp_buffers_u(nbuffers: int) -> float:
    """u DDP's buffer broadcast costs the host at a forward for ``nbuffers`` buffers (0 without buffers)."""
    a, b = DDP_BUFFERS_U
    return a + b * nbuffers if nbuffers > 0 else 0.0


def host_slowdown(world_size: int) -> float:
    """How much slower a rank's host runs its step than one GPU's: the slowest of ``world_size`` hosts (HOST_CV);
    1.0 for one rank."""
    return 1.0 + HOST_CV * expected_max_normal(int(world_size))


# FSDP1 (FullyShardedDataParallel): per unit, its record_functions _pre_forward, _post_forward, _pre_backward_hook
# (with the next unit's prefetch) and _post_backward_hook, the rate limiter's wait (limit_all_gathers) taken out;
# FSDP1 flattens a unit's parameters into one FlatParameter, so no per-parameter term
FSDP1_HOOK_U = {"pre_forward": (1338.0, 0.0), "post_forward": (448.0, 0.0), "pre_backward": (990.0, 0.0),
                "post_backward": (1430.0, 0.0)}


def fsdp_hook_u(kind: str, nparams: int, fsdp2: bool = True) -> float:
    """u one FSDP2 (or FSDP1) hook of ``kind`` (FSDP2_HOOK_U's keys) costs for a unit of ``nparams`` parameters."""
    a, b = (FSDP2_HOOK_U if fsdp2 else FSDP1_HOOK_U)[kind]
    return a + b * max(int(nparams), 0)


def fsdp2_optimizer_u(nparams: int, foreach_ops: int) -> float:
    """u the optimizer's step over ``nparams`` DTensor parameters adds, with ``foreach_ops`` foreach ops a step."""
    return FSDP2_OPTIMIZER_U_PER_PARAM_OP * max(int(nparams), 0) * max(int(foreach_ops), 1)
