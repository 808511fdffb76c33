"""The runtime's public surface and the default agent's digest."""

from __future__ import annotations

import dataclasses

from opennua.runtime import agent_digest, default_agent


def test_default_agent_digest_is_stable_and_covers_model_and_tools(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("NUA_MODEL", raising=False)
    agent = default_agent()
    assert agent.model == "scripted:demo"
    assert {t.name for t in agent.tools} >= {"plan", "task", "ask_user", "shell", "write_file"}
    digest = agent.digest
    assert digest.startswith("sha256:") and len(digest) == 71
    assert default_agent().digest == digest == agent_digest(agent)
    assert default_agent("openai:gpt-4o").digest != digest
    fewer = dataclasses.replace(agent, tools=agent.tools[:-1])
    assert fewer.digest != digest
    monkeypatch.setenv("NUA_MODEL", "anthropic:claude-x")
    assert default_agent().model == "anthropic:claude-x"
