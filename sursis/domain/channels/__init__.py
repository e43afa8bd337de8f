"""The channels context: where a conversation is also spoken (Slack, email), beside the conversation
and never inside it: channel settings, fan-out of notices, Slack's inbound side, escalation notices."""

from sursis.domain.channels import (
    admin,
    escalation,
    fanout,
    slack,
)

__all__ = [
    "admin",
    "escalation",
    "fanout",
    "slack",
]
