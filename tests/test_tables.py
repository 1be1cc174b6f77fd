"""Table-building helpers: fast paths must give exactly what the obvious per-event code gives."""
from __future__ import annotations

import pytest

from habitat_trace.ingest.columns import strings as _strings
from habitat_trace.ingest.tables import bucket_events


@pytest.mark.parametrize("values", [
    [399, 399, "Spans", 7], [1, 2, 1], [], [1, None], [True, 1], [1.0, 1], [[1], 2], [2**70, 1], ["a", 1],
    [float("nan"), None],
])
def test_strings_equals_str_of_each_value(values: list) -> None:
    """Regression: grouping by hash merged 1/True/1.0 and None/nan into one string."""
    assert _strings(values).tolist() == [str(v) for v in values]


def test_bucket_events_tolerates_junk_entries() -> None:
    events = [{"cat": "kernel"}, {"cat": ["x"]}, 5, {"name": "[memory]", "ph": "i"},
              {"cat": None, "name": "[memory]"}, {"cat": "Kernel"}, {"cat": "cpu_op"}, {"cat": float("nan")}]
    assert dict(bucket_events(events)) == {"kernel": [0, 5], "[memory]": [3, 4], "cpu_op": [6]}
