"""A domain-free JSON-RPC 2.0 endpoint over newline-delimited streams. Knows nothing of ACP."""
