"""Plain-data encoding of Python values, and the trusted comparison of two encodings.

Why: a candidate's return value may be an object whose ``__eq__`` lies, or a subclass of
``int``/``str``/``list`` that compares equal to anything. So the *child* turns a value into
plain data (JSON-compatible lists tagged with the exact type) without ever calling code the
candidate wrote, and the *parent* compares two encodings with code the candidate never sees.

Encoding (``Value``): ``["none"]``, ``["bool", b]``, ``["int", "123"]`` (decimal text, any
size), ``["float", "0x1.8p+1"]`` (``float.hex``, exact, covers nan/inf), ``["complex", re, im]``
(two float hexes), ``["str", s]``, ``["bytes", hexdigits]``, ``["list"|"tuple"|"set"|"frozenset",
[items]]``, ``["dict", [[key, value], ...]]`` and ``["unsupported", "type name"]``, which
equals nothing (not even itself). Common standard-library and numpy types have tags of their
own (``EXTRA_TAGS``): ``["counter"|"ordereddict"|"defaultdict", [[key, value], ...]]``,
``["deque", [items]]``, ``["namedtuple", "TypeName", [items]]``, ``["decimal", text]``,
``["fraction", num, den]``, ``["range", start, stop, step]`` (decimal texts),
``["date", [y, m, d]]``, ``["datetime", [y, m, d, H, M, S, us, fold], offset]``,
``["time", [H, M, S, us, fold], offset]``, ``["timedelta", [days, seconds, us]]`` (offset:
null or ``[days, seconds, us]`` of the UTC offset), ``["npscalar", dtype, value]``,
``["ndarray", dtype, [shape], [items in C order]]`` and, for an instance of a class the run's
program defines (every class of its MRO but ``object`` from ``__main__``),
``["object", "TypeName", [[attribute, value], ...]]``; an enum member is
``["enum", "TypeName", "MEMBER", value, class, data]`` (``data``: null for a plain Enum,
whose members compare by identity, or the member's own int/float/str/bytes/complex/tuple
where its class mixes that type in, IntEnum or ``class Dir(str, Enum)``: Python compares
such a member as its data); ``["namespace", [[attribute, value], ...]]`` for a
``types.SimpleNamespace``; ``["array", typecode, [items]]`` for an ``array.array``; for an
instance of a program's class derived from a built-in type (``class Row(list)``, from
int, float, complex, str, bytes, bytearray, list, tuple, dict, set, frozenset,
SimpleNamespace or array.array: `_encode_subclass`), ``["subclass", "TypeName", data,
[[attribute, value], ...], own_eq]``, its built-in part encoded as a value of the base
type; a value whose encoding is longer than the run's bound crosses
as ``["digest", sha256, size]`` (``encode_to_send``). A set's items are in the order of
their JSON texts; dict items (and attributes) in insertion order, or sorted by their texts in the
``canonical`` encoding a digest is taken of. A dict's keys or items view is a
``set`` (of keys, or of ``(key, value)`` tuples), which it equals under ``==``. Exact types
only, but for the program's subclasses of built-in types: any other subclass (a Counter
whose ``__eq__`` lies) is ``unsupported``. How two encodings compare is
``values_equal`` (exact types, the project's alternative) or ``codea1.sandbox.decode`` (Python's
``==`` on trusted decoded values, the reference's rule).
"""

from __future__ import annotations

import math
import re
import sys
import types as _types
from hashlib import sha256 as _sha256
from typing import Any

# Pin the builtins this module uses: a candidate that patches ``builtins`` in the run's
# interpreter must not change how its values are encoded.
import builtins as _builtins  # noqa: E402

(bool, bytes, complex, dict, float, frozenset, id, int, isinstance, len, list, repr, set, str,
 tuple, type, memoryview, compile, eval, exec, getattr, range, object, issubclass) = (
    _builtins.bool, _builtins.bytes, _builtins.complex, _builtins.dict, _builtins.float,
    _builtins.frozenset, _builtins.id, _builtins.int, _builtins.isinstance, _builtins.len,
    _builtins.list, _builtins.repr, _builtins.set, _builtins.str, _builtins.tuple, _builtins.type,
    _builtins.memoryview, _builtins.compile, _builtins.eval, _builtins.exec, _builtins.getattr,
    _builtins.range, _builtins.object, _builtins.issubclass)
bytearray, map = _builtins.bytearray, _builtins.map
_modules = sys.modules  # (the dict itself: a run that rebinds `sys.modules` does not change it)

Value = list  # a tagged plain-data encoding (see module docstring)

#: Float comparison tolerances of :func:`values_equal` (relative, absolute).
FLOAT_REL_TOL = 1e-6
FLOAT_ABS_TOL = 1e-9

_SEQUENCE_TAGS = {"list", "tuple", "set", "frozenset"}
#: What `str(Decimal)` writes: a number, or an infinity or NaN (with a payload).
_DECIMAL_TEXT = re.compile(r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|Infinity|s?NaN\d*)")
#: How deep a value may nest: as deep as the reference's `repr` of it can go at the top level
#: of a plain program (Python's default recursion limit, 1000, less the frames in use).
_MAX_DEPTH = 990
#: How many nodes one value may have (a 100,000-element list of pairs is 300,001): more than
#: any value sent whole can have (a node takes at least 9 bytes, `["none"],`, so a value of
#: 16 MiB, `Limits.max_value_bytes`, has fewer than 1,870,000): only a value larger than
#: that and this large too is refused rather than sent as its digest.
MAX_ITEMS = 2_000_000


#: The recursion limit a process needs to check, decode and compare values `_MAX_DEPTH` deep.
DEEP_VALUES_RECURSION_LIMIT = 8 * _MAX_DEPTH


def allow_deep_values() -> None:
    """Raise this interpreter's recursion limit (never lower it) so that values nested as
    deep as an encoding may be can be read and compared here (json's decoder and the
    comparisons recurse once or twice per level)."""
    if sys.getrecursionlimit() < DEEP_VALUES_RECURSION_LIMIT:
        sys.setrecursionlimit(DEEP_VALUES_RECURSION_LIMIT)


class EncodingError(ValueError):
    """A value could not be encoded (too deep, too large)."""


def encode(value: Any, max_items: int = MAX_ITEMS, canonical: bool = False) -> Value:
    """Encode ``value`` into plain data, never calling methods of user-defined types.

    Only exact built-in types are encoded (``type(x) is int``, not ``isinstance``), and a
    program's subclasses of them (as ``subclass``, read by the base type's own C methods);
    anything else, including other subclasses, becomes ``["unsupported", name]``. Container iteration of
    exact built-in types is done by C code that calls no user method. ``max_items`` bounds
    the total number of encoded nodes (a cyclic or gigantic value raises ``EncodingError``).
    A set's items are in the order of their JSON texts (`encode_json`); a dict's, Counter's
    and defaultdict's items and an object's attributes are in insertion order, or with
    ``canonical`` in the order of their JSON texts too (what a digest is taken of: two
    values equal whatever their insertion order encode alike; an OrderedDict, whose ``==``
    with another OrderedDict depends on order, keeps its own).
    """
    budget = _budget(max_items, canonical)
    try:
        return _encode(value, 0, budget, set())
    except RecursionError:  # (this interpreter's limit is below `allow_deep_values`)
        raise EncodingError("value nested too deeply to encode") from None


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


