"""Python's `==` between two encoded values, decided by trusted code in the parent.

The reference implementation compares a candidate's value with the reference's by
Python's `==` (`2 == 2.0`, `Counter('ab') == {'a': 1, 'b': 1}`). Here both values arrive as
plain data (`codea1.sandbox.values`); `decode` rebuilds them from types this process
trusts (built-ins, the standard library's own classes, and the small records below), so
the `==` that decides is never code a candidate wrote: a Counter subclass with a lying
`__eq__` was encoded as `unsupported`, and an instance of a program's class comes back as
an `Instance` record compared by its type name and attributes. An instance of a program's
subclass of a built-in type comes back as its built-in part, which Python's `==` compares
(`Row([1]) == [1]`), or, where a class of the program defines `__eq__` or `__ne__` (its
code, never run here), as a `Subclass` record compared by type name, data and attributes.
"""

from __future__ import annotations

import array
import collections
import math
import threading
import types
from typing import Any

from codea1.sandbox._scalars import SCALAR_TAGS, decode_scalar
from codea1.sandbox.values import Value, check_value

__all__ = ["Array", "Instance", "Named", "Subclass", "Unsupported", "decode", "decode_reflexive", "python_equal"]


class Unsupported:
    """A value of a type that cannot be compared: equal to nothing, not even itself."""

    __slots__ = ("type_name",)

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name

    def __eq__(self, other: object) -> bool:
        return False

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        return f"<unsupported {self.type_name}>"


class Named(tuple):
    """A namedtuple's items (equal to any tuple with the same items, as in Python), with its
    type name for `judge.exact_types`."""

    type_name: str


class Instance:
    """An instance of a class the program defined: equal to another of the same type name
    and equal attributes (the class's own `__eq__`, candidate code, never runs here)."""

    __slots__ = ("type_name", "attributes")

    def __init__(self, type_name: str, attributes: dict) -> None:
        self.type_name, self.attributes = type_name, attributes

    def __eq__(self, other: object) -> bool:
        return (type(other) is Instance and self.type_name == other.type_name  # type: ignore[union-attr]
                and self.attributes == other.attributes)  # type: ignore[union-attr]

    def __hash__(self) -> int:
        return hash(self.type_name)

    def __repr__(self) -> str:
        return f"{self.type_name}({', '.join(f'{k}={v!r}' for k, v in self.attributes.items())})"


class Subclass:
    """An instance of a program's class derived from a built-in type whose classes define
    `__eq__` or `__ne__` (an instance whose classes define neither decodes as its built-in
    part, as Python's `==` treats it): that code is the program's, never run here, so it
    is equal to another of the same type name, equal built-in part (`base`) and equal
    attributes only, as an instance of a program's plain class is (`Instance`); never to a
    plain value."""

    __slots__ = ("type_name", "base", "attributes")

    def __init__(self, type_name: str, base: Any, attributes: dict) -> None:
        self.type_name, self.base, self.attributes = type_name, base, attributes

    def __eq__(self, other: object) -> bool:
        return (type(other) is Subclass and self.type_name == other.type_name  # type: ignore[union-attr]
                and self.base == other.base and self.attributes == other.attributes)  # type: ignore[union-attr]

    def __hash__(self) -> int:
        return hash(self.type_name)

    def __repr__(self) -> str:
        attributes = "".join(f", {k}={v!r}" for k, v in self.attributes.items())
        return f"{self.type_name}({self.base!r}{attributes})"


class Member:
    """A member of an `enum.Enum` class. A member of a plain Enum is equal to the member of
    the same name of the same class object of the run only (enum members are singletons,
    compared by identity in Python). A member of a class that mixes in a data type
    (IntEnum, StrEnum, `class Dir(str, Enum)`) has that ``data`` (its decoded value) and
    compares, and hashes, as it, as in Python: `Level.HIGH == 2`, and equal to a member of
    another class with equal data (a candidate's own `Level`), never to a plain member."""

    __slots__ = ("type_name", "name", "cls", "data")

    def __init__(self, type_name: str, name: str, cls: str, data: Any = None) -> None:
        self.type_name, self.name, self.cls, self.data = type_name, name, cls, data

    def __eq__(self, other: object) -> bool:
        data = self.data
        if type(other) is Member:
            if data is None or other.data is None:  # type: ignore[union-attr]
                return data is None and other.data is None and (  # type: ignore[union-attr]
                    self.type_name, self.name, self.cls) == (other.type_name, other.name, other.cls)  # type: ignore[union-attr]
            return bool(data == other.data)  # type: ignore[union-attr]
        return data is not None and bool(data == other)

    def __hash__(self) -> int:
        return hash((self.type_name, self.name)) if self.data is None else hash(self.data)

    def __repr__(self) -> str:
        return f"{self.type_name}.{self.name}"


