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
    Conversation,
    ConversationDetail,
    Event,
    Message,
    PendingCall,
    PendingPage,
    Resolved,
    Run,
    Usage,
)

__all__ = [
    "ArgsChangedError",
    "AsyncClient",
    "AuthenticationError",
    "ConflictError",
    "Conversation",
    "ConversationDetail",
    "Event",
    "ForbiddenError",
    "InvalidRequestError",
    "Message",
    "NotFoundError",
    "PendingCall",
    "PendingPage",
    "RateLimitedError",
    "Resolved",
    "Run",
    "RunActiveError",
    "StaleError",
    "SursisError",
    "UnavailableError",
    "Usage",
]