def _budget(max_items: int, canonical: bool) -> list:
    """An encoding's state: ``[nodes left, canonical, kept an insertion order]`` (the last
    is set when a dict-like with two or more items was encoded in insertion order: only
    then can a canonical encoding differ)."""
    return [max_items, canonical is True, False]


def _in_order(items: list, budget: list, key: Any = None) -> list:
    """A dict-like's items (or an object's attributes), sorted by their JSON texts (``key``
    gives the text of an encoded item; None: the items are texts) when the encoding is
    canonical."""
    if len(items) > 1:
        if budget[1]:
            items.sort(key=key)
        else:
            budget[2] = True
    return items


def _sorted_items(encoded: list) -> list:
    """A set's encoded items in the order of their JSON texts (the order `_encode_json`
    writes them in; a text is built once per item, by C code mostly)."""
    if len(encoded) > 1:
        encoded.sort(key=plain_json)
    return encoded


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
    if t is list or t is tuple or t is set or t is frozenset or t is dict:  # (`in` would call a metaclass's __eq__)
        key = _enter(active, value)
        try:
            return _encode_items(value, t, depth, budget, active)
        finally:
            active.discard(key)
    return _encode_extra(value, t, depth, budget, active)


def _encode_items(value: Any, t: type, depth: int, budget: list, active: set) -> Value:
    """The encoding of a list, tuple, set, frozenset or dict ``t`` (`value` is one, or an
    instance of a program's subclass of it), read by ``t``'s own C iteration."""
    if t is dict:
        items = [
            [_encode(k, depth + 1, budget, active), _encode(v, depth + 1, budget, active)]
            for k, v in dict.items(value)
        ]
        return ["dict", _in_order(items, budget, plain_json)]
    if t is list:
        it = list.__iter__(value)
    elif t is tuple:
        it = tuple.__iter__(value)
    elif t is set:
        it = set.__iter__(value)
    else:
        it = frozenset.__iter__(value)
    encoded = [_encode(x, depth + 1, budget, active) for x in it]
    if t is set or t is frozenset:
        _sorted_items(encoded)
    return [t.__name__, encoded]


#: The tags of the standard-library, numpy and program-defined types (see the module docstring).
EXTRA_TAGS = ("counter", "ordereddict", "defaultdict", "deque", "namedtuple", "decimal", "fraction", "range",
              "date", "datetime", "time", "timedelta", "npscalar", "ndarray", "object", "enum", "bytearray",
              "digest", "namespace", "array", "subclass")
_DICT_KINDS = {"Counter": "counter", "OrderedDict": "ordereddict", "defaultdict": "defaultdict"}
#: a dict's keys and items views compare as sets under Python's `==` (`d.keys() == {1, 3}`),
#: so they cross as sets; a values view equals nothing but itself, and stays unsupported
_SET_VIEWS = (type({}.keys()), type({}.items()))


def _encode_extra(value: Any, t: type, depth: int, budget: list, active: set) -> Value:
    """Encode a value of one of the `EXTRA_TAGS` types, else ``unsupported``.

    Types are looked up in the modules the run has loaded (a value of a type whose module
    was never imported cannot occur), and must match exactly. This runs in the child, on
    values the run made: what it reads can at most make the encoding claim a value the run
    could have returned as plain data, and the parent decodes and compares plain data only.
    """
    module = _modules.get("collections")
    if module is not None:
        for name, tag in _DICT_KINDS.items():
            if t is getattr(module, name, None):
                key = _enter(active, value)
                try:
                    items = [[_encode(k, depth + 1, budget, active), _encode(v, depth + 1, budget, active)]
                             for k, v in dict.items(value)]
                finally:
                    active.discard(key)
                # (two OrderedDicts are equal only in the same order: theirs is kept)
                return [tag, items if tag == "ordereddict" else _in_order(items, budget, plain_json)]
        if t is getattr(module, "deque", None):
            key = _enter(active, value)
            try:
                return ["deque", [_encode(x, depth + 1, budget, active) for x in module.deque.__iter__(value)]]
            finally:
                active.discard(key)
    if t is _SET_VIEWS[0] or t is _SET_VIEWS[1]:
        key = _enter(active, value)
        try:
            encoded = [_encode(x, depth + 1, budget, active) for x in t.__iter__(value)]
        finally:
            active.discard(key)
        return ["set", _sorted_items(encoded)]
    if t is range:
        return ["range", int.__repr__(value.start), int.__repr__(value.stop), int.__repr__(value.step)]
    if t is bytearray:
        return ["bytearray", bytearray.hex(value)]
    if t is _NAMESPACE:
        key = _enter(active, value)
        try:
            encoded = _encode_namespace(value, depth, budget, active)
        finally:
            active.discard(key)
        return encoded if encoded is not None else ["unsupported", _type_name(value)]
    module = _modules.get("array")
    if module is not None and t is getattr(module, "array", None):
        key = _enter(active, value)
        try:
            return _encode_array(t, value, depth, budget, active)
        finally:
            active.discard(key)
    member = _encode_enum(value, t, depth, budget, active)
    if member is not None:
        return member
    module = _modules.get("decimal")
    if module is not None and t is getattr(module, "Decimal", None):
        return ["decimal", t.__str__(value)]
    module = _modules.get("fractions")
    if module is not None and t is getattr(module, "Fraction", None):
        num, den = value.numerator, value.denominator
        if type(num) is int and type(den) is int:
            return ["fraction", int.__repr__(num), int.__repr__(den)]
    module = _modules.get("datetime")
    if module is not None:
        encoded = _encode_datetime(module, value, t)
        if encoded is not None:
            return encoded
    module = _modules.get("numpy")
    if module is not None:
        encoded = _encode_numpy(module, value, t, depth, budget, active)
        if encoded is not None:
            return encoded
    try:
        bases = type.__dict__["__bases__"].__get__(t)
        own = type.__dict__["__dict__"].__get__(t)
    except Exception:  # pragma: no cover - exotic metaclass
        return ["unsupported", _type_name(value)]
    if bases == (tuple,) and type(own.get("_fields")) is tuple:  # a namedtuple class (not a subclass of one)
        key = _enter(active, value)
        try:
            return ["namedtuple", _type_name(value), [_encode(x, depth + 1, budget, active) for x in tuple.__iter__(value)]]
        finally:
            active.discard(key)
    attributes = _program_attributes(value, t)
    if attributes is not None:
        key = _enter(active, value)
        try:
            return ["object", _type_name(value),
                    _in_order([[name, _encode(v, depth + 1, budget, active)] for name, v in attributes], budget, plain_json)]
        finally:
            active.discard(key)
    encoded = _encode_subclass(value, t, depth, budget, active)
    return encoded if encoded is not None else ["unsupported", _type_name(value)]


