"""Bad input on the A2A endpoint gets A2A's JSON-RPC error shape, never a 500: malformed
JSON, batches, unknown methods, invalid params, oversized messages and bodies, a lone
surrogate, JSON nested too deeply, a task that is not there (docs/protocols.md, "A2A")."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.e2e._proc import Server

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]
PATH = "/v1/a2a/default"


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    server = Server(tmp_path_factory.mktemp("a2a-bad"), step_delay="0", model="scripted:demo")
    server.start()
    try:
        with httpx.Client(
            base_url=server.url,
            headers={"Authorization": f"Bearer {server.token}", "A2A-Version": "1.0"},
            timeout=30,
        ) as client:
            yield client
    finally:
        server.stop()


def _send(text: str, **message: Any) -> dict[str, Any]:
    body = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": text}], **message}
    return {"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": {"message": body}}


def _error(response: httpx.Response) -> tuple[int, Any]:
    assert response.status_code == 200, response.text  # the binding answers errors in-band
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["jsonrpc"] == "2.0" and "result" not in body, body
    return body["error"]["code"], body["id"]


CASES: dict[str, tuple[bytes, int, Any]] = {
    "not JSON": (b'{"jsonrpc": "2.0", "id": 1, "method": ', -32700, None),
    "a batch": (json.dumps([_send("hi")]).encode(), -32600, None),
    "not JSON-RPC 2.0": (
        json.dumps({"jsonrpc": "1.0", "id": 2, "method": "GetTask"}).encode(),
        -32600,
        2,
    ),
    "an id that is an object": (
        json.dumps({"jsonrpc": "2.0", "id": {}, "method": "GetTask"}).encode(),
        -32600,
        None,
    ),
    "no method": (json.dumps({"jsonrpc": "2.0", "id": 3}).encode(), -32600, 3),
    "an unknown method": (
        json.dumps({"jsonrpc": "2.0", "id": "x", "method": "message/teleport"}).encode(),
        -32601,
        "x",
    ),
    "params that are no object": (
        json.dumps({"jsonrpc": "2.0", "id": 4, "method": "GetTask", "params": [1]}).encode(),
        -32602,
        4,
    ),
    "params of the wrong type": (
        json.dumps(
            {"jsonrpc": "2.0", "id": 5, "method": "SendMessage", "params": {"message": 5}}
        ).encode(),
        -32602,
        5,
    ),
    "a lone surrogate": (
        json.dumps(_send("x")).replace('"text": "x"', '"text": "\\ud800"').encode(),
        -32600,
        7,
    ),
    "a non-finite number": (
        json.dumps(_send("x")).replace('"id": 7', '"id": 7, "n": NaN').encode(),
        -32600,
        7,
    ),
    "JSON nested too deeply": (b"[" * 100_000 + b"]" * 100_000, -32600, None),
    "no message id": (json.dumps(_send("hi", messageId="")).encode(), -32602, 7),
    "an empty message": (json.dumps(_send("   ")).encode(), -32602, 7),
    "raw bytes in a message": (
        json.dumps(_send("hi", parts=[{"raw": "aGk="}])).encode(),
        -32602,
        7,
    ),
    "an oversized message": (json.dumps(_send("x" * 300_000)).encode(), -32602, 7),
    "a body over the server's limit": (json.dumps(_send("x" * 1_100_000)).encode(), -32600, None),
    "an unknown task": (
        json.dumps(
            {"jsonrpc": "2.0", "id": 8, "method": "GetTask", "params": {"id": "exe_nope"}}
        ).encode(),
        -32001,
        8,
    ),
    "an unknown context": (json.dumps(_send("hi", contextId="ses_nope")).encode(), -32602, 7),
    "an answer to an unknown task": (
        json.dumps(_send("allow_once", taskId="exe_nope")).encode(),
        -32001,
        7,
    ),
    "a stream of an unknown task": (
        json.dumps(
            {"jsonrpc": "2.0", "id": 9, "method": "SubscribeToTask", "params": {"id": "exe_no"}}
        ).encode(),
        -32001,
        9,
    ),
}


def test_another_protocol_version_is_refused(http: httpx.Client) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "exe_x"}}
    response = http.post(PATH, json=body, headers={"A2A-Version": "0.3"})
    assert _error(response) == (-32009, 1)


def test_no_extended_card_is_configured(http: httpx.Client) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard", "params": {}}
    assert _error(http.post(PATH, json=body)) == (-32007, 1)


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_gets_a_json_rpc_error(http: httpx.Client, case: str) -> None:
    body, code, request_id = CASES[case]
    response = http.post(PATH, content=body, headers={"content-type": "application/json"})
    assert _error(response) == (code, request_id)


def test_an_unknown_deployment_is_not_found(http: httpx.Client) -> None:
    response = http.post("/v1/a2a/nope", json=_send("hi"))
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_listing_tasks_needs_a_context(http: httpx.Client) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
    response = http.post(PATH, json=body)
    assert _error(response) == (-32602, 1)  # ListTasks needs a contextId


def test_a_push_config_to_a_private_address_is_refused_without_the_flag(
    http: httpx.Client,
) -> None:
    sent = _send("hi", messageId="m-push")
    sent["params"]["configuration"] = {"returnImmediately": True}
    task = http.post(PATH, json=sent).json()["result"]["task"]
    for url in ("http://127.0.0.1:9/hook", "http://10.0.0.1/hook", "http://localhost/hook"):
        config = {"taskId": task["id"], "url": url, "token": "t"}
        call = {"jsonrpc": "2.0", "id": 9, "method": "CreateTaskPushNotificationConfig"}
        response = http.post(PATH, json={**call, "params": config})
        assert _error(response) == (-32602, 9)
        assert "not a public address" in response.json()["error"]["message"]
