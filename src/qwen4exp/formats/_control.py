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
