"""``awaken-stdio serve``: ACP and MCP over the network (Streamable HTTP), on the same servers as the stdio modes."""