class Digest:
    """A value too large to send whole, known by the sha256 of its encoding: equal to a
    value with the same digest (an identical encoding) only."""

    __slots__ = ("digest",)

    def __init__(self, digest: tuple) -> None:
        self.digest = digest

    def __eq__(self, other: object) -> bool:
        return type(other) is Digest and self.digest == other.digest  # type: ignore[union-attr]

    def __hash__(self) -> int:
        return hash(self.digest)

    def __repr__(self) -> str:
        return f"<value of {self.digest[1]} encoded bytes, sha256 {self.digest[0][:12]}...>"


class Array:
    """A numpy array: equal to another array of the same shape whose items are equal, one
    by one (`numpy.array_equal`); the dtype does not matter, as for numpy's `==`."""

    __slots__ = ("dtype", "shape", "items")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, dtype: str, shape: tuple, items: list) -> None:
        self.dtype, self.shape, self.items = dtype, shape, items

    def __eq__(self, other: object) -> bool:
        return type(other) is Array and self.shape == other.shape and self.items == other.items  # type: ignore[union-attr]

    def __repr__(self) -> str:
        return f"array(shape={self.shape}, dtype={self.dtype}, items={self.items!r})"


def decode(value: Value, check: bool = True) -> Any:
    """The Python value an encoding stands for, built from trusted types only.

    Raises ValueError for a malformed encoding (see `check_value`; `check=False`: the
    caller checked `value` already) and TypeError when it cannot be rebuilt (an unhashable
    dict key)."""
    if check:
        check_value(value)
    return _decode(value)


class _Odd(threading.local):
    """Set by `_decode` in this thread when it rebuilt a part that is not equal to itself."""

    seen = False


_ODD = _Odd()


def decode_reflexive(value: Value, check: bool = True) -> tuple[Any, bool]:
    """`decode(value, check)`, and whether that value equals a second decoding of `value`
    under `==`.

    Two decodings of one encoding are equal part for part, but for a part that is not
    equal to itself: a NaN (`[nan] == [nan]` is false for two lists, true for one list
    with itself), a complex or a Decimal NaN, an unsupported value. False wherever one was
    rebuilt (then only a second decoding can tell, as `python_equal(value, value)` does).
    """
    _ODD.seen = False
    decoded = decode(value, check)
    return decoded, not _ODD.seen


def _decode(v: Value) -> Any:
    tag = v[0]
    if tag == "none":
        return None
    if tag == "bool":
        return v[1]
    if tag == "int":
        return int(v[1])
    if tag == "float":
        f = float.fromhex(v[1])
        if f != f:
            _ODD.seen = True
        return f
    if tag == "str":
        return v[1]
    if tag == "list":
        return [_decode(x) for x in v[1]]
    if tag == "tuple":
        return tuple(_decode(x) for x in v[1])
    if tag == "dict":
        return {_decode(k): _decode(x) for k, x in v[1]}
    if tag == "set":
        return {_decode(x) for x in v[1]}
    if tag == "frozenset":
        return frozenset(_decode(x) for x in v[1])
    if tag == "complex":
        c = complex(float.fromhex(v[1]), float.fromhex(v[2]))
        if c != c:
            _ODD.seen = True
        return c
    if tag == "bytes":
        return bytes.fromhex(v[1])
    if tag == "unsupported":
        _ODD.seen = True
        return Unsupported(v[1])
    if tag in ("counter", "ordereddict", "defaultdict"):
        pairs = [(_decode(k), _decode(x)) for k, x in v[1]]
        if tag == "counter":
            return collections.Counter(dict(pairs))
        if tag == "ordereddict":
            return collections.OrderedDict(pairs)
        return collections.defaultdict(None, pairs)
    if tag == "deque":
        return collections.deque(_decode(x) for x in v[1])
    if tag == "namedtuple":
        named = Named(_decode(x) for x in v[2])
        named.type_name = v[1]
        return named
    if tag == "object":
        return Instance(v[1], {name: _decode(x) for name, x in v[2]})
    if tag == "enum":
        return Member(v[1], v[2], v[4], None if v[5] is None else _decode(v[5]))
    if tag == "bytearray":
        return bytearray.fromhex(v[1])
    if tag == "digest":
        return Digest((v[1], v[2]))
    if tag == "npscalar":
        return _decode(v[2])
    if tag == "ndarray":
        return Array(v[1], tuple(v[2]), [_decode(x) for x in v[3]])
    if tag == "namespace":
        return types.SimpleNamespace(**{name: _decode(x) for name, x in v[1]})
    if tag == "array":
        code = v[1] if v[1] not in "uw" else _TEXT_TYPECODE  # (items of text compare alike in either)
        return array.array(code, [_decode(x) for x in v[2]])
    if tag == "subclass":
        base = _decode(v[2])
        return Subclass(v[1], base, {name: _decode(x) for name, x in v[3]}) if v[4] else base
    if tag in SCALAR_TAGS:
        scalar = decode_scalar(v)
        if tag == "decimal" and scalar.is_nan():  # (quiet or signalling: the latter raises when compared)
            _ODD.seen = True
        return scalar
    raise ValueError(f"unknown value tag {tag!r}")


