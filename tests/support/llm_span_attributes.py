"""LLM span attributes in the two GenAI conventions, built from an OpenAI-chat call.

For tests that need many LLM spans without running an instrumentation (the reliability
suite, the pipeline detector's unit tests). The keys are those the real instrumentations
write, as pinned by :mod:`tests.support.genai_shapes` and the reader's own tests.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["genai_attributes", "openinference_attributes"]


def openinference_attributes(messages: list[dict[str, Any]], output: dict[str, Any],
                             tools: list[dict[str, Any]]) -> dict[str, Any]:
    """As openinference-instrumentation-openai records a chat completion."""
    attrs: dict[str, Any] = {"openinference.span.kind": "LLM", "llm.model_name": "gpt-4.1"}
    for prefix, message in [*((f"llm.input_messages.{n}", m) for n, m in enumerate(messages)),
                            ("llm.output_messages.0", output)]:
        attrs[f"{prefix}.message.role"] = message["role"]
        for key in ("content", "tool_call_id"):
            if message.get(key):
                attrs[f"{prefix}.message.{key}"] = message[key]
        for m, tool_call in enumerate(message.get("tool_calls", ())):
            at = f"{prefix}.message.tool_calls.{m}.tool_call"
            attrs[f"{at}.id"] = tool_call["id"]
            attrs[f"{at}.function.name"] = tool_call["function"]["name"]
            attrs[f"{at}.function.arguments"] = tool_call["function"]["arguments"]
    for n, tool in enumerate(tools):
        attrs[f"llm.tools.{n}.tool.json_schema"] = json.dumps(tool)
    return attrs


def _parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    if message["role"] == "tool":
        return [{"type": "tool_call_response", "id": message["tool_call_id"],
                 "response": message["content"]}]
    parts: list[dict[str, Any]] = [
        {"type": "tool_call", "id": c["id"], "name": c["function"]["name"],
         "arguments": json.loads(c["function"]["arguments"])}
        for c in message.get("tool_calls", ())]
    if message.get("content"):
        parts.append({"type": "text", "content": message["content"]})
    return parts


def genai_attributes(messages: list[dict[str, Any]], output: dict[str, Any],
                     tools: list[dict[str, Any]], *, agent: str) -> dict[str, Any]:
    """As opentelemetry-util-genai records an inference with content captured on spans."""
    return {
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4.1",
        "gen_ai.agent.name": agent,
        "gen_ai.tool.definitions": json.dumps([{"type": "function", **t["function"]}
                                               for t in tools]),
        "gen_ai.input.messages": json.dumps([{"role": m["role"], "parts": _parts(m)}
                                             for m in messages]),
        "gen_ai.output.messages": json.dumps([{"role": "assistant",
                                               "parts": _parts(output)}]),
    }
