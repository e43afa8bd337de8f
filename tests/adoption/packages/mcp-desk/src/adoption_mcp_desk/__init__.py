"""A support desk agent whose tools are those of the desk's MCP server."""
