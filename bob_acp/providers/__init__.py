"""Model providers behind one interface (base.Provider), chosen by config.

Provider modules are imported only when chosen, so start-up never pays for `requests`.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing is not imported at start-up
    from typing import Any

    from bob_acp.providers.base import Provider

DEFAULT_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


def api_key_env(cfg: Any) -> str | None:
    """The environment variable that holds the API key for the chosen provider (None for script)."""
    if cfg.model.provider == "script":
        return None
    return cfg.model.apiKeyEnv or DEFAULT_KEY_ENV[cfg.model.provider]


def api_key(cfg: Any, env: dict[str, str]) -> str | None:
    """The key, stripped: a CRLF .env leaves "sk-…\r", which no header may carry."""
    name = api_key_env(cfg)
    return (env.get(name, "").strip() or None) if name else None


def make_provider(cfg: Any, env: dict[str, str], secrets: tuple[str, ...] = ()) -> Provider | None:
    """The configured provider, or None when no model is usable (prompts are then refused).

    A key is required only for a provider's official endpoint: local servers (Ollama,
    llama.cpp, vLLM) reached through model.baseUrl usually need none.
    """
    kind = cfg.model.provider
    if kind == "script":
        if not cfg.model.script:
            return None
        from bob_acp.providers.script import ScriptProvider

        return ScriptProvider(cfg)
    key = api_key(cfg, env)
    if key is None and not cfg.model.baseUrl:
        return None
    if kind == "openai":
        from bob_acp.providers.openai import OpenAIProvider

        return OpenAIProvider(cfg, key, secrets)
    from bob_acp.providers.anthropic import AnthropicProvider

    return AnthropicProvider(cfg, key, secrets)


def no_model_message(cfg: Any, env: dict[str, str]) -> str:
    """What a prompt answers when no model is configured: exactly how to configure one."""
    where = cfg.source or "~/.config/bob/config.yaml"
    if cfg.model.provider == "script":
        first = f"No model is configured: provider `script` needs `model.script` (the path of a script file) in {where}."
    else:
        first = (f"No model is configured: provider `{cfg.model.provider}` needs an API key in the environment "
                 f"variable `{api_key_env(cfg)}` (or `model.baseUrl` for a local server such as Ollama).")
    return (
        f"{first}\n\n"
        "To configure one, either:\n"
        "- set `OPENAI_API_KEY` (OpenAI) or `ANTHROPIC_API_KEY` with `BOB_PROVIDER=anthropic` in the "
        "environment the editor starts Bob with; `BOB_MODEL` picks the model;\n"
        "- or point Bob at a local OpenAI-compatible server: `BOB_BASE_URL=http://127.0.0.1:11434/v1` "
        "and `BOB_MODEL=llama3.1` (Ollama; no key needed);\n"
        f"- or write `model:` settings (provider, name, baseUrl, apiKeyEnv) in {where}.\n"
        "Then start a new session. `bob-acp --check` tells whether the model answers."
    )
