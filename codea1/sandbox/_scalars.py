"""The standard-library scalars of the extra tags, rebuilt from their encodings by trusted code.

Both `values._extra_equal` (these tags compare by their decoded values) and `decode` need
this; a module of its own keeps the import graph one-way (decode -> values, both -> here).
`values` imports it only when it compares such a value, so the worker, which imports
`values`, never loads `datetime`, `decimal` or `fractions` for it.
"""

from __future__ import annotations

import datetime
import decimal
import fractions
from typing import Any

#: The tags `decode_scalar` rebuilds.
SCALAR_TAGS = frozenset({"decimal", "fraction", "range", "timedelta", "date", "datetime", "time"})


def decode_scalar(v: list) -> Any:
    """The value of a well-formed encoding (see `values.check_value`) tagged in `SCALAR_TAGS`."""
    tag = v[0]
    if tag == "decimal":
        try:
            return decimal.Decimal(v[1])
        except decimal.InvalidOperation:
            raise ValueError(f"malformed decimal value {v[1]!r:.40}") from None
    if tag == "fraction":
        return fractions.Fraction(int(v[1]), int(v[2]))
    if tag == "range":
        return range(int(v[1]), int(v[2]), int(v[3]))
    if tag == "timedelta":
        days, seconds, micro = v[1]
        return datetime.timedelta(days=days, seconds=seconds, microseconds=micro)
    if tag == "date":
        return datetime.date(*v[1])
    if tag in ("datetime", "time"):
        zone = None
        if v[2] is not None:
            days, seconds, micro = v[2]
            zone = datetime.timezone(datetime.timedelta(days=days, seconds=seconds, microseconds=micro))
        *fields, fold = v[1]
        kind = datetime.datetime if tag == "datetime" else datetime.time
        return kind(*fields, tzinfo=zone, fold=fold)
    raise ValueError(f"unknown value tag {tag!r}")
