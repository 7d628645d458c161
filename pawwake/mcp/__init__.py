"""MCP server: Pawwake's memory as tools for MCP clients (Claude Code, Cursor, Cherry Studio...).

``protocol`` speaks JSON-RPC and the lifecycle, ``tools`` maps tool calls onto the memory and
recall services, ``routes.mcp`` carries it all over the Streamable HTTP transport.
"""