_NAMESPACE = _types.SimpleNamespace
#: a SimpleNamespace's attribute dict, read by the type's own member descriptor (an
#: instance of a program's subclass too: no `__dict__` property the subclass defines runs)
_NAMESPACE_DICT = _NAMESPACE.__dict__["__dict__"]


def _encode_namespace(value: Any, depth: int, budget: list, active: set) -> Value | None:
    """``["namespace", [[attribute, value], ...]]`` of a `types.SimpleNamespace` (or of the
    namespace part of an instance of a program's subclass of it); None where its dict holds
    a name that is no string. Python compares two namespaces by their dicts."""
    state = _NAMESPACE_DICT.__get__(value)
    if type(state) is not dict:
        return None
    if any(type(name) is not str for name in dict.keys(state)):
        return None
    return ["namespace", _in_order([[name, _encode(item, depth + 1, budget, active)]
                                    for name, item in dict.items(state)], budget, plain_json)]


#: The type of the items of an `array.array` of each typecode (what `tolist` gives).
ARRAY_ITEM_TAGS = {**{code: "int" for code in "bBhHiIlLqQ"}, "f": "float", "d": "float", "u": "str", "w": "str"}


def _encode_array(cls: type, value: Any, depth: int, budget: list, active: set) -> Value:
    """``["array", typecode, [items]]`` of an `array.array` (``cls``; ``value`` may be an
    instance of a program's subclass of it), read by the type's own C accessors. Python
    compares two arrays item by item, whatever their typecodes, and an array with no list."""
    size = cls.__len__(value)
    if type(size) is not int or size > budget[0]:
        raise EncodingError("value too large to encode")
    typecode = cls.__dict__["typecode"].__get__(value)
    items = cls.tolist(value)
    if type(typecode) is not str or type(items) is not list:  # pragma: no cover - the C type's own accessors
        raise EncodingError("array value could not be read")
    return ["array", typecode, [_encode(x, depth + 1, budget, active) for x in items]]


#: The built-in types a program's class may derive from and still cross (as ``subclass``),
#: each with the tag its data crosses as; `array.array` too, looked up where it is loaded.
_SUBCLASS_BASES = ((int, "int"), (float, "float"), (complex, "complex"), (str, "str"), (bytes, "bytes"),
                   (bytearray, "bytearray"), (list, "list"), (tuple, "tuple"), (dict, "dict"), (set, "set"),
                   (frozenset, "frozenset"), (_NAMESPACE, "namespace"))
SUBCLASS_BASE_TAGS = frozenset([tag for _, tag in _SUBCLASS_BASES] + ["array"])


def _builtin_base(t: type) -> tuple | None:
    """``(base, own)`` where ``t`` is a class the program defined on a `_SUBCLASS_BASES`
    type or `array.array` (its MRO: classes of ``__main__``, ``own``, then exactly the
    base's own MRO: ``class Row(list)``, ``class Point(Mixin, tuple)``), else None."""
    try:
        mro = type.__dict__["__mro__"].__get__(t)
    except Exception:  # pragma: no cover - exotic metaclass
        return None
    k, n = 0, len(mro)
    while k < n and _module_name(mro[k]) == "__main__":
        k += 1
    if k == 0 or k == n:
        return None
    base = mro[k]
    if not any(base is kind for kind, _ in _SUBCLASS_BASES):
        module = _modules.get("array")
        if module is None or base is not getattr(module, "array", None):
            return None
    rest = type.__dict__["__mro__"].__get__(base)
    if len(rest) != n - k or any(a is not b for a, b in zip(rest, mro[k:])):
        return None
    return base, mro[:k]


def _encode_subclass(value: Any, t: type, depth: int, budget: list, active: set) -> Value | None:
    """``["subclass", "TypeName", data, [[attribute, value], ...], own_eq]`` for an instance
    of a program's class derived from a built-in type (`_builtin_base`), else None.

    ``data`` is the instance's built-in part, read by the base type's own C methods and
    encoded as a value of that type (``class Row(list)``: a ``list``); the attributes are
    its own (dict and slots). ``own_eq``: a class of the program defines ``__eq__`` or
    ``__ne__``. Python compares an instance whose classes define neither as its built-in
    part (``Row([1]) == [1]``, and a candidate's own ``Row`` equals the reference's); one
    whose class defines them runs that code, which is never trusted here: it equals an
    instance of the same type name with equal data and attributes only (see
    `codea1.sandbox.decode.Subclass`)."""
    found = _builtin_base(t)
    if found is None:
        return None
    base, own = found
    state = _instance_dict(value, own)
    if state is None:
        return None
    attributes = _own_attributes(value, own, state)
    if attributes is None:
        return None
    own_eq = False
    for c in own:
        methods = type.__dict__["__dict__"].__get__(c)
        own_eq = own_eq or "__eq__" in methods or "__ne__" in methods
    key = _enter(active, value)
    try:
        data = _encode_base(value, base, depth + 1, budget, active)
        if data is None:
            return None
        return ["subclass", _type_name(value), data,
                _in_order([[name, _encode(v, depth + 1, budget, active)] for name, v in attributes], budget, plain_json),
                own_eq]
    finally:
        active.discard(key)


def _encode_base(value: Any, base: type, depth: int, budget: list, active: set) -> Value | None:
    """The built-in part of an instance of a program's subclass of ``base``, encoded as a
    value of exactly that type: an exact copy (`_ENUM_DATA`, for an immutable base), or
    read by ``base``'s own C methods (an override never runs)."""
    for kind, copy in _ENUM_DATA:
        if base is kind:
            return _encode(copy(value), depth, budget, active)
    if base is bytearray:
        return _encode(bytearray.__getitem__(value, _WHOLE), depth, budget, active)
    budget[0] -= 1
    if budget[0] < 0 or depth > _MAX_DEPTH:
        _refuse(budget)
    if base is _NAMESPACE:
        return _encode_namespace(value, depth, budget, active)
    if base is list or base is set or base is frozenset or base is dict:
        return _encode_items(value, base, depth, budget, active)
    return _encode_array(base, value, depth, budget, active)


#: The data types an enum class may mix in (`class Level(IntEnum)`, `class Dir(str, Enum)`)
#: whose data is read here, each with the type's own C method that copies a member's data
#: out as a value of exactly that type (a subclass's overrides never run); a member of such
#: a class compares as that data under Python's `==` (`Level.HIGH == 2`). (The data of an
#: instance of a program's subclass of one of them is copied out alike: `_encode_base`.)
_WHOLE = _builtins.slice(None)
_ENUM_DATA = ((int, int.__int__), (float, float.__float__), (str, str.__str__),
              (bytes, lambda v: bytes.__getitem__(v, _WHOLE)), (complex, complex.__pos__),
              (tuple, lambda v: tuple(tuple.__iter__(v))))
