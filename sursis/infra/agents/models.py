"""Model selection from `SURSIS_MODEL`, and how the banner and the catalog name a model."""

from __future__ import annotations

import importlib.util
import re
import sys

from pydantic_ai.models import Model, infer_model
from pydantic_ai.models.wrapper import WrapperModel

from sursis.infra.agents.scripted import scripted_model

_OPENAI_APIS = {"openai": "chat", "openai-chat": "chat", "openai-responses": "responses"}
"""The OpenAI API a model name of the service's builds: `openai:` is chat completions (what every
OpenAI-compatible server speaks; pydantic-ai's own `openai:` is the Responses API), and the explicit
`openai-chat:` / `openai-responses:` are what they say."""


def build_model(name: str, *, openai_base_url: str | None = None, openai_api_key: str | None = None) -> Model:
    """`scripted` (offline), `openai:<name>` or `openai-chat:<name>` (chat completions, any
    OpenAI-compatible server), `openai-responses:<name>` (the Responses API), or any pydantic-ai
    model name. The OpenAI ones use `OPENAI_BASE_URL` / `OPENAI_API_KEY` as the settings give them."""
    if name == "scripted":
        return scripted_model()
    prefix, _, model_name = name.partition(":")
    api = _OPENAI_APIS.get(prefix)
    if api is not None and model_name:
        # Imported here: the OpenAI SDK costs ~18 MiB of memory in every process that loads it.
        from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
        from pydantic_ai.providers.openai import OpenAIProvider

        provider = OpenAIProvider(base_url=openai_base_url, api_key=openai_api_key or "not-needed")
        if api == "responses":
            return OpenAIResponsesModel(model_name, provider=provider)
        return OpenAIChatModel(model_name, provider=provider)
    return infer_model(name)


class BuiltModels:
    """The models the service builds from names (`build_model`, with the OpenAI URL and key the
    settings give), each built once and shared by every agent and reviewer that names it.

    A model built here owns the HTTP client its provider opened; `close` (when the service
    stops) closes those clients, so no connection is left open for the collector to find. A
    model handed to the service as an object stays its owner's.
    """

    def __init__(self, *, openai_base_url: str | None = None, openai_api_key: str | None = None) -> None:
        self._openai_base_url = openai_base_url
        self._openai_api_key = openai_api_key
        self._built: dict[str, Model] = {}

    def named(self, name: str) -> Model:
        if name not in self._built:
            self._built[name] = build_model(
                name, openai_base_url=self._openai_base_url, openai_api_key=self._openai_api_key
            )
        return self._built[name]

    async def close(self) -> None:
        """Close the clients of the models built here. Leaving a model's context closes the
        client its provider created (pydantic-ai's provider life cycle); a later run on the model
        would open a new one."""
        for model in self._built.values():
            async with model:
                pass


def model_label(model: Model | str) -> str:
    """A model as the banner and the catalog name it: `provider:name`, and for OpenAI the API too
    (`openai-chat:gpt-4.1-mini`, `openai-responses:gpt-5.2`), as pydantic-ai's own names spell
    them; a test or function model (`scripted`, `test`) by its name alone."""
    if isinstance(model, str):
        prefix, colon, rest = model.partition(":")
        return f"openai-chat:{rest}" if prefix == "openai" and colon else model
    while isinstance(model, WrapperModel):
        model = model.wrapped
    name, system = model.model_name, model.system
    if system in ("function", "test") or ":" in name or not system:
        return name
    api = _openai_api(model)
    if api is not None and system == "openai":
        return f"openai-{api}:{name}"
    return f"{system}:{name}"


def _openai_api(model: Model) -> str | None:
    openai = sys.modules.get("pydantic_ai.models.openai")
    if openai is None:  # not imported: no model of it exists in this process
        return None
    if isinstance(model, openai.OpenAIResponsesModel):
        return "responses"
    if isinstance(model, openai.OpenAIChatModel):
        return "chat"
    return None


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
    """For an agent module that could not be imported because pydantic-ai lacks an optional library
    (an `Agent(model="groq:...")` builds its model when it is made; `duckduckgo_search_tool` needs
    `ddgs`): pydantic-ai's own install line, and the extra of sursis that installs the same where
    there is one (the model providers'), in one line; None for any other error."""
    if not isinstance(exc, ImportError):
        return None
    found = _PYDANTIC_AI_EXTRA.search(str(exc))
    if found is None:
        return None
    extra = found.group(1)
    line = f'pip install "pydantic-ai-slim[{extra}]"'
    if extra not in {e for _, e in _PROVIDER_PACKAGES.values()}:
        return f"a library it needs is not installed: {line}"
    return (
        f"its model needs a client library that is not installed: {line} or pip install 'sursis[{extra}]' "
        f"(or sursis[all-models]; Docker: --build-arg SURSIS_EXTRAS={extra})"
    )


def responses_api_missing(exc: BaseException) -> str | None:
    """For a model error that is a 404 from `…/responses` of a server other than OpenAI's (an
    `OPENAI_BASE_URL` that speaks chat completions only: vLLM, Ollama, many gateways), the fix in
    one line; None for any other error."""
    from pydantic_ai.exceptions import ModelHTTPError

    if not isinstance(exc, ModelHTTPError) or exc.status_code != 404:
        return None
    request = getattr(exc.__cause__, "request", None)
    url = getattr(request, "url", None)
    path, host = str(getattr(url, "path", "")), str(getattr(url, "host", ""))
    if not path.endswith("/responses") or host == "api.openai.com":
        return None
    name = exc.model_name
    return (
        f"the model server has no Responses API (HTTP 404 from {path}): the agent's model "
        f"openai-responses:{name} (pydantic-ai's `openai:`) needs it; for a chat-completions server "
        f"name the model openai-chat:{name}, e.g. adopt(agent, model='openai-chat:{name}')"
    )
