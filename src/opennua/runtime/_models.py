"""`provider:model` strings → pydantic-ai models (only its model layer)."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from opennua.runtime._errors import ModelConfigError

if TYPE_CHECKING:
    from pydantic_ai.models import Model

DEFAULT_MODEL = "scripted:demo"
#: The offline models: the demo task, and one that messages the first A2A agent.
SCRIPTED = ("demo", "a2a")
MODEL_ENV = "NUA_MODEL"


def model_from_env(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    return env.get(MODEL_ENV) or DEFAULT_MODEL


def check_model(spec: str, *, env: Mapping[str, str] | None = None) -> None:
    """Raise `ModelConfigError` if `spec` cannot be built here: its form, its provider, a
    missing credential (naming the variable to set) or extra. Imports no model SDK, so
    `nua serve` says so before it sets anything up, at no cost."""
    env = os.environ if env is None else env
    provider, sep, name = spec.partition(":")
    if not sep or not name:
        raise ModelConfigError(f"model {spec!r} is not of the form provider:model")
    if provider == "scripted":
        if name not in SCRIPTED:
            raise ModelConfigError(
                f"unknown scripted model {spec!r}; the offline ones are scripted:demo and "
                "scripted:a2a"
            )
    elif provider == "openai":
        if not env.get("OPENAI_API_KEY") and not env.get("OPENAI_BASE_URL"):
            raise ModelConfigError(
                f"{spec} needs OPENAI_API_KEY (or OPENAI_BASE_URL for an OpenAI-compatible "
                "server such as Ollama, vLLM or llama.cpp)"
            )
    elif provider == "anthropic":
        if not env.get("ANTHROPIC_API_KEY"):
            raise ModelConfigError(f"{spec} needs ANTHROPIC_API_KEY")
    elif provider == "google":
        if not (env.get("GOOGLE_API_KEY") or env.get("GEMINI_API_KEY")):
            raise ModelConfigError(f"{spec} needs GOOGLE_API_KEY (or GEMINI_API_KEY)")
        if not _installed("google.genai"):
            raise ModelConfigError(
                "google: models need the optional extra: pip install 'opennua[google]'"
            )
    else:
        raise ModelConfigError(
            f"unknown model provider {provider!r} in {spec!r}; use openai:, anthropic:, "
            "google: or scripted:demo"
        )


def resolve_model(spec: str, *, env: Mapping[str, str] | None = None) -> Model:
    """Build the model `spec` names (`check_model` first). Nothing is sent until the loop
    calls the model."""
    env = os.environ if env is None else env
    check_model(spec, env=env)
    provider, _, name = spec.partition(":")
    if provider == "scripted" and name == "a2a":
        from opennua.runtime._a2a_script import a2a_model

        return a2a_model()
    if provider == "scripted":
        from opennua.runtime._demo import demo_model

        return demo_model()
    if provider == "openai":
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        # Local OpenAI-compatible servers ignore the key; the SDK wants one.
        key = env.get("OPENAI_API_KEY") or "not-needed"
        base_url = env.get("OPENAI_BASE_URL") or None
        return OpenAIChatModel(name, provider=OpenAIProvider(base_url=base_url, api_key=key))
    if provider == "anthropic":
        from pydantic_ai.models.anthropic import AnthropicModel
        from pydantic_ai.providers.anthropic import AnthropicProvider

        return AnthropicModel(name, provider=AnthropicProvider(api_key=env["ANTHROPIC_API_KEY"]))
    from pydantic_ai.models.google import GoogleModel
    from pydantic_ai.providers.google import GoogleProvider

    key = env.get("GOOGLE_API_KEY") or env["GEMINI_API_KEY"]
    return GoogleModel(name, provider=GoogleProvider(api_key=key))


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is missing
        return False
