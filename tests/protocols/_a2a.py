"""Driving an opennua deployment with the official A2A client (`a2a-sdk`): a client per
server and token, and the Host's own view to compare with (shared by the A2A tests, the
conformance column and the benchmark)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import httpx
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.types import Message, Part, Role, SendMessageConfiguration, SendMessageRequest


@contextlib.asynccontextmanager
async def a2a_client(
    base_url: str, token: str, deployment: str = "default", *, streaming: bool = True
) -> AsyncIterator[Client]:
    """The SDK's client for `deployment`, built from its Agent Card (bearer auth)."""
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    try:
        factory = ClientFactory(ClientConfig(httpx_client=http, streaming=streaming))
        client = await factory.create_from_url(f"{base_url}/v1/a2a/{deployment}")
        try:
            yield client
        finally:
            await client.close()
    finally:
        await http.aclose()


def message(
    text: str,
    message_id: str,
    *,
    task_id: str = "",
    context_id: str = "",
) -> Message:
    return Message(
        message_id=message_id,
        role=Role.ROLE_USER,
        parts=[Part(text=text)],
        task_id=task_id,
        context_id=context_id,
    )


def request(msg: Message, *, immediately: bool = False) -> SendMessageRequest:
    return SendMessageRequest(
        message=msg, configuration=SendMessageConfiguration(return_immediately=immediately)
    )
