"""The LangGraph side's graph: a model node and a `ToolNode` whose tool calls `interrupt()`, with a
zero-latency model. Shared by `turn_langgraph.py` (in process, `AsyncPostgresSaver`) and LangGraph's
Agent Server (`peers_http.py` serves `graph`, checkpointed by the server's runtime), so this module
imports only LangGraph itself.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import interrupt


@tool
def replay_dlq_event(event_id: str, reason: str) -> dict[str, Any]:
    """Put a dead-lettered event back on the outbox for delivery."""
    decision = interrupt({"tool": "replay_dlq_event", "event_id": event_id, "reason": reason})
    if decision != "approve":
        return {"replayed": False, "event_id": event_id}
    return {"replayed": True, "event_id": event_id, "reason": reason}


def scripted_model(state: MessagesState) -> dict[str, list[AnyMessage]]:
    """A zero-latency model: proposes the gated replay for a user message, answers after the tool."""
    last = state["messages"][-1]
    if isinstance(last, ToolMessage):
        return {"messages": [AIMessage(content="replayed")]}
    turn = sum(isinstance(m, HumanMessage) for m in state["messages"])
    call = {
        "name": "replay_dlq_event",
        "args": {"event_id": "evt_1001", "reason": "bench"},
        "id": f"call_{turn}",
        "type": "tool_call",
    }
    return {"messages": [AIMessage(content="", tool_calls=[call])]}


def build_graph(saver: Any) -> Any:
    graph = StateGraph(MessagesState)
    graph.add_node("model", scripted_model)
    graph.add_node("tools", ToolNode([replay_dlq_event]))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    graph.add_edge("model", END)
    return graph.compile(checkpointer=saver)


graph = build_graph(None)
"""What the Agent Server serves (`langgraph.json`); the server brings its own checkpointer."""
