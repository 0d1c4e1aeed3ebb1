"""Plain-data encoding of Python values, and the trusted comparison of two encodings.

Why: a candidate's return value may be an object whose ``__eq__`` lies, or a subclass of
``int``/``str``/``list`` that compares equal to anything. So the *child* turns a value into
plain data (JSON-compatible lists tagged with the exact type) without ever calling code the
candidate wrote, and the *parent* compares two encodings with code the candidate never sees.

Encoding (``Value``): ``["none"]``, ``["bool", b]``, ``["int", "123"]`` (decimal text, any
size), ``["float", "0x1.8p+1"]`` (``float.hex``, exact, covers nan/inf), ``["complex", re, im]``
(two float hexes), ``["str", s]``, ``["bytes", hexdigits]``, ``["list"|"tuple"|"set"|"frozenset",
[items]]``, ``["dict", [[key, value], ...]]`` and ``["unsupported", "type name"]``, which
equals nothing (not even itself).
"""

from __future__ import annotations

import math
from typing import Any

# Pin the builtins this module uses: a candidate that patches ``builtins`` in the run's
# interpreter must not change how its values are encoded.
import builtins as _builtins  # noqa: E402

(bool, bytes, complex, dict, float, frozenset, id, int, isinstance, len, list, repr, set, str,
 tuple, type, memoryview, compile, eval, exec, getattr, range) = (
    _builtins.bool, _builtins.bytes, _builtins.complex, _builtins.dict, _builtins.float,
    _builtins.frozenset, _builtins.id, _builtins.int, _builtins.isinstance, _builtins.len,
    _builtins.list, _builtins.repr, _builtins.set, _builtins.str, _builtins.tuple, _builtins.type,
    _builtins.memoryview, _builtins.compile, _builtins.eval, _builtins.exec, _builtins.getattr,
    _builtins.range)

Value = list  # a tagged plain-data encoding (see module docstring)

#: Float comparison tolerances of :func:`values_equal` (relative, absolute).
FLOAT_REL_TOL = 1e-6
FLOAT_ABS_TOL = 1e-9

_SEQUENCE_TAGS = {"list", "tuple", "set", "frozenset"}
_MAX_DEPTH = 100


class EncodingError(ValueError):
    """A value could not be encoded (too deep, too large)."""


def encode(value: Any, max_items: int = 1_000_000) -> Value:
    """Encode ``value`` into plain data, never calling methods of user-defined types.

    Only exact built-in types are encoded (``type(x) is int``, not ``isinstance``); anything
    else, including subclasses, becomes ``["unsupported", name]``. Container iteration of
    exact built-in types is done by C code that calls no user method. ``max_items`` bounds
    the total number of encoded nodes (a cyclic or gigantic value raises ``EncodingError``).
    """
    budget = [max_items]
    return _encode(value, 0, budget, set())


def _type_name(value: Any) -> str:
    t = type(value)
    # type.__qualname__ / __module__ of a class are plain attributes on the type object;
    # read through type's own descriptors so a metaclass cannot run code here.
    try:
        qualname = type.__dict__["__qualname__"].__get__(t)
        module = type.__dict__["__module__"].__get__(t)
    except Exception:  # pragma: no cover - exotic metaclass
        return "?"
    if type(qualname) is not str or type(module) is not str:
        return "?"
    return f"{module}.{qualname}" if module != "builtins" else qualname


def _enter(active: set, value: Any) -> int:
    """Mark a container as being encoded (a container met again inside itself is a cycle)."""
    key = id(value)
    if key in active:
        raise EncodingError("value contains itself (cycle)")
    active.add(key)
    return key


def _refuse(budget: list) -> None:
    raise EncodingError("value too large to encode" if budget[0] < 0 else "value nested too deeply to encode")