#: The typecode of an array of characters here ('u' is deprecated where 'w' exists, Python 3.13).
_TEXT_TYPECODE = "w" if "w" in array.typecodes else "u"


def python_equal(a: Value, b: Value, rel_tol: float = 0.0, abs_tol: float = 0.0) -> bool:
    """Whether the values `a` and `b` stand for are equal under Python's `==` (the
    reference's rule); a malformed encoding equals nothing.

    With a tolerance (EvalPlus-style, e.g. `abs_tol=1e-6`), numbers that are not `==` still
    match when `|x - y| <= abs_tol + rel_tol * |y|`, inside lists, tuples, deques, dict
    values, arrays and attributes too (set members and dict keys stay exact).
    """
    try:
        x, y = decode(a), decode(b)
        if x == y:
            return True
        return bool(rel_tol or abs_tol) and _close(x, y, rel_tol, abs_tol)
    except (ValueError, TypeError, ArithmeticError, RecursionError, OverflowError, MemoryError):
        return False


_NUMBERS = (int, float)
_SEQUENCES = (list, tuple, collections.deque, array.array)


def _close(x: Any, y: Any, rel_tol: float, abs_tol: float) -> bool:
    if type(x) is Member and x.data is not None:  # (a member of an IntEnum... compares as its data)
        x = x.data
    if type(y) is Member and y.data is not None:
        y = y.data
    tx, ty = type(x), type(y)
    if tx in _NUMBERS and ty in _NUMBERS:
        if math.isinf(x) or math.isinf(y) or math.isnan(x) or math.isnan(y):
            return x == y
        return abs(x - y) <= abs_tol + rel_tol * abs(y)
    if tx is complex or ty is complex:
        if not (tx in (*_NUMBERS, complex) and ty in (*_NUMBERS, complex)):
            return False
        return (_close(complex(x).real, complex(y).real, rel_tol, abs_tol)
                and _close(complex(x).imag, complex(y).imag, rel_tol, abs_tol))
    if isinstance(x, _SEQUENCES) and isinstance(y, _SEQUENCES):
        same_kind = (tx is ty or (isinstance(x, tuple) and isinstance(y, tuple)))
        return same_kind and len(x) == len(y) and all(_close(p, q, rel_tol, abs_tol) for p, q in zip(x, y))
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(_close(x[k], y[k], rel_tol, abs_tol) for k in x)
    if tx is Array and ty is Array:
        return x.shape == y.shape and all(_close(p, q, rel_tol, abs_tol) for p, q in zip(x.items, y.items))
    if tx is types.SimpleNamespace and ty is types.SimpleNamespace:
        return _close(vars(x), vars(y), rel_tol, abs_tol)
    if (tx is Instance and ty is Instance) or (tx is Subclass and ty is Subclass):
        return (x.type_name == y.type_name and x.attributes.keys() == y.attributes.keys()
                and (tx is Instance or _close(x.base, y.base, rel_tol, abs_tol))
                and all(_close(x.attributes[k], y.attributes[k], rel_tol, abs_tol) for k in x.attributes))
    return x == y
