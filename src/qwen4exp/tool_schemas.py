"""What a tool's schema says each argument is, and XML argument values read
as that type (docs/FORMAT.md, section 11; used by qwen4exp.tool_calls).

A 3.5+ tool call writes each argument as text: strings as they are, other
values as JSON (3.6, 3.8) or with Python's str() (3.5: True, None); objects
and arrays as JSON in all three. `typed_json` reads one value back as the
JSON text of the value the schema allows, keeping a number's spelling (so
that parsing then rendering gives the same bytes). Type names are JSON
Schema's, with the spellings tool authors also use ("int", "float", "bool",
"dict", "list", ...).
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Mapping

from .chat_validate import tojson
from .requests import reject_constant

__all__ = ["schema_types", "tool_schemas", "typed_json", "json_value"]

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

_INTEGER = re.compile(r"-?(?:0|[1-9][0-9]*)")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")


_DECODER = json.JSONDecoder(parse_constant=reject_constant)  # strict: no NaN


def json_value(text: str):
    """(True, value) when `text` is one JSON value, else (False, None)."""
    try:
        return True, _DECODER.decode(text)
    except (ValueError, RecursionError):
        return False, None


def _plain(value, depth: int = 0):
    """A Python literal as JSON data (tuples as lists); ValueError if it is not."""
    if depth > 200:
        raise ValueError("nested too deeply")
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("not a finite number")
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v, depth + 1) for v in value]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise ValueError("a key is not a string")
        return {k: _plain(v, depth + 1) for k, v in value.items()}
    raise ValueError(f"a {type(value).__name__} is not JSON data")


def _container(text: str, types) -> str | None:
    """JSON text of an object or array value: JSON first, then a Python literal."""
    ok, value = json_value(text)
    if not ok:
        try:
            value = _plain(ast.literal_eval(text))
        except Exception:  # noqa: BLE001 - any literal_eval failure (syntax, depth, size) means no
            return None
    if isinstance(value, dict) and "object" in types or isinstance(value, list) and "array" in types:
        try:
            return tojson(value)
        except (TypeError, ValueError, RecursionError):
            return None
    return None


def _scalar(text: str, python: bool, strict: bool) -> str | None:
    """JSON text of a boolean or null spelled as the format writes it (`strict`:
    only the format's own spelling), else None."""
    own = _PYTHON_SCALARS if python else _JSON_SCALARS
    if text in own:
        return own[text]
    if not strict:
        return _PYTHON_SCALARS.get(text) or _JSON_SCALARS.get(text)
    return None


_PYTHON_SCALARS = {"True": "true", "False": "false", "None": "null"}
_JSON_SCALARS = {"true": "true", "false": "false", "null": "null"}


def typed_json(value: str, types, python: bool) -> tuple[str, str | None]:
    """(JSON text of one XML parameter value, None or why it does not fit `types`).

    `types` is what the schema allows (None: no schema); `python` is the 3.5
    dialect, which writes True/False/None. Strings are kept raw; numbers keep
    their spelling; booleans and null are read in the format's spelling (in
    both when the schema does not also allow a string, which would make the
    other spelling ambiguous); objects and arrays as JSON, then as a Python
    literal. Without a schema: in 3.5 its own scalars, numbers, objects and
    arrays, in the JSON formats any JSON value; anything else is a string.
    """
    if types is None:
        return _untyped(value, python), None
    if types == {"string"}:
        return _string(value), None
    text = value.strip(_WS)
    strict = "string" in types
    for typ in _ORDER:
        if typ not in types:
            continue
        if typ == "null" or typ == "boolean":
            got = _scalar(text, python, strict)
            if got is not None and (got == "null") == (typ == "null"):
                return got, None
        elif typ == "integer":
            if _INTEGER.fullmatch(text):
                return text, None
        elif typ == "number":
            if _NUMBER.fullmatch(text):
                return text, None
            number = _float(text)
            if number is not None:
                return repr(number), None
        elif typ in ("object", "array") and text[:1] in ("{", "[", "("):
            got = _container(text, types)
            if got is not None:
                return got, None
    if "string" in types:
        return _string(value), None
    return _untyped(value, python), "is not " + " or ".join(
        ("an " if t in ("integer", "object", "array") else "a ") + t for t in sorted(types))


def _float(text: str) -> float | None:
    """A finite float Python can read from `text` (".5", "1.", "1_000"), else None."""
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _untyped(value: str, python: bool) -> str:
    text = value.strip(_WS)
    if python:
        if text in _PYTHON_SCALARS:
            return _PYTHON_SCALARS[text]
        if _NUMBER.fullmatch(text):
            return text
        if text[:1] in ("{", "["):
            ok, parsed = json_value(text)
            if ok:
                return tojson(parsed)
        return _string(value)
    ok, parsed = json_value(text)
    if not ok:
        return _string(value)
    if _NUMBER.fullmatch(text):
        return text
    return tojson(parsed)
