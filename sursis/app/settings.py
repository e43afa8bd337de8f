"""Typed settings, read once at the entry point and passed in."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, ClassVar

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from sursis.app.context_settings import (
    AgentSettings,
    ChannelSettings,
    ConversationSettings,
    DeliverySettings,
    PolicySettings,
    RuntimeSettings,
    SliceOf,
    StorageSettings,
    TelemetrySettings,
    WorkspaceReviewerBudget,
    WorldSettings,
)


class Settings(BaseSettings):
    """Every knob of the service. Environment variables use the `SURSIS_` prefix.

    The one place the settings are read, documented and checked; each context of the service is
    wired from its own slice of them (`storage`, `agents_served`, ... below: the fields it reads,
    by the same names), never from the whole."""

    model_config = SettingsConfigDict(env_prefix="SURSIS_", env_file=".env", extra="ignore")

    database_url: str = "sqlite+aiosqlite:///./sursis.db"
    """Several hosts are `h1:5432,h2:5432` or `?host=h1:5432&host=h2:5432`, with
    `target_session_attrs=read-write` to follow a promotion (docs/operations.md)."""
    database_listen_url: str | None = None
    """Where LISTEN connections go (PostgreSQL): PostgreSQL itself (a URL that reaches a pooler is
    not used); default the database URL; `off`: none, wake-ups by polling."""
    encryption_keys: SecretStr | None = None
    """`KEY_ID:BASE64_32_BYTES` pairs, comma-separated, the first one active; set: conversation
    content is encrypted at rest (docs/encryption.md). Off when neither this nor the file is set."""
    encryption_keys_file: Path | None = None
    """A file with the same content as `SURSIS_ENCRYPTION_KEYS` (used when that is unset), read again
    when it changes: a key is added or made active without a restart."""
    audit_signing_key_file: Path | None = None
    """An Ed25519 key (PEM) outside the database: a private key signs each audit chain head as it
    is sealed, a public key only checks the signatures (`sursis audit verify`); docs/audit.md."""
    audit_signing_pkcs11_module: Path | None = None
    """The PKCS#11 library of a token holding the audit signing key (an HSM; SoftHSM2's
    `libsofthsm2.so` in tests): set, checkpoints are signed inside the token, and
    `SURSIS_AUDIT_SIGNING_KEY_FILE` is not used (docs/operations.md)."""
    audit_signing_pkcs11_token: str | None = None
    """The token's label."""
    audit_signing_pkcs11_key: str | None = None
    """The Ed25519 key pair's label in the token (a new label per key: rotation)."""
    audit_signing_pkcs11_pin: SecretStr | None = None
    """The token's user PIN."""
    audit_checkpoint_dir: Path | None = None
    """A directory outside the database where each signed audit checkpoint is also appended (one
    `WORKSPACE.jsonl` file per workspace, never rewritten); `sursis audit verify` and
    `/v1/audit/verify` check each chain against its newest line (docs/audit.md)."""
    decision_seal_pkcs11_key: str | None = None
    """The label of an HMAC secret key in the token `SURSIS_AUDIT_SIGNING_PKCS11_*` names: set,
    decisions are sealed inside the token instead of with a key derived from the keyring
    (docs/operations.md)."""
    audit_checkpoint_s3_bucket: str | None = None
    """An S3-compatible bucket with object lock where each signed audit checkpoint is also written
    (one object each, retained in COMPLIANCE mode): the external log off the host, instead of
    `SURSIS_AUDIT_CHECKPOINT_DIR` (docs/audit.md). Credentials: the usual AWS settings."""
    audit_checkpoint_s3_prefix: str = ""
    """A folder in the bucket (one per database)."""
    audit_checkpoint_s3_endpoint_url: str | None = None
    """The endpoint of an S3-compatible server other than AWS (MinIO, Ceph, …)."""
    audit_checkpoint_s3_retention_days: int = Field(default=365, ge=1, le=36500)
    """How long each checkpoint object is locked against deletion."""
    model: str = "scripted"
    agents: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """The agents to serve (`SURSIS_AGENTS`, comma-separated): built-in names, `package.module:NAME`
    or entry-point names (see docs/agents.md); empty: the built-in agents and installed ones."""
    openai_base_url: str | None = Field(
        default=None, validation_alias=AliasChoices("SURSIS_OPENAI_BASE_URL", "OPENAI_BASE_URL")
    )
    openai_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("SURSIS_OPENAI_API_KEY", "OPENAI_API_KEY")
    )
    host: str = "127.0.0.1"
    port: int = 8000
    run_worker: bool = True
    worker_concurrency: int | None = Field(default=None, ge=1)
    """Segments one worker process runs at once (`worker_slots`): by default 10 on PostgreSQL, 4
    on SQLite (docs/durability.md, "How many segments a worker runs at once")."""
    worker_poll_seconds: float = 1.0
    idle_poll_seconds: float = Field(default=30.0, gt=0)
    """The background loops' safety poll while the process hears the others over LISTEN
    (PostgreSQL): they wake on notifications and on what falls due, not on their own polls."""
    lease_seconds: float = 30.0
    step_limit: int = 25
    approval_timeout_seconds: float = 24 * 3600
    elicitation_timeout_seconds: float = 3600
    client_exec_timeout_seconds: float = 30
    sweep_seconds: float = 5.0
    audit_seal_seconds: float = Field(default=5.0, gt=0)
    """How often each worker seals new audit rows into their workspace's hash chain."""
    retention_sweep_seconds: float = Field(default=300.0, gt=0)
    """How often each worker purges one batch per workspace whose retention policy is due."""
    retention_batch: int = Field(default=50, ge=1)
    """Conversations purged per transaction (audit rows: 1,000 per transaction)."""
    shutdown_grace_seconds: float = 10.0
    db_pool_size: int = Field(default=10, ge=1)
    """Connections a process keeps open to the database."""
    db_pool_overflow: int = Field(default=10, ge=0)
    """Connections a process opens beyond `db_pool_size` under a burst (closed when returned)."""
    db_pool_timeout_seconds: float = Field(default=5.0, gt=0)
    """How long a request waits for a free connection before it is answered 503 with `Retry-After`."""
    max_segment_attempts: int = Field(default=5, ge=1)
    """Consecutive claims of a run without progress before it fails (`segment_attempts_exhausted`)."""
    max_wait_seconds: float = 60.0
    history_cache_messages: int = Field(default=2_000, ge=0)
    """Decoded messages a worker keeps in memory so a segment reads only the log's new rows; 0: off."""
    history_turns: int = Field(default=20, ge=0)
    """Earlier turns of the conversation the model is shown with the current one; 0: all of them."""
    max_content_chars: int = 32_000
    max_body_bytes: int = 1_048_576
    rate_limit_per_minute: int = Field(default=600, ge=0)
    """Requests per minute per API key on /v1 (except `POST /v1/events`); 0 turns the limit off."""
    events_rate_limit_per_minute: int = Field(default=6_000, ge=0)
    """Platform events (`POST /v1/events`) per minute per API key, counted apart from the other
    requests: a platform posts in bursts; 0 turns the limit off."""
    credential_cache_seconds: float = Field(default=5.0, ge=0)
    """How long the API keeps a verified key's principal in memory instead of looking the key up
    again; revocations reach it at once all the same (docs/security.md); 0 turns the cache off."""
    policy_cache_seconds: float = Field(default=5.0, ge=0)
    """How long a worker keeps a workspace's pre-approvals of a tool in memory instead of reading
    them again for each gated call; creating or revoking one reaches every worker at once all the
    same (docs/security.md); 0 turns the cache off."""
    reviewer_calls_per_minute: int = Field(default=30, ge=0)
    """A workspace's reviewer models may be asked this many times a minute (docs/reviewer.md); over
    it, calls are left to people and say so."""
    reviewer_tokens_per_day: int = Field(default=200_000, ge=0)
    """Tokens a workspace's reviewer models may use per day (UTC)."""
    reviewer_budgets: dict[str, WorkspaceReviewerBudget] = Field(default_factory=dict)
    """Per-workspace budgets overriding the two above, as JSON:
    `{"acme": {"calls_per_minute": 10, "tokens_per_day": 50000}}`; checked at start (a negative
    value or a misspelled key is refused, naming it)."""
    reviewer_poll_seconds: float = Field(default=1.0, gt=0)
    """How often the worker looks for calls waiting for their reviewer."""
    migrate_on_start: bool = True
    admin_key_file: str | None = None
    """Where `serve` writes the first admin key (mode 0600) when stdout is not a terminal."""
    api_url: str | None = None
    """The API the command-line client (`sursis pending`, `wait-ready`) talks to; default http://host:port."""
    api_key: SecretStr | None = None
    """The key the command-line client sends (`sursis pending`)."""
    log_level: str = "INFO"
    log_json: bool | None = None
    trace_console: bool = False
    """Print every finished span to stdout (`SURSIS_TRACE_CONSOLE=1`)."""
    trace_content: bool = False
    """Put prompts, answers and tool arguments/results on pydantic-ai's spans (off: they may hold secrets)."""
    otlp_endpoint: str | None = Field(
        default=None, validation_alias=AliasChoices("OTEL_EXPORTER_OTLP_ENDPOINT")
    )
    otlp_traces_endpoint: str | None = Field(
        default=None, validation_alias=AliasChoices("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )
    otlp_metrics_endpoint: str | None = Field(
        default=None, validation_alias=AliasChoices("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
    )
    # Event stream (GET /v1/conversations/{id}/events)
    events_poll_seconds: float = Field(default=0.5, gt=0)
    events_heartbeat_seconds: float = Field(default=15.0, gt=0)
    events_delta_interval_seconds: float = Field(default=0.1, ge=0)
    client_exec_max_seconds: float = Field(default=600, gt=0)
    events_settle_seconds: float = Field(default=10.0, ge=0)
    """How long the workspace stream of pending calls keeps looking for events that committed late."""
    # Webhooks
    webhook_max_attempts: int = Field(default=6, ge=1)
    webhook_backoff_seconds: float = Field(default=2.0, ge=0)
    webhook_backoff_max_seconds: float = Field(default=300.0, ge=0)
    webhook_timeout_seconds: float = Field(default=10.0, gt=0)
    webhook_poll_seconds: float = Field(default=1.0, gt=0)
    webhook_allow_private_hosts: bool = False
    public_url: str | None = None
    # Channels: Slack (docs/channels.md)
    slack_signing_secret: SecretStr | None = None
    """The Slack app's signing secret; without it the Slack routes refuse every request (401)."""
    slack_bot_token: SecretStr | None = None
    """The bot token (`xoxb-…`) replies, approvals and notices are posted with."""
    slack_api_url: str = "https://slack.com/api/"
    """The Slack Web API base URL (tests point it at a local server)."""
    slack_agent: str = "assistant"
    """The agent of conversations started from a new Slack thread."""
    slack_workspace: str = "default"
    """The workspace of notices to Slack users who are not mapped to a key."""
    channel_poll_seconds: float = Field(default=1.0, gt=0)
    """How often the Slack deliverer and the digest sender look for work."""
    # Channels: email digests
    digest_window_seconds: float = Field(default=3600.0, gt=0)
    """One digest per email binding per window at most; windows start at multiples of this."""
    smtp_host: str | None = None
    """Without a host no digest is sent (they wait, gathered, until one is set)."""
    smtp_port: int = Field(default=587, ge=1, le=65535)
    smtp_starttls: bool = True
    smtp_username: str | None = None
    smtp_password: SecretStr | None = None
    smtp_from: str = "sursis@localhost"
    smtp_timeout_seconds: float = Field(default=30.0, gt=0)
    # People: sign-in with OpenID Connect (docs/sign-in.md); off unless an issuer is set.
    oidc_issuer: str | None = None
    """The provider's issuer URL (its `/.well-known/openid-configuration` is read at the first sign-in)."""
    oidc_client_id: str | None = None
    oidc_client_secret: SecretStr | None = None
    oidc_redirect_url: str | None = None
    """Where the provider sends the browser back: `<public URL>/auth/oidc/callback`, as registered."""
    oidc_scopes: str = "openid email groups"
    oidc_session_seconds: float = Field(default=8 * 3600, gt=0)
    """How long a signed-in person's session lasts, whatever the provider says meanwhile."""
    oidc_refresh_seconds: float = Field(default=300, gt=0)
    """How often a session's groups are read again from the provider (refresh token): a person
    removed from every mapped group is refused at the first request after that."""
    oidc_groups: dict[str, dict[str, str]] = Field(default_factory=dict)
    """Provider group → `{"role": ..., "workspace": ...}` (JSON); a person in none of them may not
    sign in, one in several gets the highest role (docs/sign-in.md)."""

    @property
    def worker_slots(self) -> int:
        """`worker_concurrency`, or its default for the database: a segment mostly waits for its
        model, so a PostgreSQL worker runs 10 at once; SQLite takes one writer at a time, so 4."""
        from sursis.infra.db.engine import is_sqlite

        if self.worker_concurrency is not None:
            return self.worker_concurrency
        return 4 if is_sqlite(self.database_url) else 10

    # Each context's slice, built at each read from the fields above (`SliceOf`).
    storage: ClassVar[SliceOf[StorageSettings]] = SliceOf(StorageSettings)
    telemetry: ClassVar[SliceOf[TelemetrySettings]] = SliceOf(TelemetrySettings)
    worlds: ClassVar[SliceOf[WorldSettings]] = SliceOf(WorldSettings)
    agents_served: ClassVar[SliceOf[AgentSettings]] = SliceOf(AgentSettings)
    policy: ClassVar[SliceOf[PolicySettings]] = SliceOf(PolicySettings)
    deliveries: ClassVar[SliceOf[DeliverySettings]] = SliceOf(DeliverySettings)
    runtime: ClassVar[SliceOf[RuntimeSettings]] = SliceOf(RuntimeSettings)
    conversations: ClassVar[SliceOf[ConversationSettings]] = SliceOf(ConversationSettings)
    channels: ClassVar[SliceOf[ChannelSettings]] = SliceOf(ChannelSettings)

    @field_validator("oidc_groups")
    @classmethod
    def _check_oidc_groups(cls, value: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
        """Each rule names a role a person may have: refused at start, not at the first sign-in."""
        if not value:  # nothing to check: the identity context is not loaded for it
            return value
        from sursis.domain.identity.people import rules_from_setting

        rules_from_setting(value)
        return value

    @field_validator("agents", mode="before")
    @classmethod
    def _split_agents(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [name.strip() for name in value.split(",") if name.strip()]
        return value
