"""A typed Python client of the Abeyance HTTP API (httpx).

async with AsyncClient("http://127.0.0.1:8000", api_key) as client:
    conversation = await client.create_conversation("ops")
    run = await client.send(conversation.id, "hello", wait=10)
"""

from abeyance.client.async_client import AsyncClient
from abeyance.client.errors import (
    AbeyanceError,
    ArgsChangedError,
    AuthenticationError,
    ConflictError,
    ForbiddenError,
    InvalidRequestError,
    NotFoundError,
    RateLimitedError,
    RunActiveError,
    StaleError,
    UnavailableError,
)
from abeyance.client.models import (
    Conversation,
    ConversationDetail,
    Event,
    Message,
    PendingCall,
    PendingPage,
    Run,
    Usage,
)

__all__ = [
    "AbeyanceError",
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
    "Run",
    "RunActiveError",
    "StaleError",
    "UnavailableError",
    "Usage",
]
