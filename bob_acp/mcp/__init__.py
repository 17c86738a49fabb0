"""Client MCP servers (with mcp.enabled): the editor's tools offered to the model, behind the
permission gate. Stdio servers go through Bob's own domain-free JSON-RPC endpoint."""

from bob_acp.mcp.connection import close_all  # noqa: F401
from bob_acp.mcp.servers import McpSet, McpTool, SessionTools, start_servers  # noqa: F401
