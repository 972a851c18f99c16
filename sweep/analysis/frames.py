"""Typed pandas frames from the rows the fleet loader collects: each column by its declared dtype
(masked Int64 / Float64 / boolean, string, category), in one pass per column; chunks concatenated
with their categories united. What a value of the wrong type (a hand-edited file) becomes: NA, never
an error.
"""

from __future__ import annotations

from operator import itemgetter

import numpy as np
import pandas as pd


def concat_frames(frames) -> pd.DataFrame:
    if len(frames) == 1:
        return frames[0]
    out = {}
    for column in frames[0].columns:
        parts = [f[column].array for f in frames]
        if isinstance(parts[0], pd.Categorical):
            out[column] = union_categoricals(parts)
        # each chunk typed the column alike
        elif all(type(part) is type(parts[0]) for part in parts):
            # the extension-array interface's own concat
            out[column] = type(parts[0])._concat_same_type(parts)
        else:
            out[column] = pd.concat([f[column] for f in frames], ignore_index=True).array
    return pd.DataFrame(out)


def union_categoricals(parts) -> pd.Categorical:
    """Concatenate categoricals whose categories differ (codes remapped, no Python loop over
    rows)."""
    seen: dict = {}
    codes = []
    for part in parts:
        remap = np.array(
            [seen.setdefault(v, len(seen)) for v in part.categories] + [-1], dtype=np.int64
        )
        codes.append(remap[part.codes])  # code -1 (NA) picks the trailing -1
    return pd.Categorical.from_codes(
        np.concatenate(codes), dtype=pd.CategoricalDtype(index_of(list(seen)))
    )


def index_of(values) -> pd.Index:
    return pd.Index(values) if values else pd.Index([], dtype=object)


def typed_frame(rows: list[dict], columns: dict, what: str) -> pd.DataFrame:
    """Type the rows (dicts: column -> value) column by column, each by its name's dtype in
    `columns`; a column a row leaves out is NA there, a value under a name `columns` does not
    declare is an error.

    Each row is taken apart by name in one C call (`operator.itemgetter` of the declared names; a
    row that leaves columns out is completed first) and the tuples are transposed by `zip`."""
    names = tuple(columns)
    if not rows:
        return pd.DataFrame({name: typed_array([], dtype) for name, dtype in columns.items()})
    get, blank, width = itemgetter(*names), dict.fromkeys(names), len(names)
    try:
        tuples = [
            get(row) if len(row) == width else get(completed_row(row, blank, what)) for row in rows
        ]
    except KeyError:  # a full-width row with an undeclared name: completed names it
        tuples = [get(completed_row(row, blank, what)) for row in rows]
    return pd.DataFrame(
        {
            name: typed_array(list(column), dtype)
            for (name, dtype), column in zip(columns.items(), zip(*tuples))
        }
    )


def completed_row(row: dict, blank: dict, what: str) -> dict:
    """The row with NA (None) for each declared column it leaves out; KeyError names a column no
    declaration has."""
    full = {**blank, **row}
    if len(full) != len(blank):
        undeclared = sorted(set(full) - blank.keys())
        raise KeyError(
            f"{what} column(s) {', '.join(undeclared)} have no dtype in the {what} columns"
        )
    return full


def layout_frame(rows: list, layout: tuple, columns: dict, what: str) -> pd.DataFrame:
    """Type rows of values in the order `layout` names them: each column of `columns` is picked from
    them by its name (NA where the layout has no such name), so inserting a column shifts none;
    a name of the layout that `columns` does not declare is an error."""
    undeclared = [name for name in layout if name not in columns]
    if undeclared:
        raise KeyError(
            f"{what} column(s) {', '.join(undeclared)} have no dtype in the {what} columns"
        )
    # ValueError: a short row
    by_name = dict(zip(layout, zip(*rows, strict=True), strict=True)) if rows else {}
    blank = (None,) * len(rows)
    return pd.DataFrame(
        {name: typed_array(by_name.get(name, blank), dtype) for name, dtype in columns.items()}
    )


def object_array(values: list) -> np.ndarray:
    """A 1-d object array of the values, even when some of them are lists."""
    array = np.empty(len(values), dtype=object)
    array[:] = values
    return array


def number_array(values: list, dtype: str):
    """Int64 / Float64 from a list with None, through one numpy float array (fast for 100,000
    values)."""
    floats = np.array(values, dtype=np.float64)  # None -> nan; a string raises
    missing = np.isnan(floats)
    if dtype == "Float64":
        return pd.arrays.FloatingArray(floats, missing)
    if np.abs(floats[~missing]).max(initial=0) >= 2**53 or (floats[~missing] % 1).any():
        raise ValueError("not exact as a float")
    return pd.arrays.IntegerArray(np.where(missing, 0, floats).astype(np.int64), missing)


def missing_array(n: int, dtype: str):
    """n NA values of `dtype`, without looking at n values."""
    if dtype == "category":
        return pd.Categorical.from_codes(np.full(n, -1), dtype=pd.CategoricalDtype(index_of([])))
    masked = {
        "Int64": pd.arrays.IntegerArray,
        "Float64": pd.arrays.FloatingArray,
        "boolean": pd.arrays.BooleanArray,
    }
    if dtype in masked:
        zeros = np.zeros(
            n, dtype={"Int64": np.int64, "Float64": np.float64, "boolean": np.bool_}[dtype]
        )
        return masked[dtype](zeros, np.ones(n, dtype=np.bool_))
    return pd.array(np.full(n, None, dtype=object), dtype=dtype)


def typed_array(values, dtype: str):
    """A typed array of a list or tuple of values; values of the wrong type (a hand-edited file)
    become NA rather than an error."""
    # a column no row fills (a tier that did not run); a first value is the common answer, without
    # looking at all 80,000
    if not values or (values[0] is None and values.count(None) == len(values)):
        return missing_array(len(values), dtype)
    if dtype == "category":
        try:
            codes, uniques = pd.factorize(object_array(values))
            return pd.Categorical.from_codes(
                codes, dtype=pd.CategoricalDtype(index_of(list(uniques)))
            )
        except (TypeError, ValueError):  # unhashable or odd values: categories of their text
            return typed_array([None if v is None else str(v) for v in values], dtype)
    try:
        if dtype in ("Int64", "Float64"):
            return number_array(values, dtype)
        if dtype == "boolean":
            array = object_array(values)
            # noqa: E712
            return pd.arrays.BooleanArray(array == True, (array != True) & (array != False))
        return pd.array(values, dtype=dtype)
    except (TypeError, ValueError, OverflowError):
        pass
    if dtype in ("Int64", "Float64"):
        numbers = pd.to_numeric(pd.Series(values, dtype=object), errors="coerce")
        if dtype == "Int64":
            # whole, and exact in int64
            numbers = numbers.where((numbers % 1 == 0) & (numbers.abs() < 2**53))
        return numbers.astype(dtype).array
    if dtype == "boolean":
        return pd.array([v if isinstance(v, bool) else None for v in values], dtype="boolean")
    return pd.array([None if v is None else str(v) for v in values], dtype=dtype)
