"""An MCP server written for the `mcp` 1.x SDK (`mcp.server.fastmcp`), as servers on PyPI are: run
by the python of its own environment, beside the service's `mcp` 2.x. Notes are appended to the
file named by `NOTES_FILE`."""

from __future__ import annotations

import importlib.metadata
import os

from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations

notes = FastMCP("notes")


@notes.tool(annotations=ToolAnnotations(readOnlyHint=True))
def sdk_version() -> str:
    """The version of the MCP SDK this server runs on."""
    return importlib.metadata.version("mcp")


@notes.tool(annotations=ToolAnnotations(destructiveHint=True))
def write_note(text: str) -> str:
    """Append a note."""
    with open(os.environ["NOTES_FILE"], "a", encoding="utf-8") as file:
        file.write(text + "\n")
    return f"noted {text!r}"


if __name__ == "__main__":
    notes.run("stdio")
