"""A typed Python client of the Sursis HTTP API (httpx).

async with AsyncClient("http://127.0.0.1:8000", api_key) as client:
    conversation = await client.create_conversation("ops")
    run = await client.send(conversation.id, "hello", wait=10)
"""

from sursis.client.async_client import AsyncClient
from sursis.client.errors import (
    ArgsChangedError,
    AuthenticationError,
    ConflictError,
    ForbiddenError,
    InvalidRequestError,
    NotFoundError,
    RateLimitedError,
    RunActiveError,
    StaleError,
    SursisError,
    UnavailableError,
)
from sursis.client.models import (
    ApproverGroup,
    Conversation,
    ConversationDetail,
    Delegation,
    Event,
    Fork,
    Forked,
    ForkedFrom,
    Message,
    PendingCall,
    PendingPage,
    ProvisioningRule,
    Resolved,
    Review,
    Run,
    Usage,
    Vote,
)

__all__ = [
    "ApproverGroup",
    "ArgsChangedError",
    "AsyncClient",
    "AuthenticationError",
    "ConflictError",
    "Conversation",
    "ConversationDetail",
    "Delegation",
    "Event",
    "ForbiddenError",
    "Fork",
    "Forked",
    "ForkedFrom",
    "InvalidRequestError",
    "Message",
    "NotFoundError",
    "PendingCall",
    "PendingPage",
    "ProvisioningRule",
    "RateLimitedError",
    "Resolved",
    "Review",
    "Run",
    "RunActiveError",
    "StaleError",
    "SursisError",
    "UnavailableError",
    "Usage",
    "Vote",
]
