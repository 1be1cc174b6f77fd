"""ROCm traces (issue 20): launch parameters from the hip* runtime call, work-item grids, registers recorded as
missing; the MI250 fixture (tests/data/README.md) and tiny inline traces in both Kineto ROCm layouts."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from habitat_trace.ingest import load
from habitat_trace.ingest import schema as S
from tests.conftest import DATA

AMD_FIXTURE = DATA / "amd_mi250_minitoy_rocm6.json.gz"
MI250_GCD = {"id": 0, "name": "AMD Radeon Graphics", "totalGlobalMem": 68702699520, "computeMajor": 9,
             "computeMinor": 0, "warpSize": 64, "numSms": 104, "maxSharedMemoryPerMultiProcessor": 65536}


def _tiny(tmp_path: Path, launch: str, grid: list[int], block: list[int]) -> Path:
    """One op, one launch call with grid/block (as Kineto's roctracer and rocprofiler-sdk loggers write it), one
    kernel event without them, joined by correlation."""
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0.0, "dur": 50.0,
         "args": {"External id": 7}},
        {"ph": "X", "cat": "cuda_runtime", "name": launch, "pid": 1, "tid": 1, "ts": 10.0, "dur": 5.0,
         "args": {"External id": 7, "correlation": 42, "kernel": "Cijk_Ailk_Bljk_SB_MT64x16x16", "grid": grid,
                  "block": block, "shared memory": 512}},
        {"ph": "X", "cat": "kernel", "name": "Cijk_Ailk_Bljk_SB_MT64x16x16", "pid": 2, "tid": 0, "ts": 20.0,
         "dur": 12.5, "args": {"External id": 7, "device": 0, "stream": 0, "correlation": 42,
                               "kind": "Dispatch Kernel"}},
    ]
    path = tmp_path / "tiny_rocm.json"
    path.write_text(json.dumps({"deviceProperties": [MI250_GCD], "traceEvents": events}))
    return path


@pytest.mark.parametrize("launch, grid, expected", [
    # hipExtModuleLaunchKernel's grid is the global work size in work-items: 512 x 8 work-items of 256-wide
    # workgroups are 2 x 8 workgroups (the HTA MI250 fixture's second Tensile GEMM)
    ("hipExtModuleLaunchKernel", [512, 8, 1], (2, 8, 1)),
    ("hipHccModuleLaunchKernel", [600, 1, 1], (3, 1, 1)),  # a partial workgroup still launches: ceil
    ("hipModuleLaunchKernel", [512, 8, 1], (512, 8, 1)),  # gridDimX is in blocks here
    ("hipLaunchKernel", [3, 1, 1], (3, 1, 1)),
])
def test_grid_comes_from_the_launch_call_in_workgroups(tmp_path: Path, launch: str, grid: list[int],
                                                       expected: tuple[int, int, int]) -> None:
    t = load(_tiny(tmp_path, launch, grid, [256, 1, 1]))
    k = t.gpu.iloc[0]
    assert t.vendor == "amd"
    assert (k[S.GRID_X], k[S.GRID_Y], k[S.GRID_Z]) == expected
    assert (k[S.BLOCK_X], k[S.BLOCK_Y], k[S.BLOCK_Z]) == (256, 1, 1) and k[S.SHARED_MEM] == 512
    assert k[S.REGISTERS] == S.NONE  # not recorded, which is not "uses no registers"
    assert np.isnan(k[S.CUPTI_OCCUPANCY]) and np.isnan(k[S.CUPTI_BLOCKS_PER_SM])


def test_mi250_fixture_ingests_with_launch_parameters() -> None:
    t = load(AMD_FIXTURE)
    kernels = t.gpu[t.gpu[S.CAT] == S.CAT_KERNEL]
    assert t.vendor == "amd" and len(kernels) == 14 and len(t.steps) == 2
    assert (kernels[S.GRID_X] > 0).all() and (kernels[S.BLOCK_X] > 0).all()
    assert (kernels[S.REGISTERS] == S.NONE).all()
    tensile = kernels[kernels[S.NAME].str.startswith("Cijk_")]
    assert tensile[S.LAUNCH_NAME].eq("hipExtModuleLaunchKernel").all()
    assert tensile[[S.GRID_X, S.GRID_Y]].values.tolist() == [[2, 1], [2, 8]]  # from 512 and 512 x 8 work-items
    assert set(tensile[S.KCLASS]) == {"gemm"}
    assert (t.gpu[S.OP] >= 0).all() and set(t.gpu[S.STEP]) == {0}  # all launched in ProfilerStep#1
    # hipMemcpyWithStream and hipDeviceSynchronize block the CPU like their CUDA twins
    kinds = dict(zip(t.calls[S.NAME], t.calls[S.SYNC_KIND]))
    assert kinds["hipMemcpyWithStream"] == "blocking_copy" and kinds["hipDeviceSynchronize"] == "device"


def test_nvidia_trace_keeps_its_registers() -> None:
    from tests.conftest import MLP_FIXTURE

    t = load(MLP_FIXTURE)
    assert t.vendor == "nvidia" and (t.gpu.loc[t.gpu[S.CAT] == S.CAT_KERNEL, S.REGISTERS] > 0).all()
