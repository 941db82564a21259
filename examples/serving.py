"""A serving loop: render the prompt, stream the completion through the parser.

Each request re-renders the whole conversation and encodes it with a
ChatEncoder (only the new turn's segments are tokenized), a model generates
ids one at a time, and the parser turns them into OpenAI-style stream chunks
as they arrive, tool calls included (their arguments stream as JSON).
Structure comes from atom ids only: a `<tool_call>` the model writes as
ordinary text stays text.

The model here is a stand-in that replays the ids of a scripted reply, so the
example runs anywhere; replace `StandInModel.generate` with your sampler.

    python examples/serving.py
"""

from __future__ import annotations

import json
from collections.abc import Generator, Iterator, Mapping

import numpy as np

import qwen4exp

# The chat format and vocabulary of the served model (README, "Formats and vocabularies").
CHAT_FORMAT, VOCABULARY = "qwen3.6", "qwen3.6"

TOOLS: list[qwen4exp.Tool] = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}]

SCRIPT: list[qwen4exp.ChatMessage] = [  # what the stand-in model "generates", one reply per request
    {"role": "assistant", "content": "", "reasoning_content": "The user wants the weather: call the tool.",
     "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "assistant", "content": "It is 18 °C in Paris, with light rain. (A literal <tool_call> in text stays text.)",
     "reasoning_content": "The tool answered; summarise."},
]


class StandInModel:
    """Replays a scripted reply's ids after the given prompt, one id at a time."""

    def __init__(self, tok: qwen4exp.Tokenizer, replies: list[qwen4exp.ChatMessage]) -> None:
        self.tok, self.replies = tok, list(replies)

    def generate(self, messages: list[qwen4exp.ChatMessage], prompt_ids: np.ndarray) -> Iterator[int]:
        reply = self.replies.pop(0)
        # The ids the template writes for the reply, after the prompt's generation prompt.
        whole = self.tok.encode_chat(qwen4exp.render_chat(messages + [reply], tools=TOOLS, chat_format=CHAT_FORMAT))
        assert whole[: len(prompt_ids)].tolist() == prompt_ids.tolist()
        yield from whole[len(prompt_ids) : -1].tolist()  # up to and including <|im_end|>


def get_weather(city: str) -> dict[str, object]:
    return {"city": city, "temperature": 18, "sky": "light rain"}


def chunk(delta: Mapping[str, object], finish_reason: str | None = None) -> str:
    """One server-sent event in the OpenAI chat.completion.chunk shape."""
    body = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
    return "data: " + json.dumps(body, ensure_ascii=False)


def stream_reply(tok: qwen4exp.Tokenizer, model: StandInModel, messages: list[qwen4exp.ChatMessage],
                 encoder: qwen4exp.ChatEncoder) -> Generator[str, None, qwen4exp.ParsedCompletion]:
    """Yield the chunks of one reply; return the parsed assistant message."""
    chat = qwen4exp.render_chat(messages, tools=TOOLS, add_generation_prompt=True, chat_format=CHAT_FORMAT)
    prompt = encoder.encode(chat)
    parser = tok.completion_parser(chat)  # the prompt gives the format, the tools, an open <think>
    stop = {tok.atoms["<|im_end|>"], tok.atoms["<|endoftext|>"]}
    yield chunk({"role": "assistant"})
    for token in model.generate(messages, prompt):
        for delta in parser.feed(token):
            yield chunk(delta.openai())  # content, reasoning_content or a tool call's name / arguments
        if token in stop:
            break
    message = parser.finish()
    yield chunk({}, "tool_calls" if message["tool_calls"] else "stop")
    return message


def main() -> None:
    tok = qwen4exp.Tokenizer(VOCABULARY)
    model = StandInModel(tok, SCRIPT)
    encoder = tok.chat_encoder()  # one per conversation
    messages: list[qwen4exp.ChatMessage] = [{"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": "What is the weather in Paris?"}]
    while True:
        stream = stream_reply(tok, model, messages, encoder)
        while True:
            try:
                print(next(stream))
            except StopIteration as done:
                message = done.value
                break
        messages.append(message)  # while it is the last turn it renders back to the ids the model wrote
        if not message["tool_calls"]:
            break
        for call in message["tool_calls"]:
            result = get_weather(**json.loads(call["function"]["arguments"]))
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)})
    print("data: [DONE]")
    print(f"# {len(messages)} messages; the last request reused {encoder.reused_bytes} bytes of the one before")


if __name__ == "__main__":
    main()
