"""protocols/mcp."""
