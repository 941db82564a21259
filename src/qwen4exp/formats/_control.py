"""The CONTROL parts both renderers write, as byte constants built once.

A rendered stream is a list of parts that strictly alternate CONTROL, DATA,
CONTROL, ... and every CONTROL part is one of these constants or a
format's own (markers the template writes side by side are pre-joined), so
parts are segments and the boundaries are the running sum of part lengths:
no per-call kind tracking, no marker checks.
"""

from __future__ import annotations

from qwen4exp.markers import Marker

IM_START = Marker.IM_START.data
IM_END = Marker.IM_END.data
THINK = Marker.THINK.data
THINK_END = Marker.THINK_END.data
TOOL_CALL = Marker.TOOL_CALL.data
TOOL_CALL_END = Marker.TOOL_CALL_END.data
TOOL_RESPONSE = Marker.TOOL_RESPONSE.data
TOOL_RESPONSE_END = Marker.TOOL_RESPONSE_END.data
TOOL_CALL_PAIR = TOOL_CALL + TOOL_CALL_END
TOOL_CALL_END_IM_END = TOOL_CALL_END + IM_END
TOOL_RESPONSE_END_IM_END = TOOL_RESPONSE_END + IM_END
#: The generation prompt's empty reasoning block (thinking off), DATA between.
NO_THINKING_PROMPT = (THINK, b"\n\n", THINK_END, b"\n\n")

# The XML formats' instructions after the tools' schemas (every format whose
# calls are XML writes the same): DATA and CONTROL parts in order, up to the
# TOOL_CALL pair; then XML_TOOLS_LAST, the text that closes them.
XML_TOOLS_TAIL = (
    b"\n</tools>\n\nIf you choose to call a function ONLY reply in the following format "
    b"with NO suffix:\n\n",
    TOOL_CALL,
    b"\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n"
    b"</parameter>\n<parameter=example_parameter_2>\nThis is the value for the second "
    b"parameter\nthat can span\nmultiple lines\n</parameter>\n</function>\n",
    TOOL_CALL_END,
    b"\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified format: an inner "
    b"<function=...></function> block must be nested within ",
    TOOL_CALL_PAIR,
)
XML_TOOLS_LAST = (
    b" XML tags\n- Required parameters MUST be specified\n- You may provide optional reasoning "
    b"for your function call in natural language BEFORE the function call, but NOT after\n"
    b"- If there is no function call available, answer the question like normal with your "
    b"current knowledge and do not tell the user about function calls\n</IMPORTANT>"
)
