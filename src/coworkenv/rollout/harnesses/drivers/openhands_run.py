"""Run one turn of an OpenHands SDK conversation (the SDK is unmodified; this only wires it up).

Usage: ``python openhands_run.py CONFIG MESSAGE [CONVERSATION_ID]``. ``CONFIG`` is a JSON file:
``base_url``, ``api_key``, ``model``, ``workspace``, ``persistence_dir``, ``mcp_url``,
``max_iterations``. The agent is the SDK's default CLI agent (``get_default_agent(llm,
cli_mode=True)``: terminal, file editor, task tracker, finish, think) with native tool calling and
the task's MCP server (streamable HTTP) added to its ``mcp_config``; the conversation persists in
``persistence_dir``, so passing the id printed by an earlier turn continues that conversation
with ``MESSAGE`` as the user's next message. Prints one JSON line last:
``{"conversation_id", "status", "final"}`` (``final`` is the SDK's ``get_agent_final_response``).
"""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

from openhands.sdk import LLM, Conversation
from openhands.sdk.conversation.response_utils import get_agent_final_response
from openhands.sdk.mcp.config import MCPServer
from openhands.tools.preset.default import get_default_agent


def main(argv: list[str]) -> int:
    config = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    message = argv[1]
    conversation_id = uuid.UUID(argv[2]) if len(argv) > 2 else None
    llm = LLM(
        model=config["model"],
        base_url=config["base_url"],
        api_key=config["api_key"],
        native_tool_calling=True,
        usage_id="agent",
    )
    agent = get_default_agent(llm, cli_mode=True)
    server = MCPServer(url=config["mcp_url"], transport="streamable-http")
    agent = agent.model_copy(update={"mcp_config": {"cowork": server}})
    conversation = Conversation(
        agent=agent,
        workspace=config["workspace"],
        persistence_dir=config["persistence_dir"],
        conversation_id=conversation_id,
        max_iteration_per_run=int(config["max_iterations"]),
        visualizer=None,
    )
    conversation.send_message(message)
    conversation.run()
    final = get_agent_final_response(conversation.state.events)
    status = str(conversation.state.execution_status.value)
    print(json.dumps({"conversation_id": str(conversation.id), "status": status, "final": final}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
