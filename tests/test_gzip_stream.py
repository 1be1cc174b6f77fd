"""emit/writer.gzip_stream: the .gz bytes do not depend on how the writer cut the document into pieces (zlib-ng's
deflate, unlike the stdlib's, does: the stream feeds it fixed blocks), and they decompress to the document."""
from __future__ import annotations

import gzip

from hypothesis import given, settings
from hypothesis import strategies as st

from habitat_trace.emit import writer as W

SMALL_BLOCK = 64  # many blocks from small documents


@settings(max_examples=60, deadline=None)
@given(doc=st.binary(min_size=0, max_size=2000), cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=12))
def test_any_cut_of_a_document_gives_the_same_gzip(doc: bytes, cuts: list[int]) -> None:
    old = W.GZIP_BLOCK
    W.GZIP_BLOCK = SMALL_BLOCK
    try:
        edges = [0, *sorted(c for c in cuts if c <= len(doc)), len(doc)]
        pieces = [memoryview(doc)[a:b] for a, b in zip(edges, edges[1:])]
        out = b"".join(W.gzip_stream(pieces))
        assert out == W.gzip_bytes(doc)
        assert gzip.decompress(out) == doc
    finally:
        W.GZIP_BLOCK = old


def test_a_large_document_in_uneven_pieces() -> None:
    doc = bytes(range(256)) * 20000  # 5 MB: several default blocks
    pieces = [doc[:1], doc[1:3_000_001], doc[3_000_001:3_000_002], doc[3_000_002:]]
    assert b"".join(W.gzip_stream(pieces)) == W.gzip_bytes(doc)
    assert gzip.decompress(W.gzip_bytes(doc)) == doc
