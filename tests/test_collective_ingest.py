"""NCCL fields as typed columns (trace.collectives: kernels and record_param_comms, by event) and the trace's
distributedInfo."""
from __future__ import annotations

import numpy as np

from habitat_trace.ingest import schema as S
from tests.emit_helpers import tables_of
from tests.conftest import EXTERNAL, needs_external
from tests.dist_helpers import ALLREDUCE, ddp_trace


def test_nccl_fields_on_kernel_and_op_become_typed_columns() -> None:
    t = tables_of("ddp.json", ddp_trace(rank=1, world=2, nelems=1234))
    c = t.collectives
    kernels = t.gpu[t.gpu[S.NAME] == ALLREDUCE][S.EVENT].tolist()
    ops = t.ops[t.ops[S.NAME] == "record_param_comms"][S.EVENT].tolist()
    assert sorted(c[S.EVENT].tolist()) == sorted(kernels + ops)  # only events that carry a collective
    k = c[c[S.CAT] == S.CAT_KERNEL]
    assert k[S.COLL_NAME].tolist() == ["allreduce", "allreduce"]
    assert k[S.COLL_IN_NELEMS].tolist() == [1234, 1234] and k[S.COLL_GROUP_SIZE].tolist() == [2, 2]
    assert k[S.COLL_SEQ].tolist() == [0, 1] and k[S.COLL_PG_NAME].tolist() == ["0", "0"]
    op = c[c[S.CAT] == S.CAT_OP]
    assert op[S.COLL_OUT_NELEMS].tolist() == [1234, 1234] and op[S.COLL_RANK_STRIDE].tolist() == [1, 1]
    assert c[S.COLL_SEQ].dtype == np.int64 and c[S.COLL_IN_NELEMS].dtype == np.int64
    assert t.distributed is not None and (t.distributed.rank, t.distributed.world_size) == (1, 2)
    assert t.distributed.backend == "nccl" and t.distributed.nccl_version == "2.17.1"


def test_no_distributed_info_is_none_and_missing_fields_default() -> None:
    t = tables_of("x.json", ddp_trace(with_size=False, with_seq=False, distributed=False))
    k = t.collectives
    assert t.distributed is None
    assert (k[S.COLL_IN_NELEMS] == S.NONE).all() and (k[S.COLL_SEQ] == S.NONE).all()
    assert (k[S.COLL_NAME] == "allreduce").all()


@needs_external
def test_hta_nccl_trace_fields() -> None:
    from habitat_trace.ingest import load

    t = load(EXTERNAL / "a100_nccl.json.gz")
    k = t.collectives[t.collectives[S.CAT] == S.CAT_KERNEL]
    assert len(k) == 21 and len(t.gpu[t.gpu[S.KCLASS] == "nccl"]) == 21 and set(k[S.COLL_NAME]) == {"allreduce", "broadcast"}
    assert (k[S.COLL_GROUP_SIZE] == 2).all() and (k[S.COLL_IN_NELEMS] > 0).all()
    assert t.distributed is not None and t.distributed.world_size == 2
