"""Each context's slice of the settings: the fields it reads, by the names `Settings` gives them
(`Settings` reads, documents and checks them; its properties build these). A context is wired
from its slice alone, so what a context depends on is written in one place."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Generic, TypeVar, overload

from pydantic import BaseModel, ConfigDict, Field, SecretStr


class WorkspaceReviewerBudget(BaseModel):
    """One workspace's reviewer budget in `SURSIS_REVIEWER_BUDGETS`; a key it leaves out keeps the
    service-wide value. Unknown keys are refused: a misspelled limit would otherwise be no limit."""

    model_config = ConfigDict(extra="forbid", strict=True)

    calls_per_minute: int | None = Field(default=None, ge=0)
    tokens_per_day: int | None = Field(default=None, ge=0)


S = TypeVar("S")


class SliceOf(Generic[S]):
    """A context's slice as an attribute of `Settings`: at each read, `kind` (one of the slices
    below) with each of its fields read from the settings by name."""

    def __init__(self, kind: type[S]) -> None:
        self._kind = kind

    @overload
    def __get__(self, settings: None, owner: type[Any]) -> SliceOf[S]: ...
    @overload
    def __get__(self, settings: object, owner: type[Any]) -> S: ...
    def __get__(self, settings: object, owner: type[Any]) -> S | SliceOf[S]:
        if settings is None:  # read on the class
            return self
        return self._kind(**{f.name: getattr(settings, f.name) for f in fields(self._kind)})  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True, kw_only=True)
class StorageSettings:
    """The database, its pool and listener, the keyring, audit signing and checkpoints, the
    credential cache, retention's batch and the sign-in groups' provisioning rules."""

    database_url: str
    database_listen_url: str | None
    db_pool_size: int
    db_pool_overflow: int
    db_pool_timeout_seconds: float
    encryption_keys: SecretStr | None
    encryption_keys_file: Path | None
    audit_signing_key_file: Path | None
    audit_signing_pkcs11_module: Path | None
    audit_signing_pkcs11_token: str | None
    audit_signing_pkcs11_key: str | None
    audit_signing_pkcs11_pin: SecretStr | None
    audit_checkpoint_dir: Path | None
    decision_seal_pkcs11_key: str | None
    audit_checkpoint_s3_bucket: str | None
    audit_checkpoint_s3_prefix: str
    audit_checkpoint_s3_endpoint_url: str | None
    audit_checkpoint_s3_retention_days: int
    credential_cache_seconds: float
    idle_poll_seconds: float
    worker_poll_seconds: float
    retention_batch: int
    oidc_groups: dict[str, dict[str, str]]


@dataclass(frozen=True, slots=True, kw_only=True)
class TelemetrySettings:
    otlp_endpoint: str | None
    otlp_traces_endpoint: str | None
    otlp_metrics_endpoint: str | None
    trace_console: bool
    trace_content: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class WorldSettings:
    lease_seconds: float


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentSettings:
    """Which agents are served, their models and how long each kind of suspension may wait."""

    agents: list[str]
    model: str
    openai_base_url: str | None
    openai_api_key: SecretStr | None
    approval_timeout_seconds: float
    elicitation_timeout_seconds: float
    client_exec_timeout_seconds: float


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicySettings:
    """The policy caches (live on SQLite: `database_url`) and the reviewers' budgets and loop."""

    database_url: str
    policy_cache_seconds: float
    reviewer_calls_per_minute: int
    reviewer_tokens_per_day: int
    reviewer_budgets: dict[str, WorkspaceReviewerBudget]
    reviewer_poll_seconds: float


@dataclass(frozen=True, slots=True, kw_only=True)
class DeliverySettings:
    """Webhooks, and the channels' deliveries: Slack messages and email digests, which link to the
    inbox at the public URL (else `host:port`)."""

    public_url: str | None
    host: str
    port: int
    webhook_max_attempts: int
    webhook_backoff_seconds: float
    webhook_backoff_max_seconds: float
    webhook_timeout_seconds: float
    webhook_poll_seconds: float
    webhook_allow_private_hosts: bool
    channel_poll_seconds: float
    slack_bot_token: SecretStr | None
    slack_api_url: str
    digest_window_seconds: float
    smtp_host: str | None
    smtp_port: int
    smtp_starttls: bool
    smtp_username: str | None
    smtp_password: SecretStr | None
    smtp_from: str
    smtp_timeout_seconds: float


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeSettings:
    """The runner's limits and history, and the worker's slots, polls, lease, sweeps and seals."""

    lease_seconds: float
    step_limit: int
    events_delta_interval_seconds: float
    history_cache_messages: int
    history_turns: int
    worker_slots: int
    worker_poll_seconds: float
    sweep_seconds: float
    max_segment_attempts: int
    audit_seal_seconds: float
    retention_sweep_seconds: float


@dataclass(frozen=True, slots=True, kw_only=True)
class ConversationSettings:
    max_content_chars: int
    max_wait_seconds: float
    client_exec_timeout_seconds: float
    client_exec_max_seconds: float
    events_settle_seconds: float


@dataclass(frozen=True, slots=True, kw_only=True)
class ChannelSettings:
    """Slack's inbound side: the agent a mention talks to, the workspace of its notices."""

    slack_agent: str
    slack_workspace: str
    max_content_chars: int
