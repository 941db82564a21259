"""What a tool's schema says each argument is, and XML argument values read
as that type (docs/FORMAT.md, section 11; used by qwen4exp.parse.tool_calls).

A 3.5+ tool call writes each argument as text: strings as they are, other
values as JSON (3.6, 3.8) or with Python's str() (3.5: True, None); objects
and arrays as JSON in all three. `typed_json` reads one value back: typed
only when the text is exactly how the template writes a value of a type the
schema allows, else a string (so that parsing then rendering gives the same
text), with a report where that is not what the schema asks for. Type names
are JSON Schema's, with the spellings tool authors also use ("int", "float",
"bool", "dict", "list", ...).
"""

from __future__ import annotations

import ast
import json
import math
import re
import sys
from collections.abc import Mapping

from qwen4exp.render.requests import reject_constant

__all__ = ["schema_types", "tool_schemas", "typed_json", "json_value", "written"]

_WS = " \t\r\n"


# JSON Schema type names, and the spellings tool authors use for them.
_TYPE_NAMES = {
    "string": "string", "str": "string", "text": "string", "varchar": "string", "char": "string",
    "enum": "string", "integer": "integer", "int": "integer", "long": "integer", "short": "integer",
    "number": "number", "float": "number", "double": "number", "decimal": "number",
    "boolean": "boolean", "bool": "boolean", "binary": "boolean", "null": "null", "none": "null",
    "object": "object", "dict": "object", "map": "object", "array": "array", "list": "array",
    "tuple": "array",
}
_ORDER = ("null", "boolean", "integer", "number", "object", "array")


def _type_name(name) -> str | None:
    if not isinstance(name, str):
        return None
    name = name.strip().lower()
    found = _TYPE_NAMES.get(name)
    if found is None:
        if name.startswith(("int", "uint", "long", "short", "unsigned")):
            found = "integer"
        elif name.startswith(("num", "float")):
            found = "number"
        elif name.startswith(("arr", "list")):
            found = "array"
    return found


def schema_types(schema) -> frozenset | None:
    """The JSON types a parameter's schema allows (None: it says nothing)."""
    if not isinstance(schema, Mapping):
        return None
    found: set = set()
    stack = [(schema, 0)]
    while stack:
        s, depth = stack.pop()
        t = s.get("type")
        for name in t if isinstance(t, list) else (t,):
            if (typ := _type_name(name)) is not None:
                found.add(typ)
        if s.get("nullable") is True:
            found.add("null")
        for value in s.get("enum") or () if isinstance(s.get("enum"), list) else ():
            found.add(_json_type(value))
        if "const" in s:
            found.add(_json_type(s["const"]))
        if depth < 4:
            for key in ("anyOf", "oneOf", "allOf"):
                for sub in s.get(key) or () if isinstance(s.get(key), list) else ():
                    if isinstance(sub, Mapping):
                        stack.append((sub, depth + 1))
    found.discard(None)
    return frozenset(found) or None


def _json_type(value) -> str | None:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, (list, tuple)):
        return "array"
    return None


def tool_schemas(tools) -> dict:
    """name -> {parameter: types} (None for a tool without `properties`),
    from OpenAI-style tools ({"type": "function", "function": {...}}) or bare
    function schemas ({"name", "parameters"})."""
    if tools is None:
        return {}
    if isinstance(tools, (str, bytes)) or not hasattr(tools, "__iter__"):
        raise TypeError(f"tools must be a list of tool schemas (dicts), not {type(tools).__name__}")
    out = {}
    for k, tool in enumerate(tools):
        if not isinstance(tool, Mapping):
            raise TypeError(f"tools[{k}]: a tool must be a dict (a JSON schema), not {type(tool).__name__}")
        fn = tool.get("function", tool)
        name = fn.get("name") if isinstance(fn, Mapping) else None
        if not isinstance(name, str):
            continue
        params = fn.get("parameters")
        props = params.get("properties") if isinstance(params, Mapping) else None
        out[name] = (
            {key: schema_types(s) for key, s in props.items() if isinstance(key, str)}
            if isinstance(props, Mapping) else None
        )
    return out


# -- typing one value ------------------------------------------------------------
#
# The rule (docs/FORMAT.md, section 11): a value is typed only when its text is
# exactly what the template writes for a value of that type, so that rendering
# the parsed message writes the same text again. Any other text is a string;
# it is reported when it reads, more loosely, as a type the schema allows.

_INTEGER = re.compile(r"-?(?:0|[1-9][0-9]*)")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")

_DECODER = json.JSONDecoder(parse_constant=reject_constant)  # strict: no NaN
_TOJSON = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode  # transformers' tojson

_PYTHON_SCALARS = {"True": "true", "False": "false", "None": "null"}
_JSON_SCALARS = {"true": "true", "false": "false", "null": "null"}
_ARTICLE = {"integer": "an integer", "object": "an object", "array": "an array"}


def json_value(text: str):
    """(True, value) when `text` is one JSON value, else (False, None)."""
    try:
        return True, _DECODER.decode(text)
    except (ValueError, RecursionError):
        return False, None


def written(value) -> str | None:
    """The JSON text the templates write for `value` (tojson), or None when
    JSON cannot write it back: NaN or infinity, an int too long for str(), a
    lone surrogate (not UTF-8), a cycle or nesting too deep."""
    try:
        text = _TOJSON(value)
        text.encode("utf-8")
    except (TypeError, ValueError, RecursionError):  # UnicodeEncodeError is a ValueError
        return None
    return text


