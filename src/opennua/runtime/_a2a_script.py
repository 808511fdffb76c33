"""`scripted:a2a`: the offline model that exercises remote A2A agents (docs/runtime.md).

With an A2A agent among its tools it sends the user's message to the first one
(`<prefix>__send_message`), then answers with what came back; without one it answers
`echo: <the message>`, so a deployment on it is also the simplest A2A agent to call.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic_ai.messages import ModelMessage, ModelRequest, RetryPromptPart, ToolReturnPart

from opennua.runtime._a2a import TOOL
from opennua.runtime._scripted import ScriptedModel, ScriptStep, call, first_prompt


def _step(messages: list[ModelMessage], tools: Sequence[str]) -> ScriptStep:
    prompt = first_prompt(messages)
    returned = _last_result(messages)
    if returned is not None:
        name, content = returned
        return ScriptStep(text=f"{name} answered: {content}")
    agents = sorted(t for t in tools if t.endswith(f"__{TOOL}"))
    if not agents:
        return ScriptStep(text=f"echo: {prompt}")
    return ScriptStep(
        reasoning="Another agent can answer this; I will send it the message.",
        calls=(call(agents[0], text=prompt),),
    )


def _last_result(messages: Sequence[ModelMessage]) -> tuple[str, str] | None:
    """The last tool result (or failure) the model was given, if any."""
    for message in reversed(messages):
        if not isinstance(message, ModelRequest):
            continue
        for part in reversed(message.parts):
            if isinstance(part, ToolReturnPart):
                return part.tool_name, str(part.content)
            if isinstance(part, RetryPromptPart):
                return str(part.tool_name), str(part.content)
    return None


def a2a_model() -> ScriptedModel:
    return ScriptedModel(_step, model_name="a2a", sees_tools=True)
