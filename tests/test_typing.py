"""The typed API agrees with the code (mypy itself runs in tools/typecheck.sh).

* py.typed marks the package typed (PEP 561), and the wheel ships it
  (tools/check_wheel.sh checks the built wheel);
* the stubs of the compiled modules (src/qwen4exp/*.pyi) name exactly what
  each module defines, with the real parameters, and every name the
  package imports from a compiled module;
* the TypedDicts of qwen4exp.shapes describe what real calls take and give:
  requests in every documented shape render, and parse_completion /
  Delta.openai() return values conform to their shapes, key by key.
"""

from __future__ import annotations

import ast
import collections.abc
import enum
import importlib
import inspect
import json
import pathlib
import typing

import pytest

import qwen4exp
from qwen4exp import shapes
from qwen4exp.render.validate import _ROLES
from qwen4exp.render.media import MEDIA_TYPES
from qwen4exp.render.segments import SegmentBuilder

PACKAGE = pathlib.Path(qwen4exp.__file__).parent
STUBS = sorted((PACKAGE / "_native").glob("_*.pyi"))


def test_py_typed_marker_is_in_the_package():
    assert (PACKAGE / "py.typed").is_file()
    assert STUBS, "no stubs beside the compiled modules"


# -- the stubs ------------------------------------------------------------------------


