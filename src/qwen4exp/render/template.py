"""Any Jinja chat template, rendered with provenance (docs/FORMAT.md, "Model folders").

`render_template` renders a model folder's own chat template to exactly the
text `transformers`' `apply_chat_template(tokenize=False)` gives (4.57: the
same ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, the
loopcontrols and `generation` extensions, its `tojson`, `raise_exception` and
`strftime_now`; the folder's special tokens, `tools`, `documents` and extra
keywords as variables), and knows where every character came from:

* the caller's values enter the template as DATA strings (template_values.
  OriginStr), and every string operation keeps their origin;
* the template's literals (the code generator below wraps each constant) and
  the folder's special tokens are TRUSTED;
* Jinja's own joins (output, `~`, macro and block bodies, filters) are hooked
  so each output piece keeps its origin; whatever is not followed is DATA.

Segments: within TRUSTED text, the vocabulary's added-token spellings
(leftmost-longest, as Hugging Face `tokenizers` extracts them) become
TRUSTED_CONTROL atoms; everything else is DATA, so a benign chat gets exactly
Hugging Face's ids and no caller byte can become an atom.

jinja2 (a dependency) is imported on first use only: `import qwen4exp` and the
native formats never load it.
"""

from __future__ import annotations

import contextvars
import json
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from itertools import accumulate
from typing import Any, Protocol, cast

from qwen4exp.errors import ChatFormatError
from qwen4exp.render.segments import ChatRecord, RenderedChat, utf8
from qwen4exp.render.template_values import (DATA, TRUSTED, OriginStr, as_origin, data, derived, trusted,
                              wrap_caller)
from qwen4exp.vocab.compile import STRIP_LEFT, STRIP_RIGHT  # the compiled atom_strip flags

__all__ = ["render_template", "render_template_record", "TEMPLATE_FORMAT", "atom_matcher", "AtomMatcher",
           "TemplateBinding"]

#: RenderedChat.chat_format of a chat rendered from a model folder's own template.
TEMPLATE_FORMAT = "template"

_compile_lock = threading.Lock()
# The {% generation %} blocks' outputs of the render in progress (this thread's, or task's).
_GENERATED: contextvars.ContextVar[list | None] = contextvars.ContextVar("qwen4exp_generated", default=None)


def _jinja():
    try:
        import jinja2
        import jinja2.meta  # noqa: F401  (find_undeclared_variables)
    except ImportError:  # pragma: no cover - jinja2 is a dependency of the template path
        raise ChatFormatError("rendering a model folder's own chat template needs jinja2>=3.1 "
                              "(a dependency of qwen4exp: pip install jinja2)") from None
    return jinja2


# -- output pieces with origins ------------------------------------------------


def origin_concat(pieces: Iterable[Any]) -> OriginStr:
    """Jinja's `concat` ("".join) for macro, block and `set` bodies, keeping origins."""
    return OriginStr.join(_EMPTY_TRUSTED, [as_origin(p) for p in pieces])


def origin_str_join(seq: Iterable[Any]) -> OriginStr:
    """jinja2.runtime.str_join (the `~` operator), keeping origins."""
    return OriginStr.join(_EMPTY_TRUSTED, [as_origin(str(p)) for p in seq])


_LITERALS: dict[str, OriginStr] = {}  # one TRUSTED object per template constant (never mutated)


def _literal(value: str) -> OriginStr:
    lit = _LITERALS.get(value)
    if lit is None:
        if len(_LITERALS) > 1 << 16:  # bounded: a process that compiles many templates
            _LITERALS.clear()
        lit = _LITERALS[value] = trusted(value)
    return lit


