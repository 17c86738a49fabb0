"""JSON in and out, and text made valid Unicode: the one way Bob's layers read and write JSON
(session files, model streams, MCP, tool arguments) and clean text for a frame or a file.

The implementation is the transport's domain-free codec (bob_acp.jsonrpc.codec: the transport
may import nothing of Bob, so it cannot live here); the rest of Bob imports it from this leaf,
never from the transport.
"""

from bob_acp.jsonrpc.codec import (  # noqa: F401  (re-exported)
    OPT_INDENT_2,
    JSONDecodeError,
    clean,
    clean_tree,
    dumps,
    loads,
    use_orjson,
)
