"""`rows_at` (sweep.analysis.fleet): rows of a typed frame as dicts of plain Python values, NA as
None, equal (values and types) to pandas' own frame-wide conversion that it replaced (issue 52)."""
import numpy as np
import pandas as pd
from hypothesis import given, settings, strategies as st

from sweep.analysis.fleet import rows_at
from sweep.analysis.frames import typed_array

DTYPES = ["category", "string", "Int64", "Float64", "boolean"]
VALUES = {
    "category": st.one_of(st.none(), st.sampled_from(["a", "b", "NVIDIA H200", ""])),
    "string": st.one_of(st.none(), st.text(max_size=4)),
    "Int64": st.one_of(st.none(), st.integers(-(2**40), 2**40)),
    "Float64": st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=False, width=64)),
    "boolean": st.one_of(st.none(), st.booleans()),
}


def pandas_rows(frame, positions):
    """The oracle: pandas' conversion of the whole frame, NA (and NaN) made None."""
    rows = frame.iloc[positions].astype(object)
    return rows.where(rows.notna(), None).to_dict("records")


@st.composite
def frames(draw):
    kinds = draw(st.lists(st.sampled_from(DTYPES), min_size=1, max_size=6))
    n = draw(st.integers(0, 12))
    data = {f"c{i}_{k}": typed_array([draw(VALUES[k]) for _ in range(n)], k) for i, k in enumerate(kinds)}
    frame = pd.DataFrame(data)
    positions = draw(st.lists(st.integers(0, max(0, n - 1)), max_size=n)) if n else []
    return frame, positions


def typed(rows):
    return [{k: (type(v), v if v == v else "nan") for k, v in row.items()} for row in rows]


@settings(max_examples=300, deadline=None)
@given(frames())
def test_rows_at_reads_what_pandas_frame_wide_conversion_reads(case):
    frame, positions = case
    assert typed(rows_at(frame, positions)) == typed(pandas_rows(frame, positions))


def test_plain_python_values_not_numpy_scalars():
    frame = pd.DataFrame({"n": typed_array([1, None, 3], "Int64"), "x": typed_array([1.5, None, 2.0], "Float64"),
                          "b": typed_array([True, None, False], "boolean"), "c": typed_array(["a", None, "a"], "category")})
    rows = rows_at(frame, np.arange(3))
    assert rows[1] == {"n": None, "x": None, "b": None, "c": None}
    assert {type(v) for row in (rows[0], rows[2]) for v in row.values()} == {int, float, bool, str}