def _literal_deep(value: Any) -> Any:
    if type(value) is str:  # a Markup constant stays Markup (it escapes what is added to it)
        return trusted(value)
    if isinstance(value, list):
        return [_literal_deep(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_literal_deep(v) for v in value)
    if isinstance(value, dict):
        return {_literal_deep(k): _literal_deep(v) for k, v in value.items()}
    return value


def _has_str(value: Any) -> bool:
    if type(value) is str:
        return True
    if isinstance(value, (list, tuple)):
        return any(map(_has_str, value))
    if isinstance(value, dict):
        return any(map(_has_str, value)) or any(map(_has_str, value.values()))
    return False


_EMPTY_TRUSTED = trusted("")


# -- the environment -------------------------------------------------------------


def _tojson(x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None,
            sort_keys: bool = False) -> OriginStr:
    """transformers' `tojson` filter (no HTML escaping, its options), TRUSTED
    only for a value made of the template's own strings."""
    text = json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
    return derived(text, x, indent, separators)


def _raise_exception(message: Any) -> None:
    raise _jinja().exceptions.TemplateError(message)


def _strftime_now(format: Any) -> OriginStr:
    return data(datetime.now().strftime(format))  # the clock is neither the template's nor the folder's


def _tracked_filter(f: Any) -> Any:
    """A filter whose plain-str result is TRUSTED only when all its inputs are."""
    pass_arg = getattr(f, "jinja_pass_arg", None)

    def filter_(*args: Any, **kwargs: Any) -> Any:
        rv = f(*args, **kwargs)
        if type(rv) is str:
            values = args[1:] if pass_arg is not None else args
            rv = derived(rv, *values, *kwargs.values())
        return rv

    if pass_arg is not None:
        filter_.jinja_pass_arg = pass_arg  # type: ignore[attr-defined]
    filter_.__name__ = getattr(f, "__name__", "filter")
    return filter_


@lru_cache(maxsize=1)
def _environment():
    """The tracing environment (one per process; templates are compiled once each)."""
    jinja2 = _jinja()
    from jinja2 import nodes
    from jinja2.compiler import CodeGenerator, optimizeconst
    from jinja2.ext import Extension
    from jinja2.filters import sync_do_join
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    from jinja2.utils import concat

    class TracingCodeGenerator(CodeGenerator):
        """Jinja's code generator with every constant TRUSTED and every output,
        `~` and body join kept as OriginStr (the text is unchanged)."""

        def visit_Const(self, node: Any, frame: Any) -> None:
            val = node.as_const(frame.eval_ctx)
            if type(val) is str:  # not Markup (a folded |safe), which must stay what it is
                self.write(f"environment.q4_lit({val!r})")
            elif _has_str(val):
                self.write(f"environment.q4_lit_deep({val!r})")
            else:
                super().visit_Const(node, frame)

        def visit_TemplateData(self, node: Any, frame: Any) -> None:
            try:
                val = node.as_const(frame.eval_ctx)
            except nodes.Impossible:
                super().visit_TemplateData(node, frame)
            else:
                if type(val) is not str:
                    return super().visit_TemplateData(node, frame)
                self.write(f"environment.q4_lit({val!r})")

        def _output_const_repr(self, group: Any) -> str:
            return f"environment.q4_lit({concat(group)!r})"

        def _output_child_pre(self, node: Any, frame: Any, finalize: Any) -> None:
            self.write("environment.q4_out(")
            super()._output_child_pre(node, frame, finalize)

        def _output_child_post(self, node: Any, frame: Any, finalize: Any) -> None:
            super()._output_child_post(node, frame, finalize)
            self.write(")")

        @optimizeconst
        def visit_Concat(self, node: Any, frame: Any) -> None:
            if frame.eval_ctx.volatile or frame.eval_ctx.autoescape:
                return CodeGenerator.visit_Concat(self, node, frame)
            self.write("environment.q4_str_join((")
            for arg in node.nodes:
                self.visit(arg, frame)
                self.write(", ")
            self.write("))")

    class GenerationTag(Extension):
        """transformers' `{% generation %}` tag (AssistantTracker): renders its body."""

        tags = {"generation"}

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
            return nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

        @jinja2.pass_eval_context
        def _generation_support(self, context: Any, caller: Any) -> Any:
            rv = caller()
            written = _GENERATED.get()
            if written is not None and type(rv) is OriginStr:
                written.append(rv)  # found again among the output pieces, by identity
            return rv

    class TracingEnvironment(ImmutableSandboxedEnvironment):
        code_generator_class = TracingCodeGenerator

        def wrap_str_format(self, value: Any) -> Any:
            wrapper = super().wrap_str_format(value)
            if wrapper is None:
                return None
            f_self = value.__self__

            def traced(*args: Any, **kwargs: Any) -> Any:
                return derived(str(wrapper(*args, **kwargs)), f_self, args, kwargs)

            return traced

    env = TracingEnvironment(trim_blocks=True, lstrip_blocks=True,
                             extensions=[GenerationTag, jinja2.ext.loopcontrols])
    env.concat = origin_concat
    env.q4_lit = _literal
    env.q4_lit_deep = _literal_deep
    env.q4_out = as_origin
    env.q4_str_join = origin_str_join
    for name, f in list(env.filters.items()):
        env.filters[name] = _tracked_filter(f)

    @jinja2.pass_eval_context
    def join(eval_ctx: Any, value: Any, d: Any = "", attribute: Any = None) -> Any:
        return sync_do_join(eval_ctx, value, as_origin(d) if type(d) is str else d, attribute)

    env.filters["join"] = join
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


@lru_cache(maxsize=64)
def _compiled(template: str) -> Any:
    env = _environment()
    jinja2 = _jinja()
    with _compile_lock:
        try:
            compiled = env.from_string(template)
            # the variables it reads: a caller value it never names need not be wrapped
            compiled.q4_names = frozenset(jinja2.meta.find_undeclared_variables(env.parse(template)))
            return compiled
        except jinja2.TemplateSyntaxError as exc:
            raise ChatFormatError(f"chat template: line {exc.lineno}: {exc.message}") from None
        except jinja2.TemplateError as exc:
            raise ChatFormatError(f"chat template: {exc}") from None


# -- atoms -------------------------------------------------------------------------


# Unicode's White_Space characters: what an added token with lstrip / rstrip
# takes with it (Rust's char::is_whitespace, as Hugging Face `tokenizers`
# checks it; not Python's str.isspace, which adds U+001C - U+001F). The
# property has had these 25 since Unicode 6.3; tests/test_template_render.py
# checks them against `tokenizers` over every code point.
WHITE_SPACE = frozenset("\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
                        "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")


class AtomMatcher:
    """Finds a vocabulary's added-token spellings leftmost-longest, as Hugging
    Face `tokenizers` extracts added tokens from a text. `strip`: spelling ->
    STRIP_LEFT | STRIP_RIGHT for the tokens that take the whitespace beside
    them (AddedToken lstrip / rstrip)."""

    __slots__ = ("spellings", "strip", "_pattern")

    def __init__(self, spellings: Iterable[str], strip: Mapping[str, int] | None = None) -> None:
        self.spellings = frozenset(s for s in spellings if s)
        self.strip = {k: v for k, v in (strip or {}).items() if v and k in self.spellings}
        ordered = sorted(self.spellings, key=lambda s: (-len(s), s))
        self._pattern = re.compile("|".join(map(re.escape, ordered))) if ordered else None

    def find(self, text: str, start: int, end: int) -> Iterable[tuple[int, int]]:
        if self._pattern is None:
            return ()
        return (m.span() for m in self._pattern.finditer(text, start, end))


@lru_cache(maxsize=16)
def _matcher_of(spellings: frozenset) -> AtomMatcher:
    return AtomMatcher(spellings)


class HasCore(Protocol):
    """A Tokenizer, as far as render_template needs one (no import of it here:
    the tokenizer imports this module)."""

    @property
    def core(self) -> Any: ...


def atom_matcher(atoms: Iterable[str] | AtomMatcher | HasCore | None) -> AtomMatcher:
    """The matcher of `atoms`: spellings (a Tokenizer's `atoms` mapping), or a
    Tokenizer (its added tokens with their lstrip / rstrip flags); None: the
    default vocabulary's added tokens."""
    if isinstance(atoms, AtomMatcher):
        return atoms
    if atoms is None:
        return _default_matcher()
    core = getattr(atoms, "core", None)
    if core is not None and hasattr(core, "atom_matcher"):
        return core.atom_matcher()
    if isinstance(atoms, str):
        raise TypeError("atoms must be a collection of spellings, not a str")
    return _matcher_of(frozenset(cast("Iterable[str]", atoms)))


@lru_cache(maxsize=1)
def _default_matcher() -> AtomMatcher:
    import numpy as np

    from qwen4exp.vocab.loading import bundled_arrays
    from qwen4exp.vocab.vocabulary import DEFAULT_VOCABULARY, VOCABULARIES

    arrays = bundled_arrays(VOCABULARIES[DEFAULT_VOCABULARY])
    blob = np.asarray(arrays["atom_bytes"]).tobytes()
    offs = np.asarray(arrays["atom_offsets"]).tolist()
    return AtomMatcher(blob[a:b].decode("utf-8") for a, b in zip(offs, offs[1:]))


# -- rendering -----------------------------------------------------------------------


def _special_values(special_tokens: Mapping[str, Any] | None) -> dict[str, Any]:
    """The folder's special tokens as TRUSTED template variables."""
    if special_tokens is None:
        return {}
    if not isinstance(special_tokens, Mapping):
        raise ChatFormatError(f"special_tokens must be a mapping of names to spellings, not "
                              f"{type(special_tokens).__name__}")
    out: dict[str, Any] = {}
    for name, value in special_tokens.items():
        if not isinstance(name, str):
            raise ChatFormatError(f"special_tokens: a name is {type(name).__name__}, not str")
        if isinstance(value, str):
            out[name] = trusted(value)
        elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            out[name] = [trusted(v) for v in value]  # additional_special_tokens
        elif value is None:
            out[name] = None
        else:
            raise ChatFormatError(f"special_tokens[{name!r}]: a spelling (str) or a list of them, "
                                  f"not {type(value).__name__}")
    return out


def _pieces(template: str, variables: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    """The template's output pieces, in order (each an OriginStr, as hooked),
    and the outputs of its {% generation %} blocks."""
    compiled = _compiled(template)
    jinja2 = _jinja()
    generated: list[Any] = []
    token = _GENERATED.set(generated)
    try:
        return list(compiled.root_render_func(compiled.new_context(variables))), generated
    except jinja2.TemplateError as exc:
        raise ChatFormatError(f"chat template: {exc.message if exc.message is not None else exc}") from None
    except RecursionError:
        raise ChatFormatError("chat template: recursion too deep") from None
    except Exception as exc:  # whatever the template's own code raised (transformers lets it through)
        raise ChatFormatError(f"chat template: {type(exc).__name__}: {exc}") from None
    finally:
        _GENERATED.reset(token)


def _generation_bytes(pieces: list[Any], generated: list[Any]) -> tuple[int, ...]:
    """Flat (start, end) byte offsets of the generation blocks' outputs that
    are output pieces themselves (a block inside a macro or `set` body is
    not: transformers' offsets for those are not where the text lands either)."""
    if not generated:
        return ()
    wanted = {id(g) for g in generated}
    out: list[int] = []
    pos = 0
    for p in pieces:
        n = len(str.encode(p, "utf-8", "surrogatepass"))
        if id(p) in wanted and n:
            out += (pos, pos + n)
        pos += n
    return tuple(out)


def _trusted_runs(pieces: list[Any]) -> tuple[str, list[tuple[int, int]]]:
    """(the whole text, the [start, end) character ranges of TRUSTED text)."""
    runs: list[tuple[int, int]] = []
    pos = 0
    for p in pieces:
        o = p._o if type(p) is OriginStr else DATA
        if isinstance(o, int):
            if o == TRUSTED and p:
                _extend(runs, pos, pos + len(p))
        else:
            prev = 0
            for end, k in o:
                if k == TRUSTED:
                    _extend(runs, pos + prev, pos + end)
                prev = end
        pos += len(p)
    return str.join("", pieces), runs


def _extend(runs: list[tuple[int, int]], a: int, b: int) -> None:
    if runs and runs[-1][1] == a:
        runs[-1] = (runs[-1][0], b)
    else:
        runs.append((a, b))


def _segment(text: str, runs: list[tuple[int, int]],
             matcher: AtomMatcher) -> tuple[list[bytes], bool, list[tuple[int, int]]]:
    """Alternating parts (DATA / TRUSTED_CONTROL), the first part's kind, and
    the character ranges left out of the stream: the whitespace that a token
    with lstrip / rstrip takes with it (Hugging Face `tokenizers` makes it
    part of the token's match, so it is not encoded), whatever its origin."""
    found: list[tuple[int, int]] = []
    for a, b in runs:
        found += matcher.find(text, a, b)
    parts: list[bytes] = []
    dropped: list[tuple[int, int]] = []
    first_control = last_control = False
    pos = 0  # where the last token's match, whitespace included, ends
    for i, (s, e) in enumerate(found):
        flags = matcher.strip.get(text[s:e], 0) if matcher.strip else 0
        left, right = s, e
        if flags & STRIP_LEFT:
            while left > pos and text[left - 1] in WHITE_SPACE:
                left -= 1
        if flags & STRIP_RIGHT:
            limit = found[i + 1][0] if i + 1 < len(found) else len(text)
            while right < limit and text[right] in WHITE_SPACE:
                right += 1
        if left > pos:
            parts.append(utf8(text[pos:left], f"the rendered template at character {pos}"))
            last_control = False
        elif not parts:
            first_control = True
        if last_control:  # nothing encoded since the last token: one control part
            parts[-1] += text[s:e].encode("utf-8")
        else:
            parts.append(text[s:e].encode("utf-8"))
        last_control = True
        for a, b in ((left, s), (e, right)):
            if b > a:
                _extend(dropped, a, b)
        pos = right
    if pos < len(text):
        parts.append(utf8(text[pos:], f"the rendered template at character {pos}"))
    return parts, first_control, dropped


def _without(offsets: tuple[int, ...], text: str, dropped: list[tuple[int, int]]) -> tuple[int, ...]:
    """Byte offsets into `text` as offsets into the stream, which lacks the
    `dropped` character ranges (an offset inside one moves to its start)."""
    if not offsets or not dropped:
        return offsets
    cuts = []  # (byte offset, byte length) of each dropped range, the text encoded once
    at = prev = 0
    for a, b in dropped:
        at += len(text[prev:a].encode("utf-8", "surrogatepass"))
        n = len(text[a:b].encode("utf-8", "surrogatepass"))
        cuts.append((at, n))
        at, prev = at + n, b
    out = []
    for o in offsets:
        removed = 0
        for at, n in cuts:
            if at >= o:
                break
            removed += min(n, o - at)
        out.append(o - removed)
    return tuple(out)


def _tools_json(tools: Any) -> tuple[bytes, ...]:
    if not tools:
        return ()
    try:
        return tuple(json.dumps(t, ensure_ascii=False).encode("utf-8") for t in tools)
    except (TypeError, ValueError):
        return ()



def _check_dicts(values: Any, name: str, what: str, each: str) -> None:
    """`values` (None, or a list of dicts) as transformers takes tools and documents."""
    if values is None:
        return
    if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Sequence):
        raise ChatFormatError(f"{name} must be {what}, not {type(values).__name__}")
    for i, value in enumerate(values):
        if not isinstance(value, Mapping):
            raise ChatFormatError(f"{name}[{i}]: {each} must be a dict, not {type(value).__name__}")

def render_template_record(template: str, messages: Sequence[Any], *, tools: Any = None,
                           documents: Any = None, special_tokens: Mapping[str, Any] | None = None,
                           add_generation_prompt: bool = False, atoms: Any = None,
                           template_kwargs: Mapping[str, Any] | None = None) -> ChatRecord:
    """The ChatRecord of `render_template` (see there)."""
    if not isinstance(template, str):
        raise ChatFormatError(f"template must be a str (the Jinja source), not {type(template).__name__}")
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise ChatFormatError(f"messages must be a list of messages, not {type(messages).__name__}")
    _check_dicts(tools, "tools", "a list of tool schemas", "a tool schema")
    _check_dicts(documents, "documents", "a list of dicts", "a document")
    matcher = atom_matcher(atoms)
    # transformers: {**special_tokens_map, **kwargs}, then messages, tools, documents
    # and add_generation_prompt; a caller's keyword is the caller's (DATA).
    variables = _special_values(special_tokens)
    names = _compiled(template).q4_names
    for name, value in (template_kwargs or {}).items():
        variables[name] = wrap_caller(value) if name in names else value
    variables["messages"] = wrap_caller(list(messages))
    variables["tools"] = None if tools is None else wrap_caller(list(tools)) if "tools" in names else tools
    variables["documents"] = (None if documents is None else wrap_caller(list(documents))
                              if "documents" in names else documents)
    variables["add_generation_prompt"] = wrap_caller(add_generation_prompt)
    pieces, generated = _pieces(template, variables)
    text, runs = _trusted_runs(pieces)
    parts, first_control, dropped = _segment(text, runs, matcher)
    bounds = tuple(accumulate(map(len, parts), initial=0))
    return ChatRecord(b"".join(parts), bounds, first_control, None if dropped else text, (), (), TEMPLATE_FORMAT,
                      _tools_json(tools), bool(add_generation_prompt), False, (),
                      _without(_generation_bytes(pieces, generated), text, dropped))


def render_template(template: str, messages: Sequence[Any], *, tools: Sequence[Mapping[str, Any]] | None = None,
                    documents: Sequence[Mapping[str, Any]] | None = None,
                    special_tokens: Mapping[str, Any] | None = None, add_generation_prompt: bool = False,
                    atoms: Iterable[str] | HasCore | None = None, **template_kwargs: Any) -> RenderedChat:
    """Render a Jinja chat template as `transformers`' apply_chat_template(tokenize=False)
    does, as a segmented transcript with provenance (see the module).

    `special_tokens`: the model folder's (bos_token, eos_token, ...; TRUSTED).
    `atoms`: the added tokens that TRUSTED text may resolve to: a Tokenizer
    (its added tokens, with the whitespace those with lstrip / rstrip take),
    or spellings (a Tokenizer's `atoms`: no flags); None: the default
    vocabulary's. Every other keyword
    is a template variable, as the caller's (DATA). A template that raises, or
    does not compile, is a ChatFormatError with its message.
    """
    chat = RenderedChat()
    chat._commit(render_template_record(template, messages, tools=tools, documents=documents,
                                        special_tokens=special_tokens,
                                        add_generation_prompt=add_generation_prompt, atoms=atoms,
                                        template_kwargs=template_kwargs))
    return chat


class TemplateBinding:
    """A model folder's own chat template bound to a Tokenizer (`chat_format`
    "template"): the template's text and the folder's special tokens."""

    __slots__ = ("template", "special_tokens")

    def __init__(self, template: str, special_tokens: Mapping[str, Any]) -> None:
        if not isinstance(template, str):
            raise ChatFormatError(f"chat template must be a str, not {type(template).__name__}")
        _special_values(special_tokens)  # checked once, here
        self.template = template
        self.special_tokens = dict(special_tokens)

    def state(self) -> tuple[str, dict[str, Any]]:
        """What pickling keeps (TemplateBinding(*state) rebuilds it)."""
        return self.template, dict(self.special_tokens)

    def record(self, atoms: AtomMatcher, messages: Any, tools: Any, add_generation_prompt: Any,
               options: Mapping[str, Any]) -> ChatRecord:
        """The ChatRecord of `messages` rendered through the template; the
        caller's keywords (documents, enable_thinking, ...) are template variables."""
        options = dict(options)
        documents = options.pop("documents", None)
        return render_template_record(self.template, messages, tools=tools, documents=documents,
                                      special_tokens=self.special_tokens,
                                      add_generation_prompt=add_generation_prompt, atoms=atoms,
                                      template_kwargs=options)
