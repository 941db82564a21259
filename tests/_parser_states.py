"""Every state of the completion parser, and the kinds of text it may hold
back there: shared by tests/test_parser_held_text.py (an operation count)
and bench/bench_completion.py (the time against ordinary text).

A state is the completion so far (text and atoms); a held kind is a unit of
text repeated after it: whitespace, newlines, the start of a marker. Text the
parser holds until the next ids decide it must cost O(1) an id, so feeding
100,000 such ids takes time linear in the ids in every state.
"""

from __future__ import annotations

TOOL_CALL, TOOL_CALL_END = ("atom", "<tool_call>"), ("atom", "</tool_call>")
THINK, THINK_END, IM_END = ("atom", "<think>"), ("atom", "</think>"), ("atom", "<|im_end|>")

_CALL = "\n<function=f>\n"
# name -> the completion before the held text
STATES = {
    "start": [],
    "content": ["Hello."],
    "content at a line start": ["Hello.\n"],
    "after </think>": [THINK, "\nwhy\n", THINK_END],
    "reasoning": [THINK, "\nwhy"],
    "content after a <function= line": ["Hello.\n<function=f>\n"],
    "content holding '<functio'": ["Hello.\n<functio"],
    "call start": [TOOL_CALL],
    "call: function name": [TOOL_CALL, "\n<function="],
    "call: between parameters": [TOOL_CALL, _CALL],
    "call: parameter name": [TOOL_CALL, _CALL + "<parameter="],
    "call: value start": [TOOL_CALL, _CALL + "<parameter=x>"],
    "call: value": [TOOL_CALL, _CALL + "<parameter=x>\nabc"],
    "call: after </parameter>": [TOOL_CALL, _CALL + "<parameter=x>\nabc\n</parameter>"],
    "call: after a bare </function>": [TOOL_CALL, _CALL + "<parameter=x>\nabc\n</function>"],
    "call: after </function>": [TOOL_CALL, _CALL + "<parameter=x>\nabc\n</parameter>\n</function>"],
    "call: text outside a parameter": [TOOL_CALL, _CALL + "zzz"],
    "call: JSON name": [TOOL_CALL, '\n{"name": "'],
    "call: JSON after the name": [TOOL_CALL, '\n{"name": "f", "arguments": '],
    "call: JSON arguments": [TOOL_CALL, '\n{"name": "f", "arguments": {"a": 1'],
    "call: JSON after the arguments": [TOOL_CALL, '\n{"name": "f", "arguments": {"a": 1}}'],
    "call: other JSON": [TOOL_CALL, '\n{ "x'],
    "call: unreadable": [TOOL_CALL, "\nabc"],
    "reasoning: a call kept as text": [THINK, "\nwhy", TOOL_CALL, "x"],
    "after the end": [IM_END],
}

# name -> the repeated unit: held kinds, and ordinary text to compare with
HELD_KINDS = {
    "spaces": " ",
    "newlines": "\n",
    "'<'": "<",
    "newline and '<'": "\n<",
    "'</parameter'": "</parameter",
    "'<function'": "\n<function",
}
ORDINARY = "a"


def ids_of(tok, parts) -> list[int]:
    """The ids of a completion given as text and ("atom", spelling) parts."""
    out: list[int] = []
    for part in parts:
        out += [tok.atoms[part[1]]] if isinstance(part, tuple) else tok.encode(part)
    return out


def unit_ids(tok, unit: str) -> list[int]:
    """The unit as the model writes it one id per character (the worst case:
    the most feeds for the text)."""
    return [i for ch in unit for i in tok.encode(ch)]


def held_completion(tok, state: str, unit: str, n_ids: int) -> tuple[list[int], list[int]]:
    """(the state's ids, then about `n_ids` ids of `unit` repeated and IM_END)."""
    units = unit_ids(tok, unit)
    body = units * max(1, n_ids // len(units))
    return ids_of(tok, STATES[state]), body + [tok.atoms[IM_END[1]]]
