"""The customer context: a workspace's scans, evaluation framework and onboarding, the platform
events that bring them, and the conversations those events start."""

from sursis.domain.customer import (
    intake,
)

__all__ = [
    "intake",
]