def _encode(value: Any, depth: int, budget: list, active: set) -> Value:
    budget[0] -= 1
    if budget[0] < 0 or depth > _MAX_DEPTH:
        _refuse(budget)
    t = type(value)
    if value is None:
        return ["none"]
    if t is bool:
        return ["bool", value is True]
    if t is int:
        return ["int", int.__repr__(value)]
    if t is float:
        return ["float", float.hex(value)]
    if t is complex:
        return ["complex", float.hex(complex.real.__get__(value)), float.hex(complex.imag.__get__(value))]
    if t is str:
        return ["str", value]
    if t is bytes:
        return ["bytes", bytes.hex(value)]
    if t in (list, tuple, set, frozenset, dict):
        key = _enter(active, value)
        try:
            if t is dict:
                items = [
                    [_encode(k, depth + 1, budget, active), _encode(v, depth + 1, budget, active)]
                    for k, v in dict.items(value)
                ]
                return ["dict", items]
            if t is list:
                it = list.__iter__(value)
            elif t is tuple:
                it = tuple.__iter__(value)
            elif t is set:
                it = set.__iter__(value)
            else:
                it = frozenset.__iter__(value)
            encoded = [_encode(x, depth + 1, budget, active) for x in it]
            if t in (set, frozenset):
                encoded.sort(key=_sort_key)
            return [t.__name__, encoded]
        finally:
            active.discard(key)
    return ["unsupported", _type_name(value)]


def _sort_key(v: Value) -> str:
    return repr(v)


try:
    from _json import encode_basestring_ascii as _quote
except ImportError:  # pragma: no cover - CPython always has _json
    from json.encoder import py_encode_basestring_ascii as _quote
_join = ",".join


def encode_json(value: Any, max_items: int = 1_000_000) -> str:
    """The JSON text (ASCII, no spaces) of ``encode(value)``, built in one pass.

    The child sends every call's value as JSON; building the lists first and then their
    text took about twice as long. Same rules, budget and errors as ``encode``; sets are
    ordered as ``encode`` orders them.
    """
    budget = [max_items]
    return _encode_json(value, 0, budget, set())


def _encode_json(value: Any, depth: int, budget: list, active: set) -> str:
    budget[0] -= 1  # (the twin of `_encode`, node for node)
    if budget[0] < 0 or depth > _MAX_DEPTH:
        _refuse(budget)
    t = type(value)
    if value is None:
        return '["none"]'
    if t is bool:
        return '["bool",true]' if value is True else '["bool",false]'
    if t is int:
        return '["int","' + int.__repr__(value) + '"]'
    if t is float:
        return '["float","' + float.hex(value) + '"]'
    if t is complex:
        return ('["complex","' + float.hex(complex.real.__get__(value)) + '","'
                + float.hex(complex.imag.__get__(value)) + '"]')
    if t is str:
        return '["str",' + _quote(value) + "]"
    if t is bytes:
        return '["bytes","' + bytes.hex(value) + '"]'
    if t in (list, tuple, set, frozenset, dict):
        key = _enter(active, value)
        try:
            if t is list or t is tuple:
                it = list.__iter__(value) if t is list else tuple.__iter__(value)
                return ('["' + t.__name__ + '",['
                        + _join([_encode_json(x, depth + 1, budget, active) for x in it]) + "]]")
            if t is dict:
                return '["dict",[' + _join([
                    "[" + _encode_json(k, depth + 1, budget, active) + "," + _encode_json(v, depth + 1, budget, active) + "]"
                    for k, v in dict.items(value)
                ]) + "]]"
            it = set.__iter__(value) if t is set else frozenset.__iter__(value)
            encoded = [_encode(x, depth + 1, budget, active) for x in it]
            encoded.sort(key=_sort_key)
            return '["' + t.__name__ + '",' + plain_json(encoded) + "]"
        finally:
            active.discard(key)
    return '["unsupported",' + _quote(_type_name(value)) + "]"


def plain_json(x: Any) -> str:
    """JSON of plain data (None, bool, int, str and lists of them): the child's records and
    an encoding's items, without the json module's Python code, which looks names up in
    ``builtins`` that a run may have patched."""
    if x is None:
        return "null"
    if x is True:
        return "true"
    if x is False:
        return "false"
    t = type(x)
    if t is str:
        return _quote(x)
    if t is int:
        return int.__repr__(x)
    if t is list:
        return "[" + _join([plain_json(v) for v in x]) + "]"
    raise TypeError(f"cannot serialise {t!r} in a result record")


