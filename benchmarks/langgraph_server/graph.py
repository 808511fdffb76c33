"""The LangGraph side of benchmarks/peers_server.py: the opennua demo turn as a LangGraph
user writes it, served by `langgraph dev` (langgraph.json beside this file).

One agent, a zero-delay scripted chat model and a ToolNode: 10 model calls and 10 tool calls
per turn, files written to a directory per thread, and `shell` waiting on a person's
approval with `interrupt()` (the client resumes the run with `Command(resume=...)`), then
running its command in a subprocess as the demo's `shell` does (without a sandbox here).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import interrupt

ROOT = Path(os.environ.get("NUA_BENCH_LG_DIR") or tempfile.mkdtemp(prefix="nua-bench-lg-"))
NOTES = "# Notes\n\n- A session outlives windows, connections and processes.\n"
PLAN = [{"content": "Write working notes", "status": "in_progress", "priority": "high"}]

# (reasoning, [(tool, args)]) per model call: the demo's 10 model calls and 10 tool calls.
SCRIPT: list[tuple[str, list[tuple[str, dict[str, Any]]]]] = [
    ("The user wants a short report. I will plan first.", [("plan", {"entries": PLAN})]),
    ("Writing the notes.", [("write_file", {"path": "notes.md", "content": NOTES})]),
    (
        "Counting the lines needs a shell command, which needs approval.",
        [("shell", {"command": 'echo "$(wc -l < notes.md) lines" >> checks.log'})],
    ),
    (
        "A researcher can summarize them.",
        [("plan", {"entries": PLAN}), ("read_file", {"path": "notes.md"})],
    ),
    ("Marking the plan.", [("plan", {"entries": PLAN})]),
    ("Reading the file again.", [("read_file", {"path": "notes.md"})]),
    ("Marking my plan done.", [("plan", {"entries": PLAN})]),
    ("Publishing.", [("write_file", {"path": "report.md", "content": NOTES})]),
    ("Done.", [("plan", {"entries": PLAN})]),
    ("Summarizing for the user.", []),
]
FINAL = "Done. I wrote notes.md, checked it with a shell command you approved, and a report."


class ScriptedChat(BaseChatModel):
    """Answers with the next step of SCRIPT, counted from the AI messages since the turn's
    human message: zero delay, like the demo's NUA_DEMO_STEP_DELAY=0."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **_: Any
    ) -> ChatResult:
        since = 0
        for message in reversed(messages):
            if isinstance(message, HumanMessage):
                break
            since += isinstance(message, AIMessage)
        reasoning, calls = SCRIPT[min(since, len(SCRIPT) - 1)]
        tool_calls = [
            {"name": name, "args": args, "id": f"call_{since}_{i}", "type": "tool_call"}
            for i, (name, args) in enumerate(calls)
        ]
        content = reasoning if calls else FINAL
        usage = {"input_tokens": 1200, "output_tokens": 40, "total_tokens": 1240}
        message = AIMessage(content=content, tool_calls=tool_calls, usage_metadata=usage)
        return ChatResult(generations=[ChatGeneration(message=message)])


def _dir(config: RunnableConfig) -> Path:
    path = ROOT / str(config["configurable"]["thread_id"])
    path.mkdir(parents=True, exist_ok=True)
    return path


@tool
def plan(entries: list[dict[str, str]]) -> str:
    """Record the plan."""
    return f"{len(entries)} entries"


@tool
def write_file(path: str, content: str, config: RunnableConfig) -> str:
    """Write a file."""
    (_dir(config) / path).write_text(content)
    return f"wrote {path}"


@tool
def read_file(path: str, config: RunnableConfig) -> str:
    """Read a file."""
    return (_dir(config) / path).read_text()


@tool
def shell(command: str, config: RunnableConfig) -> str:
    """Run a shell command, once a person approved it."""
    answer = interrupt({"tool": "shell", "command": command})
    if answer != "allow_once":
        return "denied"
    done = subprocess.run(
        ["sh", "-c", command], cwd=_dir(config), capture_output=True, text=True, check=False
    )
    return done.stdout


TOOLS = [plan, write_file, read_file, shell]
MODEL = ScriptedChat()


def model(state: MessagesState) -> dict[str, list[BaseMessage]]:
    return {"messages": [MODEL.invoke(state["messages"])]}


builder = StateGraph(MessagesState)
builder.add_node("model", model)
builder.add_node("tools", ToolNode(TOOLS))
builder.add_edge(START, "model")
builder.add_conditional_edges("model", tools_condition, {"tools": "tools", END: END})
builder.add_edge("tools", "model")
graph = builder.compile()
