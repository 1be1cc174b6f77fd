"""Column names and dtypes of the tables that ingest builds; the one place they are spelled.

Times are int64 nanoseconds on the trace's own clock (Kineto's µs floats, converted once).
Row positions are stable: ``event`` is the index of the source event in ``traceEvents`` so
emit can rewrite it; ``op``/``parent``/``launch`` columns are row positions in other tables (-1 = none).
"""
from __future__ import annotations

NONE = -1  # "no row" in every integer reference column

# --- normalized categories (Kineto 2.x spelling, with the 2021 spelling mapped onto them) ---
CAT_KERNEL = "kernel"
CAT_MEMCPY = "gpu_memcpy"
CAT_MEMSET = "gpu_memset"
CAT_OP = "cpu_op"
CAT_ANNOTATION = "user_annotation"
CAT_GPU_ANNOTATION = "gpu_user_annotation"
CAT_RUNTIME = "cuda_runtime"
CAT_DRIVER = "cuda_driver"
CAT_SYNC = "cuda_sync"
CAT_PYTHON = "python_function"
CAT_FLOW_LAUNCH = "ac2g"
CAT_FLOW_FWDBWD = "fwdbwd"

CATEGORY_ALIASES = {
    "Kernel": CAT_KERNEL,
    "Memcpy": CAT_MEMCPY,
    "Memset": CAT_MEMSET,
    "Operator": CAT_OP,
    "Runtime": CAT_RUNTIME,
    "Driver": CAT_DRIVER,
    "async": CAT_FLOW_LAUNCH,  # 2021 format: launch flows are cat "async", name "launch"
}
GPU_CATEGORIES = (CAT_KERNEL, CAT_MEMCPY, CAT_MEMSET)
OP_CATEGORIES = (CAT_OP, CAT_ANNOTATION)
CALL_CATEGORIES = (CAT_RUNTIME, CAT_DRIVER)

# --- shared columns ---
EVENT = "event"  # index into traceEvents
NAME = "name"
CAT = "cat"
PID = "pid"
TID = "tid"
TS = "ts_ns"
DUR = "dur_ns"
END = "end_ns"
CORRELATION = "correlation"
EXTERNAL_ID = "external_id"
STEP = "step"  # row in the steps table

# --- GPU events (kernels, copies, sets) ---
DEVICE = "device"
STREAM = "stream"
GRID_X, GRID_Y, GRID_Z = "grid_x", "grid_y", "grid_z"
BLOCK_X, BLOCK_Y, BLOCK_Z = "block_x", "block_y", "block_z"
REGISTERS = "registers_per_thread"  # NONE (-1) = not recorded (ROCm traces); 0 = none or unknown (CUPTI)
SHARED_MEM = "shared_mem_bytes"
BYTES = "bytes"
CUPTI_BLOCKS_PER_SM = "cupti_blocks_per_sm"
CUPTI_WARPS_PER_SM = "cupti_warps_per_sm"
CUPTI_OCCUPANCY = "cupti_occupancy_pct"
LAUNCH = "launch"  # row in the calls table
LAUNCH_NAME = "launch_name"
LAUNCH_TS = "launch_ts_ns"
LAUNCH_DUR = "launch_dur_ns"
OP = "op"  # innermost enclosing cpu op (row in the ops table)
OP_NAME = "op_name"
ROOT_OP = "root_op"  # outermost op below the ProfilerStep annotation
ROOT_OP_NAME = "root_op_name"
KCLASS = "kclass"  # kernel class, see ingest.classify

GPU_INT_COLUMNS = (
    EVENT, DEVICE, STREAM, TS, DUR, CORRELATION, EXTERNAL_ID, GRID_X, GRID_Y, GRID_Z,
    BLOCK_X, BLOCK_Y, BLOCK_Z, REGISTERS, SHARED_MEM, BYTES, LAUNCH, LAUNCH_TS, LAUNCH_DUR,
    OP, ROOT_OP, STEP,
)

# --- CPU ops and annotations ---
PARENT = "parent"
DEPTH = "depth"
INPUT_DIMS = "input_dims"
INPUT_TYPES = "input_types"
CONCRETE_INPUTS = "concrete_inputs"  # scalar arguments as strings (stride, padding, is_causal, ...)
SEQUENCE = "sequence"  # autograd "Sequence number"

# --- runtime / driver calls ---
SYNC_KIND = "sync_kind"  # "" or one of SYNC_CALLS' values
SYNC_CALLS = {
    "cudaDeviceSynchronize": "device",
    "cudaStreamSynchronize": "stream",
    "cudaEventSynchronize": "event",
    "cudaStreamWaitEvent": "wait_event",
    "cudaEventRecord": "record",
    "cudaEventRecordWithFlags": "record",
    "cudaMemcpy": "blocking_copy",
    "cudaMemcpy2D": "blocking_copy",
    "cudaMemset": "blocking_copy",
    "cuCtxSynchronize": "device",
    "cuStreamSynchronize": "stream",
    "cuEventSynchronize": "event",
    "cuStreamWaitEvent": "wait_event",
    "cuEventRecord": "record",
    # HIP runtime (ROCm traces): the same semantics under hip* names (HIP runtime API reference)
    "hipDeviceSynchronize": "device",
    "hipStreamSynchronize": "stream",
    "hipEventSynchronize": "event",
    "hipStreamWaitEvent": "wait_event",
    "hipEventRecord": "record",
    "hipMemcpy": "blocking_copy",
    "hipMemcpyWithStream": "blocking_copy",  # synchronous copy on a stream (HIP docs: returns when done)
    "hipMemcpy2D": "blocking_copy",
    "hipMemset": "blocking_copy",
}
# A call that blocks the CPU until GPU work is done (the others only order GPU work).
BLOCKING_SYNC_KINDS = ("device", "stream", "event", "blocking_copy")

# --- steps ---
STEP_NUMBER = "number"

# --- flows ---
FLOW_ID = "id"
PHASE = "ph"