def check_value(v: Any, depth: int = 0) -> Value:
    """Validate an encoding received from an untrusted channel; return it or raise ValueError."""
    try:
        return _check_value(v, depth)
    except (OverflowError, RecursionError) as e:
        raise ValueError(f"malformed value encoding: {e}") from None


def _check_value(v: Any, depth: int = 0) -> Value:
    # (every value a run returns passes here, in the worker and again in the judge: no
    # closure or slice per node)
    if depth > _MAX_DEPTH + 1:
        raise ValueError("encoding nested too deeply")
    if type(v) is not list or not v or type(v[0]) is not str:
        raise ValueError(f"malformed value encoding: {v!r:.80}")
    tag = v[0]
    n = len(v) - 1
    if tag in _TEXT_TAGS:
        if n != 1:
            _wrong_fields(tag, 1, n)
        text = v[1]
        if type(text) is not str:
            raise ValueError(_TEXT_TAGS[tag])
        if tag == "int":
            int(text)
        elif tag == "float":
            float.fromhex(text)
        elif tag == "bytes":
            bytes.fromhex(text)
    elif tag in _SEQUENCE_TAGS:
        if n != 1:
            _wrong_fields(tag, 1, n)
        items = v[1]
        if type(items) is not list:
            raise ValueError(f"{tag} value must hold a list of items")
        for x in items:
            _check_value(x, depth + 1)
    elif tag == "none":
        if n != 0:
            _wrong_fields(tag, 0, n)
    elif tag == "bool":
        if n != 1:
            _wrong_fields(tag, 1, n)
        if type(v[1]) is not bool:
            raise ValueError("bool value must be true/false")
    elif tag == "complex":
        if n != 2:
            _wrong_fields(tag, 2, n)
        for a in (v[1], v[2]):
            if type(a) is not str:
                raise ValueError("complex parts must be float.hex text")
            float.fromhex(a)
    elif tag == "dict":
        if n != 1:
            _wrong_fields(tag, 1, n)
        if type(v[1]) is not list:
            raise ValueError("dict value must hold a list of pairs")
        for pair in v[1]:
            if type(pair) is not list or len(pair) != 2:
                raise ValueError("dict item must be a [key, value] pair")
            _check_value(pair[0], depth + 1)
            _check_value(pair[1], depth + 1)
    else:
        raise ValueError(f"unknown value tag {tag!r}")
    return v


#: Tags whose one field is text, with the error when it is not.
_TEXT_TAGS = {
    "int": "int value must be decimal text",
    "float": "float value must be float.hex text",
    "str": "str value must be a string",
    "bytes": "bytes value must be hex text",
    "unsupported": "unsupported value must name its type",
}


def _wrong_fields(tag: str, want: int, got: int) -> None:
    raise ValueError(f"value tag {tag!r} expects {want} fields, got {got}")


