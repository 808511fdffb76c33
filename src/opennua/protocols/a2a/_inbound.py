"""What an A2A caller sends, as our intents' fields: a message's parts as content, an
answer to an input request, the intent keys its message id gives (pure, no I/O)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from a2a.types import Message, Part
from google.protobuf.json_format import MessageToDict

from opennua.protocol.actions import ResourceLinkPart, TextPart

#: What one message may carry, as our intents allow (`Content`: 1 to 64 parts).
MAX_PARTS = 64
#: A message's text (all its parts) beyond this is refused: a turn's input is a
#: message, not a payload (the server's body limit bounds the request as a whole).
MAX_TEXT = 256 * 1024


class BadMessage(ValueError):
    """The message cannot be an intent; `str()` says why (an `InvalidParams` error)."""


def intent_key(purpose: str, principal_id: str, deployment: str, message_id: str) -> str:
    """The intent id a message id stands for: the same message sent again (a retry after
    a timeout) is the same intent, and the Host answers it once. Scoped by the caller
    and the deployment, so two callers' message ids never meet."""
    raw = "\0".join((purpose, principal_id, deployment, message_id)).encode("utf-8", "replace")
    return f"a2a_{purpose}_{hashlib.sha256(raw).hexdigest()[:40]}"


def _text_of(part: Part) -> str | None:
    kind = part.WhichOneof("content")
    if kind == "text":
        return part.text
    if kind == "data":
        return json.dumps(MessageToDict(part)["data"], ensure_ascii=False, sort_keys=True)
    return None


def content_of(message: Message) -> list[TextPart | ResourceLinkPart]:
    """The message's parts as our content: text as text, data as its JSON text, a file by
    URL as a resource link. Raw bytes are refused: a turn's input holds no file (publish
    it and link it)."""
    if not message.message_id:
        raise BadMessage("message.messageId is required")
    if not message.parts:
        raise BadMessage("message.parts must hold at least one part")
    if len(message.parts) > MAX_PARTS:
        raise BadMessage(f"message.parts holds at most {MAX_PARTS} parts")
    out: list[TextPart | ResourceLinkPart] = []
    size = 0
    for i, part in enumerate(message.parts):
        kind = part.WhichOneof("content")
        if kind == "url":
            name = part.filename or part.url.rsplit("/", 1)[-1] or "file"
            out.append(
                ResourceLinkPart(uri=part.url, name=name, media_type=part.media_type or None)
            )
            continue
        text = _text_of(part)
        if text is None:
            raise BadMessage(
                f"message.parts[{i}]: {kind or 'an empty part'} is not supported "
                "(send text, data or a file by url)"
            )
        size += len(text)
        out.append(TextPart(text=text))
    if size > MAX_TEXT:
        raise BadMessage(f"the message's text is over {MAX_TEXT} characters")
    if not any(isinstance(p, ResourceLinkPart) or p.text.strip() for p in out):
        raise BadMessage("the message is empty")
    return out


def answer_of(message: Message, request: Mapping[str, Any]) -> dict[str, Any]:
    """The answer a message gives to an open input request: `{"option_id": …}` or
    `{"payload": …}`.

    A data part `{"option_id": …}` or `{"payload": …}` says it exactly; otherwise a text
    naming an option (its id or its name, any case) selects it, and any other text (or
    data) is the payload of a request that takes one."""
    options: Sequence[Mapping[str, Any]] = request.get("options") or []
    texts: list[str] = []
    for part in message.parts:
        kind = part.WhichOneof("content")
        if kind == "data":
            data = MessageToDict(part)["data"]
            if isinstance(data, dict):
                data = {k: v for k, v in data.items() if k != "request_id"}  # which, not what
                if not data:
                    continue
            if isinstance(data, dict) and ("option_id" in data or "payload" in data):
                if data.get("option_id") is not None:
                    return {"option_id": str(data["option_id"])}
                return {"payload": data.get("payload")}
            if not options:
                return {"payload": data}
        elif kind == "text":
            texts.append(part.text)
    said = " ".join(texts).strip()
    for option in options:
        if said.lower() in (
            str(option.get("option_id", "")).lower(),
            str(option.get("name", "")).lower(),
        ):
            return {"option_id": str(option["option_id"])}
    if options and not request.get("response_schema"):
        names = ", ".join(str(o.get("option_id")) for o in options)
        raise BadMessage(f"answer with one of the options: {names}")
    if not said:
        raise BadMessage("the answer is empty")
    return {"payload": said}


def named_request(message: Message) -> str | None:
    """The input request a message answers when it says which (a data part's
    `request_id`, as the task's input-required status names it); None: the open one."""
    for part in message.parts:
        if part.WhichOneof("content") == "data":
            data = MessageToDict(part)["data"]
            if isinstance(data, dict) and isinstance(data.get("request_id"), str):
                return str(data["request_id"])
    return None
