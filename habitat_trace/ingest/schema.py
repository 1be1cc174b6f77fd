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
# what timeline.overhead counts python_function events by: a byte count on the document, counted by ingest before it
# drops a large trace's bytes (Events.release; the count from the file again took 0.4 s of issue 34's 272 MB trace)
PYTHON_TOKEN = f'"{CAT_PYTHON}"'.encode()
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
LAUNCH_ISSUE = "launch_issue"  # "" or why the recorded launch parameters were dropped (out of range)
# Valid launch parameters (CUDA C++ Programming Guide, "Technical Specifications per Compute Capability"):
# at most 255 registers per thread on every compute capability >= 3.5; grid, block and shared memory never negative.
MAX_REGISTERS_PER_THREAD = 255

# --- trace-level keys ---
# un-profiled step times (ns, a JSON list) written by habitat_trace.schedule (hook.py); pipeline.measured_step_ns
UNPROFILED_STEP_KEY = "habitat_unprofiled_step_ns"

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

# --- NCCL collectives (table ``collectives``, one row per kernel or ``record_param_comms`` op that carries them,
#     keyed by EVENT; CAT says which) ---
# (PyTorch's ParamCommsUtils / Kineto's GenericTraceActivity spellings; HTA's a100_nccl trace carries them).
COLL_NAME = "coll_name"  # "allreduce", "allgather", "reduce_scatter", "broadcast", "all_to_all", ...
COLL_IN_NELEMS = "coll_in_nelems"
COLL_OUT_NELEMS = "coll_out_nelems"
COLL_DTYPE = "coll_dtype"  # "Float", "BFloat16", ...
COLL_GROUP_SIZE = "coll_group_size"
COLL_PG_NAME = "coll_pg_name"
COLL_PG_RANKS = "coll_pg_ranks"  # as written ("[0, 1]"; long lists truncated by the profiler)
COLL_RANK_START = "coll_rank_start"  # "Global rank start/stride": the group's ranks when the list is truncated
COLL_RANK_STRIDE = "coll_rank_stride"
COLL_SEQ = "coll_seq"  # the process group's collective sequence number (newer PyTorch)

# Declarative map, raw Kineto arg name -> (column, kind): "int" columns default to NONE, "str" to "".
COLLECTIVE_ARGS: dict[str, tuple[str, str]] = {
    "Collective name": (COLL_NAME, "str"),
    "In msg nelems": (COLL_IN_NELEMS, "int"),
    "Out msg nelems": (COLL_OUT_NELEMS, "int"),
    "dtype": (COLL_DTYPE, "str"),
    "Group size": (COLL_GROUP_SIZE, "int"),
    "Process Group Name": (COLL_PG_NAME, "str"),
    "Process Group Ranks": (COLL_PG_RANKS, "str"),
    "Global rank start": (COLL_RANK_START, "int"),
    "Global rank stride": (COLL_RANK_STRIDE, "int"),
    "Seq": (COLL_SEQ, "int"),
}
COLLECTIVE_COLUMNS = tuple(c for c, _ in COLLECTIVE_ARGS.values())

# --- the typed boundary: dtype kind of every column ingest promises, per table ("i" int64, "f" float64,
# "O" Python objects: str, tuples of shapes). Checked once per load (ingest.trace.check_tables); other layers may
# rely on exactly these. Tables may carry more columns; an empty table may have any dtype.
_TIMED = {EVENT: "i", NAME: "O", PID: "O", TID: "O", TS: "i", DUR: "i"}
TABLE_COLUMNS: dict[str, dict[str, str]] = {
    "gpu": {**_TIMED, CAT: "O", DEVICE: "i", STREAM: "i", CORRELATION: "i", EXTERNAL_ID: "i", GRID_X: "i",
            GRID_Y: "i", GRID_Z: "i", BLOCK_X: "i", BLOCK_Y: "i", BLOCK_Z: "i", REGISTERS: "i", SHARED_MEM: "i",
            BYTES: "i", CUPTI_BLOCKS_PER_SM: "f", CUPTI_WARPS_PER_SM: "f", CUPTI_OCCUPANCY: "f", END: "i",
            LAUNCH: "i", LAUNCH_NAME: "O", LAUNCH_TS: "i", LAUNCH_DUR: "i", OP: "i", OP_NAME: "O", ROOT_OP: "i",
            ROOT_OP_NAME: "O", STEP: "i", KCLASS: "O", LAUNCH_ISSUE: "O"},
    "ops": {**_TIMED, CAT: "O", EXTERNAL_ID: "i", SEQUENCE: "i", INPUT_DIMS: "O", INPUT_TYPES: "O",
            CONCRETE_INPUTS: "O", PARENT: "i", DEPTH: "i", ROOT_OP: "i", END: "i", STEP: "i"},
    "calls": {**_TIMED, CAT: "O", CORRELATION: "i", EXTERNAL_ID: "i", SYNC_KIND: "O", END: "i", OP: "i", STEP: "i"},
    "steps": {EVENT: "i", NAME: "O", TS: "i", DUR: "i", STEP_NUMBER: "i", OP: "i", END: "i"},
    "syncs": {**_TIMED, SYNC_KIND: "O", STREAM: "i", CORRELATION: "i"},
    "gpu_annotations": {**_TIMED, EXTERNAL_ID: "i"},
    "flows": {EVENT: "i", CAT: "O", PHASE: "O", FLOW_ID: "i", PID: "O", TID: "O", TS: "i"},
    "memory": {EVENT: "i", TS: "i", "device_type": "i", "device_id": "i", BYTES: "i", "total_allocated": "i",
               "total_reserved": "i"},
}