def _int_spelling(text: str) -> bool:
    """Whether `text` is str() of an int that str() can write (no "-0", no
    leading zero, within Python's int-to-text digit limit)."""
    if not _INTEGER.fullmatch(text) or text == "-0":
        return False
    limit = sys.get_int_max_str_digits()
    return not limit or len(text) - (text[0] == "-") <= limit


def _float_spelling(text: str) -> bool:
    """Whether `text` is repr() of a finite float (what the renderer writes)."""
    if not _NUMBER.fullmatch(text):
        return False
    number = float(text)
    return math.isfinite(number) and repr(number) == text


def _canonical(text: str, typ: str, python: bool) -> str | None:
    """JSON text of the `typ` value whose template spelling is exactly `text`, else None."""
    if typ == "null":
        return "null" if text == ("None" if python else "null") else None
    if typ == "boolean":
        got = (_PYTHON_SCALARS if python else _JSON_SCALARS).get(text)
        return got if got is not None and got != "null" else None
    if typ == "integer":
        return text if _int_spelling(text) else None
    if typ == "number":
        return text if _int_spelling(text) or _float_spelling(text) else None
    if typ == "object" or typ == "array":
        if text[:1] not in ("{", "["):
            return None
        ok, value = json_value(text)
        if ok and isinstance(value, dict if typ == "object" else list) and written(value) == text:
            return text
    return None


def _plain(value, depth: int = 0):
    """A Python literal as JSON data (tuples as lists); ValueError if it is not."""
    if depth > 200:
        raise ValueError("nested too deeply")
    if value is None or isinstance(value, (bool, int, str, float)):
        return value  # `written` refuses what JSON cannot write back
    if isinstance(value, (list, tuple)):
        return [_plain(v, depth + 1) for v in value]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise ValueError("a key is not a string")
        return {k: _plain(v, depth + 1) for k, v in value.items()}
    raise ValueError(f"a {type(value).__name__} is not JSON data")


def _loose(text: str, typ: str) -> str | None:
    """JSON text of the `typ` value that `text` reads as when spacing, the other
    scalar dialect, another number spelling or a Python literal are allowed;
    None when it does not read as one (or JSON cannot write the value back)."""
    text = text.strip(_WS)
    if typ == "null" or typ == "boolean":
        got = _JSON_SCALARS.get(text) or _PYTHON_SCALARS.get(text)
        return got if got is not None and (got == "null") == (typ == "null") else None
    if typ == "integer":
        if not _INTEGER.fullmatch(text):
            return None
        try:
            return str(int(text))
        except ValueError:  # over the digit limit
            return None
    if typ == "number":
        try:
            number = float(text)
        except ValueError:
            return None
        return repr(number) if math.isfinite(number) else None
    if typ == "object" or typ == "array":
        if text[:1] not in ("{", "[", "("):
            return None
        ok, value = json_value(text)
        if not ok:
            try:
                value = _plain(ast.literal_eval(text))
            except Exception:  # noqa: BLE001 - any literal_eval failure (syntax, depth, size) means no
                return None
        if isinstance(value, dict if typ == "object" else list):
            return written(value)
    return None


def _typed(text: str, types, python: bool) -> str | None:
    """JSON text of `text` read as the first type of `types` it spells exactly."""
    for typ in _ORDER:
        if typ in types:
            got = _canonical(text, typ, python)
            if got is not None:
                return got
    return None


def typed_json(value: str, types, python: bool) -> tuple[str, str | None]:
    """(JSON text of one XML parameter value, None or what to report about it).

    `types` is what the schema allows (None: no schema); `python` is the 3.5
    dialect, which writes True/False/None. The value is typed when its text
    is exactly the template's spelling of a value of an allowed type (of any
    type without a schema): `null`/`true`/`false` (3.5: `None`/`True`/`False`),
    str() of an int, repr() of a finite float, tojson of an object or array.
    Otherwise it is a string, so that the parsed message renders back to the
    same text, and it is reported when it reads more loosely as an allowed
    type (" 12", "1.50", "True" in 3.6). An object or array that the schema
    asks for (without allowing a string) in another spelling (a Python
    literal, other spacing) is read as one and reported: a re-render writes
    it as tojson does.
    """
    if types is None:
        got = _typed(value, _ORDER, python)
        return (got if got is not None else _string(value)), None
    if types == {"string"}:
        return _string(value), None
    got = _typed(value, types, python)
    if got is not None:
        return got, None
    candidates = [(typ, _loose(value, typ)) for typ in _ORDER if typ in types]
    loose = [(typ, text) for typ, text in candidates if text is not None]
    if "string" in types:
        if not loose:
            return _string(value), None
        typ, text = loose[0]
        return _string(value), (f"is not how the template writes {_ARTICLE.get(typ, 'a ' + typ)} "
                                f"({text}): kept as a string")
    for typ, text in loose:
        if typ in ("object", "array"):
            return text, f"is {_ARTICLE[typ]} written otherwise than tojson: a re-render writes {text}"
    wanted = " or ".join(_ARTICLE.get(t, "a " + t) for t in sorted(types))
    if loose:
        typ, text = loose[0]
        return _string(value), (f"is not how the template writes {_ARTICLE.get(typ, 'a ' + typ)} "
                                f"({text}): kept as a string")
    other = _typed(value, _ORDER, python)
    if other is not None:
        return other, f"is not {wanted}: kept as JSON"
    return _string(value), f"is not {wanted}: kept as a string"


def _string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)
