"""Tools: the `@tool` decorator, the context a tool runs with, and argument validation."""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, get_type_hints

from pydantic import BaseModel, ConfigDict, JsonValue, ValidationError, create_model

from opennua._common import json_value
from opennua.protocol.actions import ToolKind
from opennua.runtime._sandbox import Sandbox

ToolFn = Callable[..., Awaitable[Any] | Any]
#: The `metadata` of a client tool's definition as models are offered it.
CLIENT_TOOL_METADATA: dict[str, Any] = {"opennua_client_tool": True}


class ArtifactPort(Protocol):
    """Where published artifacts go (the blob store). Content-addressed, so a re-run is safe."""

    async def put(self, data: bytes, *, name: str, media_type: str) -> str:
        """Store `data` and return its sha256 hex digest; `BlobsUnavailable` when the
        bytes could not be made durable now."""


class MemoryArtifacts:
    """An artifact port in memory (tests, and the embedded demo without a blob store)."""

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}

    async def put(self, data: bytes, *, name: str, media_type: str) -> str:
        import hashlib

        digest = hashlib.sha256(data).hexdigest()
        self.blobs[digest] = data
        return digest


class InputRequired(Exception):
    """Raised by a tool that needs a person's answer; the run suspends until one arrives."""

    def __init__(self, prompt: str, response_schema: dict[str, JsonValue] | None = None) -> None:
        super().__init__(prompt)
        self.prompt = prompt
        self.response_schema = response_schema


@dataclass
class ToolContext:
    """What a tool may use. Facts it reports (`report`) are committed with its result."""

    workdir: Path
    run_id: str
    tool_call_id: str
    #: Stable across re-runs of the same call: idempotent tools pass it to external services.
    idempotency_key: str
    artifacts: ArtifactPort
    cancel: asyncio.Event
    #: The answer to this call's input request, when the run resumed with one.
    answer: JsonValue = None
    reported: list[BaseModel] = field(default_factory=list)
    shell_env: Mapping[str, str] = field(default_factory=dict)
    #: How commands run: confined (and with which egress), or (the operator's choice) not.
    sandbox: Sandbox = field(default_factory=Sandbox)

    def report(self, payload: BaseModel) -> None:
        self.reported.append(payload)


@functools.cache
def _schema(args_model: type[BaseModel]) -> dict[str, Any]:
    """A model's JSON schema, generated once: pydantic builds it anew on every call, and
    every model request offers every tool (it was a third of a busy loop's time). Shared:
    no caller changes it (pydantic-ai copies a schema before transforming it)."""
    schema = args_model.model_json_schema()
    schema.pop("title", None)
    return schema


@dataclass(frozen=True)
class Tool:
    """A tool the model may call. `args_model` validates the model's arguments."""

    name: str
    description: str
    kind: ToolKind
    title: str
    requires_approval: bool
    idempotent: bool
    fn: ToolFn
    #: Validates arguments; None for tools described only by a JSON schema (MCP), whose
    #: server validates them.
    args_model: type[BaseModel] | None
    takes_context: bool
    json_schema: dict[str, Any] | None = None
    #: A tool the client runs itself (`_client_tools`): offered to the root run only.
    client: bool = False

    @property
    def parameters_schema(self) -> dict[str, Any]:
        if self.args_model is None:
            return dict(self.json_schema or {"type": "object", "properties": {}})
        return _schema(self.args_model)

    def describe(self) -> dict[str, Any]:
        """The canonical description that goes into the agent definition's digest."""
        return {
            "name": self.name,
            "description": self.description,
            "kind": self.kind,
            "requires_approval": self.requires_approval,
            "idempotent": self.idempotent,
            "parameters": self.parameters_schema,
        }

    def validate(self, raw_args: str | dict[str, Any] | None) -> dict[str, Any]:
        """Validated keyword arguments; raises `ValidationError` or `ValueError` (bad JSON)."""
        if raw_args is None or raw_args == "":
            data: Any = {}
        elif isinstance(raw_args, str):
            data = json_value(raw_args)
        else:
            data = raw_args
        if self.args_model is None:
            if not isinstance(data, dict):
                raise ValueError("arguments must be a JSON object")
            return data
        # extra="forbid": the instance's __dict__ holds exactly the declared fields.
        return dict(self.args_model.model_validate(data).__dict__)

    async def call(self, ctx: ToolContext, args: dict[str, Any]) -> Any:
        result = self.fn(ctx, **args) if self.takes_context else self.fn(**args)
        if inspect.isawaitable(result):
            result = await result
        return result


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


def make_tool(
    fn: ToolFn,
    *,
    name: str | None = None,
    kind: ToolKind = "other",
    title: str | None = None,
    requires_approval: bool = False,
    idempotent: bool = False,
    description: str | None = None,
) -> Tool:
    sig = inspect.signature(fn)
    hints = get_type_hints(fn)
    params = list(sig.parameters.values())
    takes_context = bool(params) and hints.get(params[0].name) is ToolContext
    fields: dict[str, Any] = {}
    for p in params[1:] if takes_context else params:
        annotation = hints.get(p.name, Any)
        default = ... if p.default is inspect.Parameter.empty else p.default
        fields[p.name] = (annotation, default)
    tool_name = name or fn.__name__
    args_model = create_model(f"{tool_name}_args", __base__=_Args, **fields)
    doc = description if description is not None else inspect.getdoc(fn) or ""
    return Tool(
        name=tool_name,
        description=doc,
        kind=kind,
        title=title or tool_name.replace("_", " "),
        requires_approval=requires_approval,
        idempotent=idempotent,
        fn=fn,
        args_model=args_model,
        takes_context=takes_context,
    )


def tool(
    name: str | None = None,
    *,
    kind: ToolKind = "other",
    title: str | None = None,
    requires_approval: bool = False,
    idempotent: bool = False,
) -> Callable[[ToolFn], Tool]:
    """Declare a Python function a tool. The JSON schema comes from its signature; a first
    parameter annotated `ToolContext` receives the context and is not part of the schema."""

    def wrap(fn: ToolFn) -> Tool:
        return make_tool(
            fn,
            name=name,
            kind=kind,
            title=title,
            requires_approval=requires_approval,
            idempotent=idempotent,
        )

    return wrap


def validation_message(exc: ValidationError | ValueError) -> str:
    if isinstance(exc, ValidationError):
        parts = [
            f"{'.'.join(str(x) for x in e['loc']) or '(arguments)'}: {e['msg']}"
            for e in exc.errors(include_url=False)
        ]
        return "Invalid arguments: " + "; ".join(parts)
    return f"Invalid arguments: {exc}"
