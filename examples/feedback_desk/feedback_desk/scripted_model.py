"""A scripted model for the feedback plugin: an OpenAI-compatible chat-completions server
(streaming) that investigates like the plugin's instructions ask, deterministically.

`nua serve` reaches it as any OpenAI-compatible provider (`OPENAI_BASE_URL`, deployment
model `openai:feedback-scripted`), so CI and the demo need no key and no network. A real
provider replaces it by deploying the plugin with another `--model` (README).

Per conversation, after the newest user message: first it searches (`desk__search_tickets`
and `desk__search_articles`, the tool names as the request lists them); once the results
are back it answers with one JSON document citing what they returned. Markers in a ticket's
text script the cases the tests need: `#invalid-once` (the first answer breaks the
schema, the corrected one fits), `#invalid-always` (never fits: the turn fails),
`#ask-reviewer` (after searching, it asks the team a free-form question with `ask_user` and
puts the answer in its analysis), `#ask-plan` (the same, with a `response_schema`: one of
three plan names).
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_RETRY = "Your final answer does not conform"
_IDS = re.compile(r"\b(T-\d+|KB-\d+)\b")


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content or "")


def respond(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """The next response: `{"text": …}` or `{"calls": [(name, args), …]}`."""
    users = [i for i, m in enumerate(messages) if m["role"] == "user"]
    asked = [i for i in users if not _text(messages[i]["content"]).startswith(_RETRY)]
    if not asked:
        return {"text": "There is no ticket in this conversation."}
    start = asked[-1]
    prompt = _text(messages[start]["content"])
    since = messages[start + 1 :]
    results = [_text(m.get("content")) for m in since if m["role"] == "tool"]
    names = {t["function"]["name"] for t in tools if t.get("type") == "function"}
    search = next((n for n in names if n.endswith("__search_tickets")), None)
    articles = next((n for n in names if n.endswith("__search_articles")), None)
    if not results and search and articles:
        query = _query(prompt, messages[:start])
        return {"calls": [(search, {"query": query}), (articles, {"query": query})]}
    retried = sum(1 for m in since if m["role"] == "user")
    original = _text(messages[asked[0]]["content"])
    told = _answer_of(since, "ask_user")
    if "#ask-reviewer" in original and "ask_user" in names and told is None:
        return {"calls": [("ask_user", {"question": QUESTION})]}
    if "#ask-plan" in original and "ask_user" in names and told is None:
        return {"calls": [("ask_user", {"question": PLAN, "response_schema": PLAN_SCHEMA})]}
    result = _result(prompt, original, results)
    if told is not None:
        result["internal_analysis"] += f" The team says: {told}"
    if "#invalid-always" in original or ("#invalid-once" in original and retried == 0):
        result["severity"] = 9  # the schema allows 1–4
    return {"text": json.dumps(result, indent=1, ensure_ascii=False)}


#: What the agent asks the team when a ticket says `#ask-reviewer`.
QUESTION = "Which plan is this customer on, and did anything change on our side lately?"
#: ... and when it says `#ask-plan`: an answer the runtime checks against PLAN_SCHEMA.
PLAN = "Which plan is this customer on (free, team or enterprise)?"
PLAN_SCHEMA = {"type": "string", "enum": ["free", "team", "enterprise"]}


def _answer_of(since: list[dict[str, Any]], tool: str) -> str | None:
    """The result of the newest call of `tool` among these messages, if it came back."""
    ids = [
        c["id"]
        for m in since
        if m["role"] == "assistant"
        for c in m.get("tool_calls") or []
        if c["function"]["name"] == tool
    ]
    found = [_text(m.get("content")) for m in since if m.get("tool_call_id") in ids]
    return found[-1] if found else None


def _ticket_id(text: str) -> str:
    found = re.search(r"ticket (T-\d+)", text, re.IGNORECASE)
    return found.group(1) if found else ""


def _title(text: str) -> str:
    first = text.split("\n", 1)[0]
    return first.split(": ", 1)[1] if ": " in first else first


def _query(prompt: str, earlier: list[dict[str, Any]]) -> str:
    if prompt.startswith("Follow-up"):
        first = next((_text(m["content"]) for m in earlier if m["role"] == "user"), "")
        return _title(first)
    return _title(prompt)


def _category(text: str) -> tuple[str, int]:
    lowered = text.lower()
    if any(w in lowered for w in ("lost", "data loss", "deleted")):
        return "bug", 4
    if any(w in lowered for w in ("crash", "error", "exception", "fails", "broken")):
        return "bug", 3
    if any(w in lowered for w in ("please add", "would be nice", "feature request")):
        return "idea", 1
    if "?" in text:
        return "question", 1
    return "complaint", 2


def _items(raw: str) -> list[dict[str, Any]]:
    """The objects in a tool result's text: MCP hands a list back as one JSON document per
    item, one after another."""
    decoder, items, at = json.JSONDecoder(), [], 0
    while at < len(raw):
        if raw[at].isspace():
            at += 1
            continue
        try:
            value, at = decoder.raw_decode(raw, at)
        except json.JSONDecodeError:
            return [{"ref": ref} for ref in _IDS.findall(raw)]
        found = value.get("result", value) if isinstance(value, dict) else value
        items += [v for v in (found if isinstance(found, list) else [found]) if isinstance(v, dict)]
    return items


def _result(prompt: str, original: str, results: list[str]) -> dict[str, Any]:
    me = _ticket_id(original)
    category, severity = _category(original + "\n" + prompt)
    evidence: list[dict[str, str]] = []
    duplicates: list[dict[str, str]] = []
    seen: set[str] = set()
    for raw in results:
        for item in _items(raw):
            ref = item.get("ticket_id") or item.get("article_id") or item.get("ref")
            if not ref or ref == me or ref in seen:
                continue
            seen.add(ref)
            kind = "article" if ref.startswith("KB-") else "ticket"
            evidence.append({"kind": kind, "ref": ref, "quote": item.get("title", ref)})
            if kind == "ticket" and not duplicates:
                duplicates.append(
                    {"ticket_id": ref, "reason": f"same problem: “{item.get('title', ref)}”"}
                )
    for line in (prompt if prompt.startswith("Follow-up") else original).splitlines():
        if re.search(r"\b(ERROR|FATAL|Exception|Traceback)\b", line):
            evidence.append({"kind": "log_line", "ref": "attachment", "quote": line.strip()})
            break
    cited = ", ".join(e["ref"] for e in evidence if e["kind"] != "log_line") or "nothing"
    follow = prompt.startswith("Follow-up")
    analysis = (
        f"{'Updated after the follow-up. ' if follow else ''}{category.title()} of severity "
        f"{severity} about “{_title(original)}”. Evidence: {cited}."
        + (f" Likely a duplicate of {duplicates[0]['ticket_id']}." if duplicates else "")
    )
    reply = (
        "Thank you for the additional details — we have added them to your report and will "
        "keep you posted."
        if follow
        else f"Thank you for telling us about “{_title(original)}”. We have looked into it"
        + (" and it matches a problem we already know about;" if duplicates else ";")
        + " we will get back to you as soon as we know more."
    )
    return {
        "category": category,
        "severity": severity,
        "evidence": evidence,
        "suspected_duplicates": duplicates,
        "internal_analysis": analysis,
        "reply_draft": reply,
    }


def _stream(response: dict[str, Any]) -> bytes:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    chunks = [chunk({"role": "assistant", "content": ""})]
    if response.get("text"):
        chunks.append(chunk({"content": response["text"]}))
    calls = response.get("calls", [])
    for index, (name, args) in enumerate(calls):
        call = {
            "index": index,
            "id": f"call_{int(time.monotonic_ns())}_{index}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)},
        }
        chunks.append(chunk({"tool_calls": [call]}))
    chunks.append(chunk({}, "tool_calls" if calls else "stop"))
    chunks.append(
        {"choices": [], "usage": {"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70}}
    )
    frames = []
    for data in chunks:
        envelope = {"id": "chatcmpl-desk", "object": "chat.completion.chunk", "created": 0}
        frames.append(f"data: {json.dumps(envelope | {'model': 'feedback-scripted'} | data)}\n\n")
    frames.append("data: [DONE]\n\n")
    return "".join(frames).encode()


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A caller that went away (a `nua serve` killed mid-request) is not our error.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class ScriptedModel:
    """The server, in a thread. `delay` (seconds) paces each response; `requests` keeps
    every request body it got (the tests read what the model was sent)."""

    def __init__(self, *, port: int = 0, delay: float = 0.0) -> None:
        self.delay = delay
        self.requests: list[dict[str, Any]] = []
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                model.requests.append(body)
                if model.delay:
                    time.sleep(model.delay)
                payload = _stream(respond(body["messages"], body.get("tools") or []))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = _Server(("127.0.0.1", port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def env(self) -> dict[str, str]:
        """What `nua serve` needs to reach it."""
        return {"OPENAI_BASE_URL": self.url, "OPENAI_API_KEY": "sk-scripted-not-a-key"}

    def start(self) -> ScriptedModel:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
