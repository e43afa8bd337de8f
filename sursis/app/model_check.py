"""Whether the models the served agents name can be built here, checked before `serve` or
`worker` starts anything, and how the start-up banner names them."""

from __future__ import annotations

from sursis.app.settings import Settings


def unusable_model(settings: Settings, name: str) -> str | None:
    """Why the model `name` cannot be built here, in one line: its provider's library is missing
    (naming the extra), or pydantic-ai refuses its configuration (an API key not set); None: usable.
    Built once here, so that it fails before the banner rather than in the app."""
    from pydantic_ai.exceptions import UserError

    from sursis.infra.agents.models import build_model, missing_provider_package

    missing = missing_provider_package(name)
    if missing is not None:
        return missing
    key = settings.openai_api_key
    try:
        build_model(
            name,
            openai_base_url=settings.openai_base_url,
            openai_api_key=key.get_secret_value() if key else None,
        )
    except UserError as exc:
        return f"model {name!r}: {' '.join(str(exc).split())}"[:400]
    return None


def models_banner(models: dict[str, str]) -> str:
    """`model: NAME` when every served agent uses one model, else each agent's."""
    if len(set(models.values())) <= 1:
        return f"model: {next(iter(models.values()), '(none)')}"
    return "models: " + ", ".join(f"{agent}={model}" for agent, model in models.items())
