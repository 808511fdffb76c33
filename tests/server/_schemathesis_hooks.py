"""Schemathesis hooks for tests/server/test_openapi_fuzz.py (loaded via SCHEMATHESIS_HOOKS).

Generated cases reuse the same small values, so two different bodies would share the
idempotency key "0" and the second would (rightly) get 422 `idempotency_key_reused`: a
stateful rule, not a spec-valid request refused. Each call gets a key of its own; a key
that is itself the invalid part of a negative case is left as it is.
"""

from __future__ import annotations

import json
import os
import uuid
from typing import Any

import schemathesis


def _valid_key(value: Any) -> bool:
    return isinstance(value, str) and 1 <= len(value) <= 128


@schemathesis.hook
def before_call(context: Any, case: Any, kwargs: dict[str, Any]) -> None:
    key = f"st-{uuid.uuid4().hex}"
    headers = case.headers or {}
    for name in list(headers):
        if name.lower() == "idempotency-key" and _valid_key(headers[name]):
            headers[name] = key
    if isinstance(case.body, dict) and _valid_key(case.body.get("intent_id")):
        case.body["intent_id"] = key
    _usable_schedule(case)
    _usable_egress(case)
    _usable_subscription(case)
    _usable_client_tools(case)


def _usable_client_tools(case: Any) -> None:
    """A message's client tools are checked by meaning too (names unique and none of the
    agent's, an object schema, 16 KiB each): a schema-valid list is made one that holds."""
    body = case.body
    if case.method.upper() != "POST" or not case.path.endswith("/messages"):
        return
    if isinstance(body, dict) and isinstance(body.get("client_tools"), list):
        body["client_tools"] = [{"name": f"tool_{i}"} for i in range(len(body["client_tools"]))]


def _usable_subscription(case: Any) -> None:
    """A subscription's URL and event names are checked by meaning (an absolute http(s)
    URL; the protocol's action types): schema-valid ones are made ones that hold."""
    body = case.body
    if case.method.upper() != "POST" or case.path != "/v1/subscriptions":
        return
    if not isinstance(body, dict):
        return
    if isinstance(body.get("url"), str):
        body["url"] = "https://example.org/hooks"
    if isinstance(body.get("events"), list):
        body["events"] = ["turn.ended" if isinstance(e, str) else e for e in body["events"]]


def _usable_egress(case: Any) -> None:
    """A deployment's egress entries are checked by meaning too (a name, an address or a
    network; ports 1-65535): schema-valid ones are made one that means something."""
    body = case.body
    if case.method.upper() != "PUT" or not isinstance(body, dict):
        return
    if case.path == "/v1/deployments/{name}" and isinstance(body.get("egress"), list):
        body["egress"] = [
            "registry.example.org:443" if isinstance(e, str) else e for e in body["egress"]
        ]


def _usable_schedule(case: Any) -> None:
    """A schedule's cron, time zone and prompt fields are checked by meaning (croniter,
    the tz database, the template's field names), which no JSON Schema can say: a
    schema-valid body is made one whose meaning holds, so the positive checks test the
    route. Schema-invalid values (the negative cases) are left as they are."""
    body = case.body
    if case.method.upper() != "POST" or case.path != "/v1/schedules" or not isinstance(body, dict):
        return
    if isinstance(body.get("cron"), str):
        body["cron"] = "0 0 1 1 *"
    if isinstance(body.get("timezone"), str):
        body["timezone"] = "UTC"
    if isinstance(body.get("prompt"), str) and body["prompt"]:
        body["prompt"] = body["prompt"].replace("{", "(")


# -- another workspace's member against the first workspace's objects ----------------------
# With NUA_FUZZ_FOREIGN (JSON: path parameter -> an id of workspace A) set, every case
# names A's objects; NUA_FUZZ_LEAKS is a file where a 2xx response that shows any of
# them is recorded (the test asserts it stays empty).

_FOREIGN: dict[str, str] = json.loads(os.environ.get("NUA_FUZZ_FOREIGN") or "{}")


@schemathesis.hook
def map_path_parameters(context: Any, path_parameters: dict[str, Any] | None) -> Any:
    if _FOREIGN and path_parameters:
        for name in path_parameters:
            if name in _FOREIGN:
                path_parameters[name] = _FOREIGN[name]
    return path_parameters


@schemathesis.hook
def map_query(context: Any, query: dict[str, Any] | None) -> Any:
    if _FOREIGN and query and "workspace_id" in query:
        query["workspace_id"] = _FOREIGN["workspace_id"]
    return query


@schemathesis.hook
def after_call(context: Any, case: Any, response: Any) -> None:
    if not _FOREIGN or not 200 <= response.status_code < 300:
        return
    text = response.text if hasattr(response, "text") else str(response.content)
    shown = [value for value in _FOREIGN.values() if value in text]
    if shown:
        with open(os.environ["NUA_FUZZ_LEAKS"], "a", encoding="utf-8") as leaks:
            leaks.write(f"{case.method} {case.formatted_path} -> {response.status_code} {shown}\n")