_ENUM_DATA_TAGS = tuple(kind.__name__ for kind, _ in _ENUM_DATA)


def _encode_enum(value: Any, t: type, depth: int, budget: list, active: set) -> Value | None:
    """``["enum", "TypeName", "MEMBER", value, class, data]`` for a member of an `enum.Enum`
    class (read through `object`'s and `type`'s own accessors: no method of the class
    runs), else None. `class` names the class object within the run (a member of a plain
    Enum compares by identity in Python: a candidate's own `Color` is not the reference's,
    whatever its members). `data` is the member's own data, exactly typed, where its class
    mixes in one of the `_ENUM_DATA_TAGS` types (IntEnum, IntFlag, StrEnum, `(str, Enum)`:
    Python compares such a member as that data, `Level.HIGH == 2`), else null."""
    module = _modules.get("enum")
    if module is None:
        return None
    try:
        enum = module.Enum
        mro = type.__dict__["__mro__"].__get__(t)
        if not any(c is enum for c in mro):  # (by identity: `in` would call a metaclass's __eq__)
            return None
        state = _instance_dict(value, mro)  # (the member's own `_name_` and `_value_`)
        data_type = type.__dict__["__dict__"].__get__(t).get("_member_type_")
    except Exception:
        return None
    if state is None:
        return None
    name, inner = dict.get(state, "_name_"), dict.get(state, "_value_", _ABSENT)
    if type(name) is not str or inner is _ABSENT:
        return None
    data = None
    if data_type is not object and any(c is data_type for c in mro):
        data = _enum_data(value, data_type, depth, budget, active)
    return ["enum", _type_name(value), name, _encode(inner, depth + 1, budget, active), int.__repr__(id(t)), data]


def _enum_data(value: Any, data_type: type, depth: int, budget: list, active: set) -> Value | None:
    """The data of a member whose enum class mixes in ``data_type``: its exact copy
    (`_ENUM_DATA`), encoded as any value of that type; None for a data type not read here
    (such a member compares by identity, as a plain one)."""
    for kind, copy in _ENUM_DATA:
        if data_type is kind:
            return _encode(copy(value), depth + 1, budget, active)
    return None


def _encode_datetime(module: Any, value: Any, t: type) -> Value | None:
    if t is getattr(module, "timedelta", None):
        return ["timedelta", [value.days, value.seconds, value.microseconds]]
    if t is getattr(module, "date", None):
        return ["date", [value.year, value.month, value.day]]
    if t is getattr(module, "datetime", None):
        fields = [value.year, value.month, value.day, value.hour, value.minute, value.second, value.microsecond,
                  value.fold]
    elif t is getattr(module, "time", None):
        fields = [value.hour, value.minute, value.second, value.microsecond, value.fold]
    else:
        return None
    offset = value.utcoffset()
    if offset is None:
        return [t.__name__, fields, None]
    if type(offset) is not getattr(module, "timedelta", None):
        return ["unsupported", _type_name(value)]
    return [t.__name__, fields, [offset.days, offset.seconds, offset.microseconds]]


def _encode_numpy(np: Any, value: Any, t: type, depth: int, budget: list, active: set) -> Value | None:
    generic = getattr(np, "generic", None)
    if t is getattr(np, "ndarray", None):
        size = value.size
        if type(size) is not int or size > budget[0]:
            raise EncodingError("value too large to encode")
        shape = [dim for dim in value.shape]
        items = value.ravel().tolist()
        key = _enter(active, value)
        try:
            return ["ndarray", value.dtype.str, shape, [_encode(x, depth + 1, budget, active) for x in items]]
        finally:
            active.discard(key)
    if isinstance(generic, type) and issubclass(t, generic) and _module_name(t) == "numpy":
        return ["npscalar", value.dtype.str, _encode(value.item(), depth + 1, budget, active)]
    return None


def _module_name(t: type) -> str | None:
    try:
        module = type.__dict__["__module__"].__get__(t)
    except Exception:  # pragma: no cover - exotic metaclass
        return None
    return module if type(module) is str else None


class _SlotProbe:
    __slots__ = ("x",)


_MemberDescriptor = type(_SlotProbe.__dict__["x"])  # (types.MemberDescriptorType)


_GetSetDescriptor = type(type.__dict__["__dict__"])  # (types.GetSetDescriptorType)
_ABSENT = object()


def _instance_dict(value: Any, mro: tuple) -> dict | None:
    """An instance's own attribute dict, read by the descriptor Python made for it (the
    first ``__dict__`` of the class's MRO; `object.__getattribute__` would call a property
    the class defined under that name), {} for an instance without one, None where a class
    defines ``__dict__`` itself. (An enum member's `_name_` and `_value_` are read here; a
    program object's attributes still through `object.__getattribute__`, whose `__dict__`
    property may run and report data only: tests/test_sandbox_attacks.py, DictTrick.)"""
    for c in mro:
        descriptor = type.__dict__["__dict__"].__get__(c).get("__dict__", _ABSENT)
        if descriptor is _ABSENT:
            continue
        if type(descriptor) is not _GetSetDescriptor:
            return None
        try:
            state = _GetSetDescriptor.__get__(descriptor, value, c)
        except Exception:
            return None
        return state if type(state) is dict else None
    return {}


def _program_attributes(value: Any, t: type) -> list | None:
    """`(name, value)` of the attributes of an instance of a class the program defined
    (every class of its MRO but `object` from `__main__`), or None for any other value."""
    try:
        mro = type.__dict__["__mro__"].__get__(t)
    except Exception:  # pragma: no cover - exotic metaclass
        return None
    if len(mro) < 2 or mro[-1] is not object or any(_module_name(c) != "__main__" for c in mro[:-1]):
        return None
    try:
        state = object.__getattribute__(value, "__dict__")
    except AttributeError:
        state = {}
    if type(state) is not dict:
        return None
    return _own_attributes(value, mro[:-1], state)


def _own_attributes(value: Any, classes: tuple, state: dict) -> list | None:
    """`(name, value)` of an instance's attributes: those of its dict ``state``, then those
    kept in the ``__slots__`` of the program's ``classes``; None for a name that is no
    string."""
    attributes = []
    for name, item in dict.items(state):
        if type(name) is not str:
            return None
        attributes.append((name, item))
    for c in classes:  # attributes kept in __slots__
        own = type.__dict__["__dict__"].__get__(c)
        slots = own.get("__slots__", ())
        for name in ([slots] if type(slots) is str else slots if type(slots) is tuple or type(slots) is list else ()):
            if type(name) is not str or name in ("__dict__", "__weakref__"):
                continue
            if name.startswith("__") and not name.endswith("__"):
                name = "_" + type.__dict__["__name__"].__get__(c).lstrip("_") + name
            descriptor = own.get(name)
            if type(descriptor) is not _MemberDescriptor:
                continue
            try:
                attributes.append((name, descriptor.__get__(value, c)))
            except AttributeError:  # an unset slot
                continue
    return attributes