def _stub_tree(path: pathlib.Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def _defined(body: list[ast.stmt]) -> dict[str, ast.stmt]:
    """Names a stub body defines (classes, functions, assignments)."""
    out: dict[str, ast.stmt] = {}
    for node in body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            out[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = node
        elif isinstance(node, ast.Assign):
            out.update((t.id, node) for t in node.targets if isinstance(t, ast.Name))
    return out


def _own_public(module) -> set[str]:
    """What the compiled module itself defines: not its imports (numpy, os,
    the classes and functions of other modules it re-uses) nor private names."""
    names = set()
    for name, value in vars(module).items():
        if name.startswith("_") or inspect.ismodule(value):
            continue
        if getattr(value, "__module__", module.__name__) != module.__name__:
            continue
        names.add(name)
    return names


def _runtime_members(cls) -> set[str]:
    return {n for n in vars(cls) if not n.startswith("__")} - {"_member_map_"}


@pytest.mark.parametrize("stub", STUBS, ids=lambda p: p.stem)
def test_stub_names_what_the_module_defines(stub):
    module = importlib.import_module(f"qwen4exp._native.{stub.stem}")
    defined = _defined(_stub_tree(stub).body)
    public = {n for n in defined if not n.startswith("_")}
    assert public == _own_public(module), f"{stub.name} and {module.__name__} differ"
    for name in public:
        node, value = defined[name], getattr(module, name)
        if isinstance(node, ast.ClassDef) and not issubclass(value, BaseException):
            members = _defined(node.body)
            if issubclass(value, enum.Enum):
                # enum members and their values, as the cpdef enum has them
                want = {m.name: m.value for m in value}
                got = {n: ast.literal_eval(m.value) for n, m in members.items() if isinstance(m, ast.Assign)}
                assert got == want, f"{stub.name}: {name}"
                continue
            runtime = {n for n in _runtime_members(value) if not n.startswith("_")}
            stubbed = {n for n in members if not n.startswith("_")}
            assert stubbed == runtime, f"{stub.name}: {name}'s members"
            for member in members:  # private hooks too: they must exist
                assert hasattr(value, member), f"{stub.name}: {name}.{member} does not exist"


def _parameters(fn: ast.FunctionDef) -> list[tuple[str, str, bool]]:
    """(name, kind, has a default) per parameter of a stub function."""
    a = fn.args
    out = [(p.arg, "POSITIONAL_ONLY", False) for p in a.posonlyargs]
    positional = a.args
    defaults = [False] * (len(positional) - len(a.defaults)) + [True] * len(a.defaults)
    out += [(p.arg, "POSITIONAL_OR_KEYWORD", d) for p, d in zip(positional, defaults)]
    out += [(p.arg, "KEYWORD_ONLY", d is not None) for p, d in zip(a.kwonlyargs, a.kw_defaults)]
    return out


def _signature(fn) -> list[tuple[str, str, bool]] | None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # a slot wrapper (__init__ of a cdef class): no signature
        return None
    params = list(sig.parameters.values())
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
        return None  # (self, /, *args, **kwargs): Cython hides it
    return [(p.name, p.kind.name, p.default is not p.empty) for p in params]


@pytest.mark.parametrize("stub", STUBS, ids=lambda p: p.stem)
def test_stub_signatures_match_the_compiled_functions(stub):
    module = importlib.import_module(f"qwen4exp._native.{stub.stem}")
    checked = 0
    for name, node in _defined(_stub_tree(stub).body).items():
        if isinstance(node, ast.FunctionDef):
            pairs = [(node, getattr(module, name))]
        elif isinstance(node, ast.ClassDef):
            cls = getattr(module, name)
            # methods: not properties, nor the protocol's dunders (fixed by the language)
            pairs = [(m, getattr(cls, m.name)) for m in node.body if isinstance(m, ast.FunctionDef)
                     and not m.name.startswith("__")
                     and not any(isinstance(d, ast.Name) and d.id == "property" for d in m.decorator_list)]
        else:
            continue
        for fn, real in pairs:
            runtime = _signature(real)
            if runtime is not None:
                assert _parameters(fn) == runtime, f"{stub.name}: {name}.{fn.name}"
                checked += 1
    assert checked or stub.stem in ("_faults", "_geometry")  # those two hold only classes


def _compiled_imports() -> dict[str, set[str]]:
    """module -> names, for every `from ._X import ...` of a compiled module in the package."""
    compiled = {p.name.split(".")[0] for p in (PACKAGE / "_native").iterdir() if p.suffix in (".so", ".pyd")}
    found: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                last = node.module.rsplit(".", 1)[-1]
                if last in compiled and (node.level or node.module.startswith("qwen4exp.")):
                    found.setdefault(last, set()).update(a.name for a in node.names)
    return found


def test_every_name_the_package_imports_from_a_compiled_module_is_stubbed():
    imports = _compiled_imports()
    assert {"_encoder", "_stream"} <= set(imports)  # the scan sees the package's imports
    for module, names in imports.items():
        stub = PACKAGE / "_native" / f"{module}.pyi"
        assert stub.is_file(), f"the package imports from qwen4exp._native.{module}, which has no stub"
        missing = names - set(_defined(_stub_tree(stub).body))
        assert not missing, f"{stub.name} lacks {sorted(missing)}"


# -- the TypedDicts against real calls ----------------------------------------------


def _conforms(value, hint) -> bool:
    """Whether `value` is of the (TypedDict, Literal, Union, list, ...) type `hint`."""
    if hint is typing.Any:
        return True
    if hint is None or hint is type(None):
        return value is None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union:
        return any(_conforms(value, a) for a in args)
    if origin is typing.Literal:
        return value in args
    if typing.is_typeddict(hint):
        if not isinstance(value, dict):
            return False
        fields = typing.get_type_hints(hint)
        keys = set(value)
        return (hint.__required_keys__ <= keys <= set(fields)
                and all(_conforms(value[k], fields[k]) for k in keys))
    if origin in (list, collections.abc.Sequence):
        return isinstance(value, (list, tuple)) and all(_conforms(v, args[0]) for v in value)
    if origin is collections.abc.Mapping:
        return isinstance(value, dict)
    return isinstance(value, origin or hint)


def _completion_ids(tok, prompt, pieces) -> list[int]:
    """The ids of a completion written as (is_atom, text) pieces."""
    b = SegmentBuilder()
    for atom, text in pieces:
        b.control(text) if atom else b.text(text)
    return tok.encode_chat(b.build()).tolist()


TOOLS: list[shapes.Tool] = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]

M = qwen4exp.Marker


def _completions():
    """Completions that give every key of ParsedCompletion and its parts
    (the first one `notes`: Qwen3's template adds an empty reasoning block)."""
    call = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    return [
        [(False, "Plain content."), (True, M.IM_END)],
        [(True, M.THINK), (False, "\nthinking\n"), (True, M.THINK_END), (False, "\n\nOn it.\n"),
         (True, M.TOOL_CALL), (False, f"\n{call}\n"), (True, M.TOOL_CALL_END), (True, M.IM_END)],
        # a malformed call (invalid_tool_calls), an atom out of place and no end (errors)
        [(False, "x"), (True, M.IM_START), (False, "\n"), (True, M.TOOL_CALL), (False, '\n{"name": \n'),
         (True, M.TOOL_CALL_END)],
    ]


def test_parse_completion_returns_a_parsed_completion(tok):
    prompt = tok.render_chat([{"role": "user", "content": "Weather in Paris?"}], tools=TOOLS,
                             add_generation_prompt=True)
    seen: set[str] = set()
    for pieces in _completions():
        message = tok.parse_completion(_completion_ids(tok, prompt, pieces), prompt)
        assert _conforms(message, shapes.ParsedCompletion), message
        seen |= set(message)
        for part in ("tool_calls", "invalid_tool_calls", "errors", "notes"):
            seen |= {f"{part}.{k}" for item in message.get(part, ()) for k in item}
    # an id of a model's padded embedding rows (embedding_rows=): notes
    ids = [tok.vocab_size, *_completion_ids(tok, prompt, _completions()[0])]
    message = tok.parse_completion(ids, prompt, embedding_rows=tok.vocab_size + 1)
    assert _conforms(message, shapes.ParsedCompletion), message
    seen |= set(message) | {f"notes.{k}" for item in message["notes"] for k in item}
    # every key the shapes name came back from some real completion
    want = set(typing.get_type_hints(shapes.ParsedCompletion))
    want |= {f"tool_calls.{k}" for k in typing.get_type_hints(shapes.ToolCall)}
    want |= {f"invalid_tool_calls.{k}" for k in typing.get_type_hints(shapes.InvalidToolCall)}
    want |= {f"errors.{k}" for k in typing.get_type_hints(shapes.CompletionError)}
    want |= {f"notes.{k}" for k in typing.get_type_hints(shapes.CompletionNote)}
    assert seen == want


def test_delta_openai_returns_an_openai_delta(tok):
    prompt = tok.render_chat([{"role": "user", "content": "Weather in Paris?"}], tools=TOOLS,
                             add_generation_prompt=True)
    kinds = set()
    for pieces in _completions()[:2]:
        parser = tok.completion_parser(prompt)
        for delta in parser.feed(_completion_ids(tok, prompt, pieces)):
            d = delta.openai()
            assert _conforms(d, shapes.OpenAIDelta) and len(d) == 1, d
            kinds.add(next(iter(d)))
            for call in d.get("tool_calls", ()):
                kinds |= {f"tool_calls.{k}" for k in call} | {f"function.{k}" for k in call["function"]}
    want = set(typing.get_type_hints(shapes.OpenAIDelta))
    want |= {f"tool_calls.{k}" for k in typing.get_type_hints(shapes.DeltaToolCall)}
    want |= {f"function.{k}" for k in typing.get_type_hints(shapes.DeltaFunction)}
    assert kinds == want


def test_the_shapes_roles_and_part_types_are_the_validators():
    roles = {typing.get_args(typing.get_type_hints(m)["role"])[0]
             for m in typing.get_args(shapes.ChatMessage)}
    assert roles == set(_ROLES)
    parts = {typing.get_args(typing.get_type_hints(p)["type"])[0] for p in typing.get_args(shapes.ContentPart)}
    assert parts == {"text", *MEDIA_TYPES}


def _every_request_shape() -> list[shapes.ChatMessage]:
    """One message of each request shape, with every key each one names."""
    return [
        {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
        {"role": "user", "content": [
            {"type": "text", "text": "Compare "},
            {"type": "image", "image": "a.png", "width": 640, "height": 480},
            {"type": "image_url", "image_url": {"url": "https://example.com/b.png"}},
            {"type": "video", "video": "c.mp4", "grid": [2, 16, 16]},
        ]},
        {"role": "assistant", "content": "", "reasoning_content": "Look it up.", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
            {"type": "function", "name": "get_weather", "arguments": '{"city": "Lyon"}'},
        ]},
        {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "18 C"},
        {"role": "tool", "content": [{"type": "text", "text": "16 C"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Both mild."}], "reasoning_content": None},
    ]


def test_render_chat_takes_every_request_shape(tok36):
    messages = _every_request_shape()
    hints = {m: set(typing.get_type_hints(m)) for m in typing.get_args(shapes.ChatMessage)}
    used = set()
    for message in messages:
        shape = next(m for m in hints if _conforms(message, m))
        used |= {(shape, k) for k in message}
    # the messages use every key of every request shape
    assert used == {(m, k) for m, keys in hints.items() if m is not shapes.ParsedCompletion for k in keys}
    assert all(_conforms(t, shapes.Tool) for t in TOOLS)
    chat = tok36.render_chat(messages, tools=TOOLS)
    assert len(chat.media) == 3 and chat.request_tools() == json.loads(json.dumps(TOOLS))
    with pytest.raises(qwen4exp.ChatFormatError):  # a type the shapes exclude is refused at run time
        tok36.render_chat([{"role": "user", "content": 3}])


def test_a_parsed_completion_renders_back_as_a_chat_message(tok):
    """ChatMessage includes ParsedCompletion: appending the parse to the
    history renders the turn the model wrote (the serving loop's use)."""
    history: list[shapes.ChatMessage] = [{"role": "user", "content": "Weather in Paris?"}]
    prompt = tok.render_chat(history, tools=TOOLS, add_generation_prompt=True)
    ids = _completion_ids(tok, prompt, _completions()[1])
    message = tok.parse_completion(ids, prompt)
    whole = tok.encode_chat(tok.render_chat([*history, message], tools=TOOLS)).tolist()
    assert whole[: len(tok.encode_chat(prompt))] == tok.encode_chat(prompt).tolist()
    assert whole[len(tok.encode_chat(prompt)):-1] == ids  # the template's final "\n" after IM_END


# -- tools/typecheck.sh in a venv of mypy and numpy alone ------------------------------

REPO = pathlib.Path(__file__).resolve().parents[1]


def _third_party_imports() -> dict[str, str]:
    """Top-level modules the package and the examples import that are neither
    the standard library nor qwen4exp, each with one file that imports it."""
    import sys

    found: dict[str, str] = {}
    for path in sorted([*(REPO / "src" / "qwen4exp").rglob("*.py"), *(REPO / "examples").glob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top != "qwen4exp":
                    found.setdefault(top, str(path.relative_to(REPO)))
    return found


def test_mypy_needs_no_optional_dependency_installed():
    """Every third-party module the code imports, numpy aside (a dependency,
    with its own types), is in pyproject.toml's ignore_missing_imports list:
    otherwise tools/typecheck.sh fails where that module (or its stubs) is
    not installed, as it did for huggingface_hub."""
    import re

    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    block = re.search(r"\[\[tool\.mypy\.overrides\]\].*?module = \[(.*?)\]", text, re.S)
    assert block is not None, "pyproject.toml has no [[tool.mypy.overrides]] module list"
    ignored = set(re.findall(r'"([^"]+)"', block.group(1)))
    imports = _third_party_imports()
    assert "numpy" in imports and "vllm" in imports  # the walk sees lazy imports too
    missing = {top: where for top, where in imports.items()
               if top != "numpy" and not {top, top + ".*"} <= ignored}
    assert missing == {}
