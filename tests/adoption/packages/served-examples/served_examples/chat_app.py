"""`pydantic_ai_examples.chat_app`: the chat agent of the example's FastAPI app (its module imported
whole: logfire set up, the app built, nothing served), over Sursis's conversations instead. The agent
has no tool: the team serving it adds one that reads its own FAQ, gated."""

from __future__ import annotations

from pydantic_ai_examples import chat_app as example

from sursis import ToolOptions, adopt

FAQ = {"opening hours": "We are open 9 to 5, Monday to Friday."}


@example.agent.tool_plain
def read_faq(topic: str) -> str:
    """The team's FAQ entry on a topic."""
    return FAQ.get(topic.lower(), "No entry.")


AGENT = adopt(
    example.agent,
    name="chat-app",
    model="scripted",
    tools={
        "read_faq": ToolOptions(
            approval="requires_approval", idempotent=True, effect="Read the FAQ on {topic}"
        )
    },
)