try:
    from _json import encode_basestring_ascii as _quote
except ImportError:  # pragma: no cover - CPython always has _json
    from json.encoder import py_encode_basestring_ascii as _quote
_join = ",".join


def encode_json(value: Any, max_items: int = MAX_ITEMS, canonical: bool = False) -> str:
    """The JSON text (ASCII, no spaces) of ``encode(value, canonical=canonical)``, built in
    one pass.

    The child sends every call's value as JSON; building the lists first and then their
    text took about twice as long. Same rules, budget and errors as ``encode``; a set's
    items are written in the order of their texts (``encode`` orders them alike).
    """
    try:
        return _encode_json(value, 0, _budget(max_items, canonical), set())
    except RecursionError:  # (this interpreter's limit is below `allow_deep_values`)
        raise EncodingError("value nested too deeply to encode") from None


def encode_to_send(value: Any, max_bytes: int, keep_text: bool = True) -> tuple:
    """``(text, sent)``: ``encode_json(value)`` and what crosses to the parent for it: the
    text itself, or, when it is longer than ``max_bytes``, ``["digest", sha256, size]`` of
    the value's canonical encoding (``encode_json(value, canonical=True)``, as long as the
    text: dict items in a canonical order, so that two equal dicts built in different
    orders have one digest). The canonical text is built only where the text kept an
    insertion order of two or more items; ``keep_text=False`` gives None for ``text`` and
    drops it before that second pass."""
    budget = _budget(MAX_ITEMS, False)
    try:
        text = _encode_json(value, 0, budget, set())
        size = str.__len__(text)
        if size <= max_bytes:
            return text, text
        if budget[2]:  # (a dict-like's insertion order is in the text: encode it again, canonically)
            if not keep_text:
                text = None
            canonical = _encode_json(value, 0, _budget(MAX_ITEMS, True), set())
        else:
            canonical = text
    except RecursionError:  # (this interpreter's limit is below `allow_deep_values`)
        raise EncodingError("value nested too deeply to encode") from None
    sent = '["digest","' + _sha256(str.encode(canonical, "ascii")).hexdigest() + '",' + int.__repr__(size) + "]"
    return (text if keep_text else None), sent


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
    if t is list or t is tuple or t is set or t is frozenset or t is dict:  # (`in` would call a metaclass's __eq__)
        key = _enter(active, value)
        try:
            if t is list or t is tuple:
                return '["' + t.__name__ + '",[' + _join(_items_json(value, depth + 1, budget, active)) + "]]"
            if t is dict:
                keys = _items_json(list(dict.keys(value)), depth + 1, budget, active)
                values = _items_json(list(dict.values(value)), depth + 1, budget, active)
                return '["dict",[' + _join(_in_order(list(map(_PAIR_JSON, keys, values)), budget)) + "]]"
            texts = _items_json(list(value), depth + 1, budget, active)
            texts.sort()  # (the canonical order: by text, compared by C code)
            return '["' + t.__name__ + '",[' + _join(texts) + "]]"
        finally:
            active.discard(key)
    return plain_json(_encode_extra(value, t, depth, budget, active))


def _items_json(items: list | tuple, depth: int, budget: list, active: set) -> list:
    """The JSON texts of a list's or tuple's items (of exact type: iterated by its own C
    code), at ``depth``, each as `_encode_json` writes it: an int, str or float without a
    call of its own.

    (A value of 5 MB has a million nodes, and the child writes each value a run returns:
    a list of 400,000 ints took 0.35 s node by node and 0.25 s so, a set of 100,000
    3-tuples 0.5 s and 0.35 s, medians on a busy 2-core EPYC.) The items' nodes are
    counted against the budget together, after them; where the budget or the depth cannot
    hold them all, node by node as before, so that a value is refused as it was.
    """
    n = len(items)
    if budget[0] < n or depth > _MAX_DEPTH:
        return [_encode_json(x, depth, budget, active) for x in items]
    texts: list = []
    add = texts.append
    containers = 0
    for x in items:
        t = type(x)
        if t is int:
            add('["int","' + int.__repr__(x) + '"]')
        elif t is str:
            add('["str",' + _quote(x) + "]")
        elif t is float:
            add('["float","' + float.hex(x) + '"]')
        else:
            containers += 1
            add(_encode_json(x, depth, budget, active))
    budget[0] -= len(texts) - containers
    if budget[0] < 0:
        _refuse(budget)
    return texts


#: The JSON text of a dict item from the texts of its key and value.
_PAIR_JSON = "[{},{}]".format


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
    elif tag in _EXTRA_CHECKS:
        _EXTRA_CHECKS[tag](v, n, depth)
    else:
        raise ValueError(f"unknown value tag {tag!r}")
    return v


def _check_pairs(tag: str, pairs: Any, depth: int, named: bool = False) -> None:
    if type(pairs) is not list:
        raise ValueError(f"{tag} value must hold a list of pairs")
    for pair in pairs:
        if type(pair) is not list or len(pair) != 2:
            raise ValueError(f"{tag} item must be a [key, value] pair")
        if named:
            if type(pair[0]) is not str:
                raise ValueError(f"{tag} attribute names must be strings")
        else:
            _check_value(pair[0], depth + 1)
        _check_value(pair[1], depth + 1)


def _check_items(tag: str, items: Any, depth: int) -> None:
    if type(items) is not list:
        raise ValueError(f"{tag} value must hold a list of items")
    for x in items:
        _check_value(x, depth + 1)


def _check_ints(tag: str, fields: Any, count: int) -> None:
    if type(fields) is not list or len(fields) != count or any(type(x) is not int for x in fields):
        raise ValueError(f"{tag} value must hold {count} integers")


def _check_int_texts(tag: str, texts: tuple, nonzero_last: bool = False) -> None:
    for text in texts:
        if type(text) is not str:
            raise ValueError(f"{tag} value must hold decimal texts")
        int(text)
    if nonzero_last and int(texts[-1]) == 0:
        raise ValueError(f"{tag} value must not end in 0")


def _fields(want: int):
    def check(v: list, n: int) -> None:
        if n != want:
            _wrong_fields(v[0], want, n)
    return check


def _check_dict_like(v: list, n: int, depth: int) -> None:
    _fields(1)(v, n)
    _check_pairs(v[0], v[1], depth)


def _check_deque(v: list, n: int, depth: int) -> None:
    _fields(1)(v, n)
    _check_items("deque", v[1], depth)


def _check_named(v: list, n: int, depth: int) -> None:
    _fields(2)(v, n)
    if type(v[1]) is not str:
        raise ValueError(f"{v[0]} value must name its type")
    if v[0] == "object":
        _check_pairs("object", v[2], depth, named=True)
    else:
        _check_items(v[0], v[2], depth)


def _check_decimal(v: list, n: int, depth: int) -> None:
    _fields(1)(v, n)
    if type(v[1]) is not str or _DECIMAL_TEXT.fullmatch(v[1]) is None:
        raise ValueError("decimal value must be a decimal number's text")


