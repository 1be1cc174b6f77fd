"""ROCm (HIP) traces: launch parameters that live on the runtime call, and which GPU a generic name means.

Contract: ``launch_params(gpu, calls, launch)`` returns the GPU table with grid/block/shared memory taken from the
launching ``hip*`` call where the kernel event has none, grids counted in workgroups (blocks), and registers marked
not recorded (``S.NONE``). Pure: returns a new frame. Kineto's two ROCm back ends write the same layout:
- roctracer (libkineto/src/RoctracerLogger.cpp, ``api_callback``): the launch call's row holds grid, block and
  shared memory; the kernel (``HIP_OP_DISPATCH_KIND_KERNEL``) row has only name, device, queue and times;
- rocprofiler-sdk (libkineto/src/RocprofLogger.cpp, ``extract_kernel_args``): the same, read by argument name.
Neither records registers per thread or occupancy.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from habitat_trace.ingest import schema as S

# Launch calls whose "grid" is the global work size in work-items, not workgroups. HIP declares
# hipExtModuleLaunchKernel(f, globalWorkSizeX/Y/Z, localWorkSizeX/Y/Z, ...) and hipHccModuleLaunchKernel the same
# (hip_ext.h); Kineto's roctracer path reads both through the hipModuleLaunchKernel argument union, so gridDimX
# holds globalWorkSizeX (RoctracerLogger.cpp, case HIP_API_ID_hipExtModuleLaunchKernel), and rocprofiler-sdk maps
# the argument named globalWorkSizeX onto the same grid field (RocprofLogger.cpp, extract_kernel_args).
WORK_ITEM_LAUNCHES = ("hipExtModuleLaunchKernel", "hipHccModuleLaunchKernel")
_GRID = (S.GRID_X, S.GRID_Y, S.GRID_Z)
_BLOCK = (S.BLOCK_X, S.BLOCK_Y, S.BLOCK_Z)


def is_rocm(devices: list[dict], hip_calls: bool) -> bool:
    """A ROCm trace: hip* runtime calls, or an AMD device in deviceProperties (64-wide wavefronts)."""
    names = " ".join(str(d.get("name", "")) for d in devices)
    return hip_calls or any(w in names for w in ("AMD", "Radeon", "Instinct"))


def launch_params(gpu: pd.DataFrame, calls: pd.DataFrame, launch: np.ndarray) -> pd.DataFrame:
    """Grid/block/shared memory from the launch call (row ``launch`` of ``calls``, -1 none) where the kernel
    event has no grid; work-item grids divided by the block (rounded up: HIP launches ceil(global / local)
    workgroups); registers per thread set to ``S.NONE`` (not recorded, unlike 0 = uses none)."""
    out = gpu.copy()
    has = (launch != S.NONE) & (out[S.CAT] == S.CAT_KERNEL).to_numpy()
    safe = np.maximum(launch, 0)
    no_grid = (out[S.GRID_X].to_numpy() <= 0) & has
    if len(calls) and S.GRID_X in calls:
        for col in (*_GRID, *_BLOCK, S.SHARED_MEM):
            mine = out[col].to_numpy()
            out[col] = np.where(no_grid, calls[col].to_numpy()[safe], mine)
        names = calls[S.NAME].to_numpy(dtype=object)[safe]
        work_items = no_grid & np.isin(names, WORK_ITEM_LAUNCHES)
        for g, b in zip(_GRID, _BLOCK):
            grid, block = out[g].to_numpy(), np.maximum(out[b].to_numpy(), 1)
            out[g] = np.where(work_items, -(-grid // block), grid)
    out[S.REGISTERS] = np.where((out[S.CAT] == S.CAT_KERNEL).to_numpy(), S.NONE, out[S.REGISTERS].to_numpy())
    return out
