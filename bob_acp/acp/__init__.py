"""ACP vocabulary and the agent-side server. Knows nothing of models or tools' internals."""