def _check_fraction(v: list, n: int, depth: int) -> None:
    _fields(2)(v, n)
    _check_int_texts("fraction", (v[1], v[2]), nonzero_last=True)


def _check_range(v: list, n: int, depth: int) -> None:
    _fields(3)(v, n)
    _check_int_texts("range", (v[1], v[2], v[3]), nonzero_last=True)


def _check_three_ints(v: list, n: int, depth: int) -> None:
    _fields(1)(v, n)
    _check_ints(v[0], v[1], 3)


def _check_clock(v: list, n: int, depth: int) -> None:
    _fields(2)(v, n)
    _check_ints(v[0], v[1], 8 if v[0] == "datetime" else 5)
    if v[2] is not None:
        _check_ints(v[0] + " offset", v[2], 3)


def _check_npscalar(v: list, n: int, depth: int) -> None:
    _fields(2)(v, n)
    if type(v[1]) is not str:
        raise ValueError("npscalar value must name its dtype")
    _check_value(v[2], depth + 1)


def _check_ndarray(v: list, n: int, depth: int) -> None:
    _fields(3)(v, n)
    dtype, shape, items = v[1], v[2], v[3]
    if type(dtype) is not str:
        raise ValueError("ndarray value must name its dtype")
    if type(shape) is not list or any(type(d) is not int or d < 0 for d in shape) or len(shape) > 64:
        raise ValueError("ndarray shape must be a list of sizes")
    _check_items("ndarray", items, depth)
    size = 1
    for d in shape:
        size *= d
    if size != len(items):
        raise ValueError("ndarray items do not fill its shape")


def _check_enum(v: list, n: int, depth: int) -> None:
    if n != 5:
        _wrong_fields("enum", 5, n)
    if type(v[1]) is not str or type(v[2]) is not str or type(v[4]) is not str:
        raise ValueError("enum value must name its type, member and class")
    _check_value(v[3], depth + 1)
    data = v[5]
    if data is not None:
        if type(data) is not list or not data or data[0] not in _ENUM_DATA_TAGS:
            raise ValueError("enum data must be null or a value of " + "/".join(_ENUM_DATA_TAGS))
        _check_value(data, depth + 1)


def _check_bytearray(v: list, n: int, depth: int) -> None:
    if n != 1:
        _wrong_fields("bytearray", 1, n)
    if type(v[1]) is not str:
        raise ValueError("bytearray value must be hex text")
    bytes.fromhex(v[1])


_DIGEST = re.compile(r"[0-9a-f]{64}")


def _check_digest(v: list, n: int, depth: int) -> None:
    if n != 2:
        _wrong_fields("digest", 2, n)
    if type(v[1]) is not str or not _DIGEST.fullmatch(v[1]) or type(v[2]) is not int or v[2] < 0:
        raise ValueError("digest value must be a sha256 hex digest and a size")


def _check_namespace(v: list, n: int, depth: int) -> None:
    _fields(1)(v, n)
    _check_pairs("namespace", v[1], depth, named=True)


def _check_array(v: list, n: int, depth: int) -> None:
    _fields(2)(v, n)
    kind = ARRAY_ITEM_TAGS.get(v[1]) if type(v[1]) is str else None
    if kind is None:
        raise ValueError("array value must name its typecode, one of " + "".join(ARRAY_ITEM_TAGS))
    _check_items("array", v[2], depth)
    for x in v[2]:
        if x[0] != kind or (kind == "str" and len(x[1]) != 1):
            raise ValueError(f"an array of typecode {v[1]!r} holds {'characters' if kind == 'str' else kind + 's'} only")


def _check_subclass(v: list, n: int, depth: int) -> None:
    _fields(4)(v, n)
    if type(v[1]) is not str:
        raise ValueError("subclass value must name its type")
    _check_value(v[2], depth + 1)
    if v[2][0] not in SUBCLASS_BASE_TAGS:
        raise ValueError("subclass data must be a value of " + "/".join(sorted(SUBCLASS_BASE_TAGS)))
    _check_pairs("subclass", v[3], depth, named=True)
    if type(v[4]) is not bool:
        raise ValueError("subclass value must say whether its class defines __eq__ (true/false)")


_EXTRA_CHECKS = {
    "namespace": _check_namespace, "array": _check_array, "subclass": _check_subclass,
    "enum": _check_enum, "bytearray": _check_bytearray, "digest": _check_digest,
    "counter": _check_dict_like, "ordereddict": _check_dict_like, "defaultdict": _check_dict_like,
    "deque": _check_deque, "namedtuple": _check_named, "object": _check_named, "decimal": _check_decimal,
    "fraction": _check_fraction, "range": _check_range, "date": _check_three_ints, "timedelta": _check_three_ints,
    "datetime": _check_clock, "time": _check_clock, "npscalar": _check_npscalar, "ndarray": _check_ndarray,
}
assert set(_EXTRA_CHECKS) == set(EXTRA_TAGS)


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


def _floats_close(a: float, b: float, tol: tuple = (FLOAT_REL_TOL, FLOAT_ABS_TOL)) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return math.isclose(a, b, rel_tol=tol[0], abs_tol=tol[1])


def values_equal(a: Value, b: Value, rel_tol: float = FLOAT_REL_TOL, abs_tol: float = FLOAT_ABS_TOL) -> bool:
    """Trusted comparison of two encodings: exact types, floats with a tolerance.

    ``int`` never equals ``float`` and ``True`` never equals ``1`` (types must match, the
    tags of the standard-library types too: a Counter is no dict); NaN equals NaN; sets and
    dict keys are matched regardless of order; ``unsupported`` equals nothing. Malformed
    encodings (what ``check_value`` refuses) compare unequal rather than raising. This is
    the project's alternative (``judge.exact_types``); the reference's Python ``==`` is
    ``codea1.sandbox.decode.python_equal``.
    """
    try:
        return _equal(a, b, 0, (rel_tol, abs_tol))
    except (ValueError, TypeError, IndexError, RecursionError, OverflowError, ArithmeticError):
        return False


def _equal(a: Value, b: Value, depth: int, tol: tuple = (FLOAT_REL_TOL, FLOAT_ABS_TOL)) -> bool:
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
                    and all(_equal(p, q, depth + 1, tol) for p, q in zip(x, y)))
        if tag in ("set", "frozenset"):
            return type(x) is list and type(y) is list and _match_unordered(x, y, lambda p, q: _equal(p, q, depth + 1, tol))
        if tag == "dict":
            return type(x) is list and type(y) is list and _match_unordered(x, y, lambda p, q: _pair_equal(p, q, depth + 1, tol))
        if tag == "bool":
            return type(x) is bool and type(y) is bool and x == y
        if tag in _EXTRA_CHECKS:
            return _extra_equal(a, b, depth, tol)
        if type(x) is not str or type(y) is not str:
            return False
        if tag == "str":
            return x == y
        if tag == "int":
            return int(x) == int(y)
        if tag == "float":
            return _floats_close(float.fromhex(x), float.fromhex(y), tol)
        if tag == "bytes":
            return x == y and bytes.fromhex(x) is not None
        return False  # unsupported (equals nothing) or an unknown tag
    if tag == "complex" and n == 3:
        parts = (a[1], a[2], b[1], b[2])
        if not all(type(part) is str for part in parts):
            return False
        re_a, im_a, re_b, im_b = (float.fromhex(part) for part in parts)
        return _floats_close(re_a, re_b, tol) and _floats_close(im_a, im_b, tol)
    if tag in _EXTRA_CHECKS:
        return _extra_equal(a, b, depth, tol)
    return False


