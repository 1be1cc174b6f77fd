"""Which GPU work a synchronizing call waits for, and which GPU event a cudaStreamWaitEvent delays.

Kineto records neither event handles nor the stream of a runtime call, so the links are heuristic
unless a ``cuda_sync`` event (CUPTI sync record, same correlation id) names them:

- a cudaEventRecord captures the most recent GPU work launched *on the recording thread* before it
  (with ``wait_on_stream`` from a cuda_sync event: the last work launched on that stream before it);
- cudaEventSynchronize / cudaStreamWaitEvent wait on the record named by the cuda_sync event's
  ``wait_on_cuda_event_record_corr_id``, else on the most recent cudaEventRecord on the same thread;
- cudaStreamSynchronize waits on the cuda_sync event's ``stream``, else on the stream of the last work
  launched on its thread before it; cudaDeviceSynchronize waits on everything;
- a cudaStreamWaitEvent delays the first GPU event launched on its thread after it (or, with a
  cuda_sync event, the first one launched on the waiting stream after it);
- cudaMemcpy / cudaMemset and copies to pageable host memory wait on their own GPU copy.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from habitat_trace.ingest import schema as S

ALL = -2  # awaited stream code: every stream (device synchronize)


@dataclass(frozen=True)
class SyncWait:
    """A blocking CPU call and what it waits for: ``stream`` (a stream code, ALL, or -1) or ``row``."""

    call: int  # row in trace.calls
    stream: int
    row: int  # GPU row waited on (event sync, blocking copy), -1 otherwise


class _Launches:
    """GPU rows by the thread (and stream) that launched them, sorted by launch time."""

    def __init__(self, trace: Any, stream_code: np.ndarray) -> None:
        gpu, calls = trace.gpu, trace.calls
        launch = gpu[S.LAUNCH].to_numpy()
        rows = np.flatnonzero(launch >= 0)
        self.thread = (calls[S.PID] + ":" + calls[S.TID]).to_numpy()
        self.call_ts = calls[S.TS].to_numpy()
        ts = self.call_ts[launch[rows]] if len(rows) else np.zeros(0, dtype=np.int64)
        order = np.lexsort((rows, ts))
        self.rows, self.ts = rows[order], ts[order]
        self.row_thread = self.thread[launch[self.rows]] if len(rows) else np.zeros(0, dtype=object)
        self.row_stream = stream_code[self.rows]
        self._by_thread = self._split(self.row_thread)
        self._by_stream = self._split(self.row_stream)

    def _split(self, keys: np.ndarray) -> dict[Any, tuple[np.ndarray, np.ndarray]]:
        """(launch times, GPU rows) per key, each sorted by launch time (built once: queries are many)."""
        return {k: (self.ts[m], self.rows[m]) for k in np.unique(keys) for m in [keys == k]}

    @staticmethod
    def _pick(part: tuple[np.ndarray, np.ndarray] | None, t: int, after: bool) -> int:
        if part is None or len(part[0]) == 0:
            return S.NONE
        ts, rows = part
        pos = int(np.searchsorted(ts, t, side="right" if after else "left"))
        pos = pos if after else pos - 1
        return int(rows[pos]) if 0 <= pos < len(rows) else S.NONE

    def on_thread(self, call: int, after: bool = False) -> int:
        return self._pick(self._by_thread.get(self.thread[call]), int(self.call_ts[call]), after)

    def on_stream(self, stream: int, t: int, after: bool = False) -> int:
        return self._pick(self._by_stream.get(stream), t, after)


def _cuda_sync_args(trace: Any) -> dict[int, dict]:
    """cuda_sync event args by correlation id (the id of the runtime call that caused them)."""
    out: dict[int, dict] = {}
    for ev, corr in zip(trace.syncs[S.EVENT].to_numpy(), trace.syncs[S.CORRELATION].to_numpy()):
        args = trace.events[int(ev)].get("args")
        if corr >= 0 and isinstance(args, dict):
            out[int(corr)] = args
    return out


def _stream_code(args: dict, key: str, device: int, codes: dict[tuple[int, int], int]) -> int:
    v = args.get(key)
    return codes.get((device, int(v)), S.NONE) if isinstance(v, int) and v >= 0 else S.NONE


class Linker:
    """Resolves sync calls and stream waits for one trace (built once, queried per call)."""

    def __init__(self, trace: Any, stream_code: np.ndarray, codes: dict[tuple[int, int], int]) -> None:
        self.trace, self.codes = trace, codes
        self.launches = _Launches(trace, stream_code)
        self.stream_code = stream_code
        self.sync_args = _cuda_sync_args(trace)
        calls = trace.calls
        corr = calls[S.CORRELATION].to_numpy()
        rows = np.flatnonzero(corr >= 0)
        self.corr_row = dict(zip(corr[rows].tolist(), rows.tolist()))  # a repeated id: its last row, as before
        self.device = int(trace.gpu[S.DEVICE].mode().iloc[0]) if len(trace.gpu) else 0
        self.corr = calls[S.CORRELATION].to_numpy()
        rec = np.flatnonzero((calls[S.SYNC_KIND] == "record").to_numpy())
        rec = rec[np.argsort(self.launches.call_ts[rec], kind="stable")]  # rows follow the file, not time
        rec_thread = self.launches.thread[rec]
        rec_ts = self.launches.call_ts[rec]
        self.records = {k: (rec_ts[m], rec[m]) for k in np.unique(rec_thread) for m in [rec_thread == k]}

    def _args(self, call: int) -> dict:
        return self.sync_args.get(int(self.corr[call]), {}) if self.sync_args else {}

    def _record_before(self, call: int) -> int:
        """Most recent cudaEventRecord call on the same thread before ``call`` (-1 if none)."""
        args = self._args(call)
        corr = args.get("wait_on_cuda_event_record_corr_id")
        if isinstance(corr, int) and corr in self.corr_row:
            return self.corr_row[corr]
        return _Launches._pick(self.records.get(self.launches.thread[call]), int(self.launches.call_ts[call]), False)

    def recorded_row(self, waiter: int) -> int:
        """GPU row whose completion the event waited on by call ``waiter`` marks (-1 if unknown)."""
        rec = self._record_before(waiter)
        if rec == S.NONE:
            return S.NONE
        stream = _stream_code(self._args(waiter), "wait_on_stream", self.device, self.codes)
        if stream != S.NONE:
            return self.launches.on_stream(stream, int(self.launches.call_ts[rec]))
        return self.launches.on_thread(rec)

    def sync_wait(self, call: int, kind: str, own_rows: dict[int, int]) -> SyncWait:
        if kind == "device":
            return SyncWait(call, ALL, S.NONE)
        if kind == "stream":
            stream = _stream_code(self._args(call), "stream", self.device, self.codes)
            if stream == S.NONE:
                last = self.launches.on_thread(call)
                stream = int(self.stream_code[last]) if last != S.NONE else ALL
            return SyncWait(call, stream, S.NONE)
        if kind == "event":
            return SyncWait(call, S.NONE, self.recorded_row(call))
        return SyncWait(call, S.NONE, own_rows.get(call, S.NONE))  # blocking copy

    def wait_dependency(self, call: int) -> tuple[int, int]:
        """(delayed GPU row, awaited GPU row) of a cudaStreamWaitEvent, -1s when unresolved."""
        awaited = self.recorded_row(call)
        stream = _stream_code(self._args(call), "stream", self.device, self.codes)
        t = int(self.launches.call_ts[call])
        if stream != S.NONE:
            delayed = self.launches.on_stream(stream, t, after=True)
        else:
            delayed = self.launches.on_thread(call, after=True)
        if awaited == S.NONE or delayed == S.NONE or self.stream_code[awaited] == self.stream_code[delayed]:
            return S.NONE, S.NONE
        return delayed, awaited


def blocking_calls(trace: Any) -> tuple[np.ndarray, dict[int, int]]:
    """Rows of calls that block the CPU on the GPU, and each blocking copy's own GPU row.

    A cudaMemcpyAsync to pageable host memory is synchronous in CUDA (the driver stages it), so it
    counts as a blocking copy; Kineto names its GPU record "Memcpy DtoH (Device -> Pageable)".
    """
    calls, gpu = trace.calls, trace.gpu
    kind = calls[S.SYNC_KIND].to_numpy()
    launch = gpu[S.LAUNCH].to_numpy()
    has = launch >= 0
    rows = np.flatnonzero(has)
    first = np.sort(np.unique(launch[rows], return_index=True)[1])  # each call's first GPU row
    own = dict(zip(launch[rows[first]].tolist(), rows[first].tolist()))
    codes, names = pd.factorize(gpu[S.NAME].to_numpy(dtype=object))  # the test once per distinct name (a few hundred over 118k rows)
    pageable = np.append(np.array(["-> Pageable" in str(n) for n in names], dtype=bool), False)[codes] & has
    blocking = np.isin(kind, S.BLOCKING_SYNC_KINDS)
    blocking[launch[pageable]] = True
    return np.flatnonzero(blocking), own


def stream_codes(gpu: pd.DataFrame) -> tuple[np.ndarray, dict[tuple[int, int], int]]:
    """Integer code per (device, stream) of each GPU row."""
    pairs = np.stack((gpu[S.DEVICE].to_numpy(dtype=np.int64), gpu[S.STREAM].to_numpy(dtype=np.int64)), axis=1)
    if not len(pairs):
        return np.zeros(0, dtype=np.int64), {}
    _, first, group = np.unique(pairs, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first)  # codes number the pairs in the order they first appear
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    codes = {(d, s): k for k, (d, s) in enumerate(pairs[first[order]].tolist())}
    return rank[group.ravel()], codes