def _floats_close(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return math.isclose(a, b, rel_tol=FLOAT_REL_TOL, abs_tol=FLOAT_ABS_TOL)


def values_equal(a: Value, b: Value) -> bool:
    """Trusted comparison of two encodings: exact types, floats with a small tolerance.

    ``int`` never equals ``float`` and ``True`` never equals ``1`` (types must match);
    NaN equals NaN; sets and dict keys are matched regardless of order; ``unsupported``
    equals nothing. Malformed encodings (what ``check_value`` refuses) compare unequal
    rather than raising.
    """
    try:
        return _equal(a, b, 0)
    except (ValueError, TypeError, IndexError, RecursionError, OverflowError):
        return False


def _equal(a: Value, b: Value, depth: int) -> bool:
    """Equal, and both well-formed as ``check_value`` sees it, in one walk.

    (Every value of a step is compared here, many twice: checking both sides first and then
    comparing walked each value three times.) True needs every node of both sides visited:
    a node's shape is checked where it is compared, and an unequal pair is False anyway.
    """
    if depth > _MAX_DEPTH + 1 or type(a) is not list or type(b) is not list or not a or not b:
        return False
    tag = a[0]
    n = len(a)
    if type(tag) is not str or type(b[0]) is not str or tag != b[0] or n != len(b):
        return False
    if tag == "none":
        return n == 1
    if n == 2:
        x, y = a[1], b[1]
        if tag in ("list", "tuple"):
            return (type(x) is list and type(y) is list and len(x) == len(y)
                    and all(_equal(p, q, depth + 1) for p, q in zip(x, y)))
        if tag in ("set", "frozenset"):
            return type(x) is list and type(y) is list and _match_unordered(x, y, lambda p, q: _equal(p, q, depth + 1))
        if tag == "dict":
            return type(x) is list and type(y) is list and _match_unordered(x, y, lambda p, q: _pair_equal(p, q, depth + 1))
        if tag == "bool":
            return type(x) is bool and type(y) is bool and x == y
        if type(x) is not str or type(y) is not str:
            return False
        if tag == "str":
            return x == y
        if tag == "int":
            return int(x) == int(y)
        if tag == "float":
            return _floats_close(float.fromhex(x), float.fromhex(y))
        if tag == "bytes":
            return x == y and bytes.fromhex(x) is not None
        return False  # unsupported (equals nothing) or an unknown tag
    if tag == "complex" and n == 3:
        parts = (a[1], a[2], b[1], b[2])
        if not all(type(part) is str for part in parts):
            return False
        re_a, im_a, re_b, im_b = (float.fromhex(part) for part in parts)
        return _floats_close(re_a, re_b) and _floats_close(im_a, im_b)
    return False


def _pair_equal(p: Value, q: Value, depth: int) -> bool:
    """Two dict items ``[key, value]``, each equal."""
    return (type(p) is list and type(q) is list and len(p) == 2 and len(q) == 2
            and _equal(p[0], q[0], depth) and _equal(p[1], q[1], depth))


def _match_unordered(xs: list, ys: list, eq) -> bool:
    """Each element of ``xs`` pairs with a distinct equal element of ``ys`` (a bijection)."""
    if len(xs) != len(ys):
        return False
    # Fast path: identical canonical orderings (the child sorts set items).
    if all(eq(x, y) for x, y in zip(xs, ys)):
        return True
    remaining = list(ys)
    for x in xs:
        for i, y in enumerate(remaining):
            if eq(x, y):
                del remaining[i]
                break
        else:
            return False
    return True


def _float_source(h: str) -> str:
    f = float.fromhex(h)
    if math.isnan(f):
        return "float('nan')"
    if math.isinf(f):
        return "float('inf')" if f > 0 else "-float('inf')"
    return repr(f)


def to_source(value: Value) -> str:
    """Render an encoding as a Python literal expression (``eval`` gives back an equal value).

    Used to write corrected tests ``assert CALL == LITERAL``. Raises ``ValueError`` for an
    ``unsupported`` value or a malformed encoding.
    """
    check_value(value)
    return _source(value)


def _source(v: Value) -> str:
    tag = v[0]
    if tag == "none":
        return "None"
    if tag == "bool":
        return "True" if v[1] else "False"
    if tag == "int":
        return str(int(v[1]))
    if tag == "float":
        return _float_source(v[1])
    if tag == "complex":
        return f"complex({_float_source(v[1])}, {_float_source(v[2])})"
    if tag == "str":
        return repr(v[1])
    if tag == "bytes":
        return repr(bytes.fromhex(v[1]))
    if tag == "list":
        return "[" + ", ".join(_source(x) for x in v[1]) + "]"
    if tag == "tuple":
        items = [_source(x) for x in v[1]]
        return "(" + items[0] + ",)" if len(items) == 1 else "(" + ", ".join(items) + ")"
    if tag == "set":
        return "{" + ", ".join(_source(x) for x in v[1]) + "}" if v[1] else "set()"
    if tag == "frozenset":
        return "frozenset({" + ", ".join(_source(x) for x in v[1]) + "})" if v[1] else "frozenset()"
    if tag == "dict":
        return "{" + ", ".join(f"{_source(k)}: {_source(x)}" for k, x in v[1]) + "}"
    raise ValueError(f"cannot render a {tag} value as a literal ({v[1] if len(v) > 1 else ''})")