def _extra_equal(a: Value, b: Value, depth: int, tol: tuple) -> bool:
    """`_equal` for the `EXTRA_TAGS`: both well-formed, then the same tag and type name and
    equal contents (items compared by `_equal`, scalars by their decoded values)."""
    _check_value(a, depth)
    _check_value(b, depth)
    tag = a[0]
    if tag == "enum":  # a member by its type and name, and its class object (plain) or its data (mixed in)
        if a[5] is None or b[5] is None:
            return a[5] is None and b[5] is None and a[1:3] == b[1:3] and a[4] == b[4]
        return a[1:3] == b[1:3] and _equal(a[5], b[5], depth + 1, tol)
    if tag in ("digest", "bytearray"):  # (a digest by its text)
        return a[1:] == b[1:]
    if tag in ("counter", "defaultdict"):
        return _match_unordered(a[1], b[1], lambda p, q: _pair_equal(p, q, depth + 1, tol))
    if tag in ("ordereddict", "deque"):  # (two OrderedDicts compare in order)
        eq = _pair_equal if tag == "ordereddict" else _equal
        return len(a[1]) == len(b[1]) and all(eq(p, q, depth + 1, tol) for p, q in zip(a[1], b[1]))
    if tag == "namedtuple":
        return a[1] == b[1] and len(a[2]) == len(b[2]) and all(
            _equal(p, q, depth + 1, tol) for p, q in zip(a[2], b[2]))
    pairs = lambda p, q: p[0] == q[0] and _equal(p[1], q[1], depth + 1, tol)  # noqa: E731
    if tag == "object":
        return a[1] == b[1] and _match_unordered(a[2], b[2], pairs)
    if tag == "namespace":
        return _match_unordered(a[1], b[1], pairs)
    if tag == "subclass":  # (exact types: the same type name, whether or not its class defines __eq__)
        return a[1] == b[1] and _equal(a[2], b[2], depth + 1, tol) and _match_unordered(a[3], b[3], pairs)
    if tag == "array":
        return a[1] == b[1] and len(a[2]) == len(b[2]) and all(_equal(p, q, depth + 1, tol) for p, q in zip(a[2], b[2]))
    if tag == "npscalar":
        return a[1] == b[1] and _equal(a[2], b[2], depth + 1, tol)
    if tag == "ndarray":
        return a[1] == b[1] and a[2] == b[2] and all(_equal(p, q, depth + 1, tol) for p, q in zip(a[3], b[3]))
    # decimal, fraction, range, date, datetime, time, timedelta: their values, decoded by trusted code
    # (both already checked above, as `decode` would check them)
    from codea1.sandbox._scalars import decode_scalar

    return bool(decode_scalar(a) == decode_scalar(b))


def _pair_equal(p: Value, q: Value, depth: int, tol: tuple = (FLOAT_REL_TOL, FLOAT_ABS_TOL)) -> bool:
    """Two dict items ``[key, value]``, each equal."""
    return (type(p) is list and type(q) is list and len(p) == 2 and len(q) == 2
            and _equal(p[0], q[0], depth, tol) and _equal(p[1], q[1], depth, tol))


def _match_unordered(xs: list, ys: list, eq) -> bool:
    """Each element of ``xs`` pairs with a distinct equal element of ``ys`` (a bijection).

    With a float tolerance "equal" is not transitive, so a first-fit pairing can miss a
    bijection that exists (1.0 takes 1.0000008, and 1.0000015 is left with 1.0): when it
    fails, an exact matching decides, up to `MATCH_EXACT_LIMIT` elements (it needs every
    pair compared, and a candidate's set may be large: past the limit, first-fit's answer).
    """
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
            return len(xs) <= MATCH_EXACT_LIMIT and _perfect_matching(xs, ys, eq)
    return True


MATCH_EXACT_LIMIT = 64


def _perfect_matching(xs: list, ys: list, eq) -> bool:
    """Whether the "equal" pairs hold a perfect matching (Kuhn's augmenting paths)."""
    partners = [[j for j, y in enumerate(ys) if eq(x, y)] for x in xs]
    owner = [-1] * len(ys)

    def augment(i: int, seen: set[int]) -> bool:
        for j in partners[i]:
            if j not in seen:
                seen.add(j)
                if owner[j] < 0 or augment(owner[j], seen):
                    owner[j] = i
                    return True
        return False

    return all(augment(i, set()) for i in range(len(xs)))


def _float_source(h: str) -> str:
    f = float.fromhex(h)
    if math.isnan(f):
        return "float('nan')"
    if math.isinf(f):
        return "float('inf')" if f > 0 else "-float('inf')"
    return repr(f)


def to_source(value: Value, build_objects: bool = False, check: bool = True) -> str:
    """Render an encoding as a Python literal expression (``eval`` gives back an equal value).

    Used to write corrected tests ``assert CALL == LITERAL``. An instance of a program's
    class reads as ``TypeName(attribute=value, ...)``, which its ``__init__`` need not take;
    ``build_objects`` writes it as an expression that builds it (`_built_object`), for a
    test that is stored and run again. Raises ``ValueError`` for an ``unsupported`` value,
    a malformed encoding, or (``build_objects``) an instance of a class defined in a function.
    ``check=False``: the caller checked ``value`` already (`check_value`).
    """
    if check:
        check_value(value)
    return _source(value, build_objects)


def _source(v: Value, build: bool = False) -> str:
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
        return "[" + ", ".join(_source(x, build) for x in v[1]) + "]"
    if tag == "tuple":
        items = [_source(x, build) for x in v[1]]
        return "(" + items[0] + ",)" if len(items) == 1 else "(" + ", ".join(items) + ")"
    if tag == "set":
        return "{" + ", ".join(_source(x, build) for x in v[1]) + "}" if v[1] else "set()"
    if tag == "frozenset":
        return "frozenset({" + ", ".join(_source(x, build) for x in v[1]) + "})" if v[1] else "frozenset()"
    if tag == "dict":
        return "{" + ", ".join(f"{_source(k, build)}: {_source(x, build)}" for k, x in v[1]) + "}"
    if tag in _EXTRA_CHECKS:
        return _extra_source(v, build)
    raise ValueError(f"cannot render a {tag} value as a literal ({v[1] if len(v) > 1 else ''})")


