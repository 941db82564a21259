"""The parse path: a completion's ids back to an OpenAI-style message (reasoning,
content, tool calls in JSON or XML, typed by the tools' schemas) and the
streaming decoder."""
