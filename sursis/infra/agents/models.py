"""Model selection from `SURSIS_MODEL`."""

from __future__ import annotations

from pydantic_ai.models import Model, infer_model

from sursis.infra.agents.scripted import scripted_model


def build_model(name: str, *, openai_base_url: str | None = None, openai_api_key: str | None = None) -> Model:
    """`scripted` (offline), `openai:<name>` (any OpenAI-compatible server), or any pydantic-ai model name."""
    if name == "scripted":
        return scripted_model()
    if name.startswith("openai:"):
        # Imported here: the OpenAI SDK costs ~18 MiB of memory in every process that loads it.
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        provider = OpenAIProvider(base_url=openai_base_url, api_key=openai_api_key or "not-needed")
        return OpenAIChatModel(name.removeprefix("openai:"), provider=provider)
    return infer_model(name)