def _extra_source(v: Value, build: bool) -> str:
    """An expression for an `EXTRA_TAGS` value. Modules are reached by `__import__`, so the
    text evaluates anywhere (and passes `parse_tests(strict=True)`); a namedtuple is written
    as its tuple and a numpy scalar as its Python value (each equal under `==`), an instance
    of a program's class as `TypeName(attribute=value, ...)`, for reading only (`build`:
    `_built_object`)."""
    tag = v[0]
    if tag == "enum":
        module, _, qualname = v[1].rpartition(".") if not v[1].startswith("__main__.") else ("", "", v[1][9:])
        if module:  # (an enum class of the standard library, e.g. http.HTTPStatus)
            qualname = f"__import__({module!r}, fromlist=['_']).{qualname}"
        names = v[2].split("|")  # (a combination of flags is named `A|B`)
        if len(names) > 1:
            return "(" + " | ".join(f"{qualname}.{name}" for name in names) + ")"
        return f"{qualname}.{v[2]}"
    if tag == "bytearray":
        return f"bytearray({bytes.fromhex(v[1])!r})"
    if tag == "digest":
        raise ValueError(f"cannot render a value known only by its digest ({v[2]} bytes encoded) as a literal")
    if tag in ("counter", "defaultdict"):
        pairs = "{" + ", ".join(f"{_source(k, build)}: {_source(x, build)}" for k, x in v[1]) + "}"
        name = "Counter" if tag == "counter" else "defaultdict"
        return f"__import__('collections').{name}({'None, ' if tag == 'defaultdict' else ''}{pairs})"
    if tag == "ordereddict":
        pairs = "[" + ", ".join(f"({_source(k, build)}, {_source(x, build)})" for k, x in v[1]) + "]"
        return f"__import__('collections').OrderedDict({pairs})"
    if tag == "deque":
        return "__import__('collections').deque([" + ", ".join(_source(x, build) for x in v[1]) + "])"
    if tag == "namedtuple":
        return _source(["tuple", v[2]], build)
    if tag == "object":
        if build:
            return _built_object(v)
        return v[1].rsplit(".", 1)[-1] + "(" + ", ".join(f"{name}={_source(x, build)}" for name, x in v[2]) + ")"
    if tag == "namespace":
        return f"__import__('types').SimpleNamespace({_keywords(v[1], build)})"
    if tag == "array":
        return f"__import__('array').array({v[1]!r}, [" + ", ".join(_source(x, build) for x in v[2]) + "])"
    if tag == "subclass":
        if not v[4]:  # (equal to its built-in part under `==`)
            return _source(v[2], build)
        if build:
            return _built_subclass(v)
        attributes = "".join(f", {name}={_source(x, build)}" for name, x in v[3])
        return v[1].rsplit(".", 1)[-1] + "(" + _source(v[2], build) + attributes + ")"
    if tag == "npscalar":
        return _source(v[2], build)
    if tag == "ndarray":
        items = [_source(x, build) for x in v[3]]
        for size in reversed(v[2][1:]):
            items = ["[" + ", ".join(items[i:i + size]) + "]" for i in range(0, len(items), size)] if size else []
        body = items[0] if not v[2] else "[" + ", ".join(items) + "]"
        return f"__import__('numpy').array({body}, dtype={v[1]!r})"
    if tag == "decimal":
        return f"__import__('decimal').Decimal({v[1]!r})"
    if tag == "fraction":
        return f"__import__('fractions').Fraction({int(v[1])}, {int(v[2])})"
    if tag == "range":
        return f"range({int(v[1])}, {int(v[2])}, {int(v[3])})"
    if tag == "timedelta":
        days, seconds, micro = v[1]
        return f"__import__('datetime').timedelta(days={days}, seconds={seconds}, microseconds={micro})"
    if tag == "date":
        return "__import__('datetime').date(" + ", ".join(str(x) for x in v[1]) + ")"
    fields = v[1]
    args = ", ".join(str(x) for x in fields[:-1])
    if fields[-1]:
        args += f", fold={fields[-1]}"
    if v[2] is not None:
        days, seconds, micro = v[2]
        args += (", tzinfo=__import__('datetime').timezone(__import__('datetime').timedelta("
                 f"days={days}, seconds={seconds}, microseconds={micro}))")
    return f"__import__('datetime').{tag}({args})"


def _built_object(v: Value) -> str:
    """An expression that builds an instance equal to `v` where its class is defined (the
    reference's program): `object.__new__` (its `__init__` may take other arguments, or
    compute its attributes), then each attribute set as it was, `__setattr__` bypassed."""
    return _with_attributes(f"object.__new__({_main_qualname(v[1])})", v[2])


def _built_subclass(v: Value) -> str:
    """`_built_object` for an instance of a program's subclass of a built-in type: the
    base's own `__new__` (and `__init__`, for a mutable base) on its data, then its
    attributes; no method of the class runs."""
    qualname, data, tag = _main_qualname(v[1]), v[2], v[2][0]
    if tag == "namespace":
        kind = "__import__('types').SimpleNamespace"
        new = f"(lambda o: ({kind}.__init__(o, {_keywords(data[1], True)}), o)[1])({kind}.__new__({qualname}))"
    elif tag == "array":
        items = ", ".join(_source(x, True) for x in data[2])
        new = f"__import__('array').array.__new__({qualname}, {data[1]!r}, [{items}])"
    elif tag in ("list", "dict", "set", "bytearray"):
        new = f"(lambda o: ({tag}.__init__(o, {_source(data, True)}), o)[1])({tag}.__new__({qualname}))"
    else:
        new = f"{tag}.__new__({qualname}, {_source(data, True)})"
    return _with_attributes(new, v[3]) if v[3] else new


def _main_qualname(type_name: str) -> str:
    """The name a class of the program is reached by at the top of the program; ValueError
    for a class defined in a function."""
    qualname = type_name[9:] if type_name.startswith("__main__.") else ""
    if not all(part.isidentifier() for part in qualname.split(".")):  # (a class defined in a function)
        raise ValueError(f"cannot write an instance of {type_name} as an expression that builds it")
    return qualname


def _with_attributes(new: str, attributes: list) -> str:
    """An expression that evaluates `new` and sets each of `attributes` (`[name, value]`
    encodings) on it, `__setattr__` bypassed."""
    pairs = ", ".join(f"({name!r}, {_source(x, True)})" for name, x in attributes)
    return f"(lambda o, attributes: ([object.__setattr__(o, k, x) for k, x in attributes], o)[1])({new}, [{pairs}])"


def _keywords(pairs: list, build: bool) -> str:
    """The keyword arguments `name=value` of `[name, value]` encodings, or `**{...}` where a
    name is no identifier (a namespace's attribute may be any string)."""
    from keyword import iskeyword

    if all(name.isidentifier() and not iskeyword(name) for name, _ in pairs):
        return ", ".join(f"{name}={_source(x, build)}" for name, x in pairs)
    return "**{" + ", ".join(f"{name!r}: {_source(x, build)}" for name, x in pairs) + "}"
