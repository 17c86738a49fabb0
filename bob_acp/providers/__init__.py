"""Model providers behind one interface (base.Provider), chosen by config.

Provider modules are imported only when chosen, so start-up never pays for `requests`.
"""

from __future__ import annotations

from bob_acp.config.keys import api_key_env, key_env, key_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    from bob_acp.config import Config, ModelSettings
    from bob_acp.log import Logger
    from bob_acp.providers.base import Provider
    from bob_acp.providers.models import ModelSet


def make_provider(cfg: Config, env: dict[str, str], secrets: tuple[str, ...] = (),
                  key: str | None = None) -> Provider | None:
    """The default model's provider, or None when it is not usable (prompts are then refused)."""
    return provider_for(cfg.model, env, secrets, key)


def provider_for(settings: ModelSettings, env: dict[str, str], secrets: tuple[str, ...] = (),
                 key: str | None = None) -> Provider | None:
    """One model's provider, or None when it is not usable.

    A key is required only for a provider's official endpoint: local servers (Ollama,
    llama.cpp, vLLM) reached through baseUrl usually need none.
    """
    kind = settings.provider
    if kind == "script":
        if not settings.script:
            return None
        from bob_acp.providers.script import ScriptProvider

        return ScriptProvider(settings)
    key = key if key is not None else key_of(settings, env)
    if key is None and not settings.baseUrl:
        return None
    if kind == "openai":
        from bob_acp.providers.openai import OpenAIProvider

        return OpenAIProvider(settings, key, secrets, env)
    if kind == "openai-responses":
        from bob_acp.providers.responses import ResponsesProvider

        return ResponsesProvider(settings, key, secrets, env)
    from bob_acp.providers.anthropic import AnthropicProvider

    return AnthropicProvider(settings, key, secrets, env)


def make_models(cfg: Config, env: dict[str, str], secrets: tuple[str, ...] = (), default: Provider | None = None,
                log: Logger | None = None) -> ModelSet:
    """Every configured model with its provider; `default`: the first one's, already made. An
    entry that cannot be used (no key, an unreadable key file) is kept, with why."""
    from bob_acp.exceptions import ConfigError
    from bob_acp.providers.models import Entry, ModelSet

    entries = [Entry(cfg.entries[0].id, cfg.entries[0], default,
                     "" if default is not None else "no key or endpoint is configured")]
    for settings in cfg.entries[1:]:
        try:
            provider = provider_for(settings, env, secrets)
            problem = "" if provider is not None else (
                f"it needs an API key in ${key_env(settings)}" if key_env(settings) else "it needs model.script")
        except ConfigError as exc:
            provider, problem = None, str(exc)
        entries.append(Entry(settings.id, settings, provider, problem))
    return ModelSet(entries, log)


def config_problem_message(problem: str) -> str:
    """What a prompt answers when the config could not be used: the line, and the fix."""
    return (f"Bob could not use its configuration: {problem}\n\n"
            "Fix the file (`bob-acp --check` in a terminal shows the same line), or run `bob-acp setup` to write "
            "a working one; then start a new session.")


def no_model_message(cfg: Config, env: dict[str, str]) -> str:
    """What a prompt answers when no model is configured: exactly how to configure one."""
    from bob_acp.config.launch import setup_words

    where = cfg.source or "~/.config/bob/config.yaml"
    if cfg.model.provider == "script":
        first = f"No model is configured: provider `script` needs `model.script` (the path of a script file) in {where}."
    else:
        first = (f"No model is configured: provider `{cfg.model.provider}` needs an API key in the environment "
                 f"variable `{api_key_env(cfg)}` (or `model.baseUrl` for a local server such as Ollama).")
    return (
        f"{first}\n\n"
        "To configure one, either:\n"
        f"- run `{setup_words()}` in a terminal (or your editor's sign-in): it asks for the provider, the model and "
        "the key, checks "
        "that the model answers and writes the config (the key in a file only you can read);\n"
        "- set `OPENAI_API_KEY` (OpenAI) or `ANTHROPIC_API_KEY` with `BOB_PROVIDER=anthropic` in the "
        "environment the editor starts Bob with; `BOB_MODEL` picks the model;\n"
        "- or point Bob at a local OpenAI-compatible server: `BOB_BASE_URL=http://127.0.0.1:11434/v1` "
        "and `BOB_MODEL=llama3.1` (Ollama; no key needed);\n"
        f"- or write `model:` settings (provider, name, baseUrl, apiKeyEnv) in {where}.\n"
        "Then start a new session. `bob-acp --check` tells whether the model answers."
    )
