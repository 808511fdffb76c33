"""`provider:model` strings → pydantic-ai models (only its model layer)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from pydantic_ai.models import Model

from opennua.runtime._errors import ModelConfigError

DEFAULT_MODEL = "scripted:demo"
MODEL_ENV = "NUA_MODEL"


def model_from_env(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    return env.get(MODEL_ENV) or DEFAULT_MODEL


def resolve_model(spec: str, *, env: Mapping[str, str] | None = None) -> Model:
    """Build the model `spec` names. A missing credential is a `ModelConfigError` that names
    the environment variable to set; nothing is sent until the loop calls the model."""
    env = os.environ if env is None else env
    provider, sep, name = spec.partition(":")
    if not sep or not name:
        raise ModelConfigError(f"model {spec!r} is not of the form provider:model")
    if provider == "scripted":
        if name != "demo":
            raise ModelConfigError(
                f"unknown scripted model {spec!r}; the offline one is scripted:demo"
            )
        from opennua.runtime._demo import demo_model

        return demo_model()
    if provider == "openai":
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        base_url = env.get("OPENAI_BASE_URL") or None
        key = env.get("OPENAI_API_KEY")
        if not key:
            if base_url is None:
                raise ModelConfigError(
                    f"{spec} needs OPENAI_API_KEY (or OPENAI_BASE_URL for an OpenAI-compatible "
                    "server such as Ollama, vLLM or llama.cpp)"
                )
            key = "not-needed"  # local OpenAI-compatible servers ignore it; the SDK wants one
        return OpenAIChatModel(name, provider=OpenAIProvider(base_url=base_url, api_key=key))
    if provider == "anthropic":
        from pydantic_ai.models.anthropic import AnthropicModel
        from pydantic_ai.providers.anthropic import AnthropicProvider

        key = env.get("ANTHROPIC_API_KEY")
        if not key:
            raise ModelConfigError(f"{spec} needs ANTHROPIC_API_KEY")
        return AnthropicModel(name, provider=AnthropicProvider(api_key=key))
    if provider == "google":
        key = env.get("GOOGLE_API_KEY") or env.get("GEMINI_API_KEY")
        if not key:
            raise ModelConfigError(f"{spec} needs GOOGLE_API_KEY (or GEMINI_API_KEY)")
        try:
            from pydantic_ai.models.google import GoogleModel
            from pydantic_ai.providers.google import GoogleProvider
        except ImportError as exc:
            raise ModelConfigError(
                "google: models need the optional extra: pip install 'opennua[google]'"
            ) from exc
        return GoogleModel(name, provider=GoogleProvider(api_key=key))
    raise ModelConfigError(
        f"unknown model provider {provider!r} in {spec!r}; use openai:, anthropic:, google: "
        "or scripted:demo"
    )
