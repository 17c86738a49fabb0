"""The tools the model calls: each in a module of its own, and `builtin` for the set Bob offers.

Nothing is imported here: importing one tool's module (or `base`, for the types a turn shares)
must not load every tool and the sandbox with it. Answering `initialize` waits for no tool."""
