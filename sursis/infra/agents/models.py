"""Model selection from `SURSIS_MODEL`."""

from __future__ import annotations

import importlib.util
import re

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


_PROVIDER_PACKAGES: dict[str, tuple[str, str]] = {
    "anthropic": ("anthropic", "anthropic"),
    "google": ("google.genai", "google"),
    "google-gla": ("google.genai", "google"),
    "google-vertex": ("google.genai", "google"),
    "groq": ("groq", "groq"),
    "mistral": ("mistralai", "mistral"),
    "bedrock": ("boto3", "bedrock"),
    "cohere": ("cohere", "cohere"),
    "huggingface": ("huggingface_hub", "huggingface"),
}
"""A model name's provider prefix: the client library it needs, and the extra of `sursis` that
installs it (the extras mirror pydantic-ai-slim's; `all-models` installs every one)."""


def missing_provider_package(name: str) -> str | None:
    """Why the model `name` cannot be built here (its client library is not installed), in one line
    naming the extra that installs it; None when nothing is missing."""
    provider, _, _ = name.partition(":")
    needed = _PROVIDER_PACKAGES.get(provider)
    if needed is None:
        return None
    module, extra = needed
    try:
        found = importlib.util.find_spec(module) is not None
    except ImportError:
        found = False
    if found:
        return None
    return (
        f"model {name!r} needs the {module.split('.')[0]} package, which is not installed: "
        f"pip install 'sursis[{extra}]' (or sursis[all-models]; Docker: --build-arg SURSIS_EXTRAS={extra})"
    )


_PYDANTIC_AI_EXTRA = re.compile(r"pydantic-ai-slim\[([a-z-]+)\]")


def missing_library(exc: BaseException) -> str | None:
    """For an agent module that could not be imported because pydantic-ai lacks a provider's
    client library (an `Agent(model="groq:...")` builds its model when it is made): which extra
    of sursis installs it, in one line; None for any other error."""
    if not isinstance(exc, ImportError):
        return None
    found = _PYDANTIC_AI_EXTRA.search(str(exc))
    if found is None:
        return None
    extra = found.group(1)
    return (
        f"its model needs a client library that is not installed: pip install 'sursis[{extra}]' "
        f"(or sursis[all-models]; Docker: --build-arg SURSIS_EXTRAS={extra})"
    )
