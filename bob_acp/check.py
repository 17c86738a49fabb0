"""`bob-acp --check`: the effective config, the skills found, and whether the model answers."""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from bob_acp.config import Config, ModelSettings
    from bob_acp.providers.base import Provider


CHECK_TIMEOUT = 60.0


def run_check(cfg: Config, out: TextIO | None = None) -> int:
    """Print the report (to stdout: --check is not an ACP session). 0 when the model answers."""
    import yaml

    from bob_acp import providers, skills

    out = out or sys.stdout
    env = dict(os.environ)
    out.write(f"config file: {cfg.source or 'none (built-in defaults)'}\n")
    out.write(yaml.safe_dump(cfg.as_dict(), sort_keys=False, allow_unicode=True))
    catalog = skills.discover(os.getcwd(), cfg)
    out.write(f"skills ({len(catalog.skills)}):\n")
    for skill in catalog.skills.values():
        out.write(f"  {skill.name}: {skill.description}  [{skill.folder}]\n")
    for warning in catalog.warnings:
        out.write(f"  warning: {warning}\n")
    from bob_acp import sandbox

    state = sandbox.status(cfg)
    if state is not None:
        out.write(state[0] + "\n")
    several = len(cfg.entries) > 1
    failed = 0
    for settings in cfg.entries:  # every model the picker offers, the default first
        label = f"model {settings.id}" if several else "model"
        key_env = providers.key_env(settings)
        if key_env:
            where = "set" if env.get(key_env) else (f"not set; apiKeyFile {settings.apiKeyFile}"
                                                    if settings.apiKeyFile else "not set")
            out.write(f"API key{f' of {settings.id}' if several else ''}: ${key_env} is {where}\n")
        provider = providers.provider_for(settings, env)  # (ConfigError for an unusable key file: exit 2)
        if provider is None:
            out.write(f"{label}: not configured\n")
            if settings is cfg.entries[0]:
                out.write(providers.no_model_message(cfg, env) + "\n")
            failed += 1
            continue
        answered, line = probe(settings, provider, label)
        out.write(line + "\n")
        failed += not answered
    return 0 if not failed else 1


def probe(settings: ModelSettings, provider: Provider, label: str = "model") -> tuple[bool, str]:
    """Whether the model answers a one-word question within CHECK_TIMEOUT, and a line saying so."""
    from bob_acp.cancel import Cancel
    from bob_acp.exceptions import Cancelled, ModelError
    from bob_acp.providers.base import Quiet

    cancel = Cancel()
    timer = threading.Timer(CHECK_TIMEOUT, cancel.set)
    timer.daemon = True
    timer.start()
    started = time.monotonic()
    messages = [{"role": "system", "content": "You are a health check."},
                {"role": "user", "content": "Reply with the single word: ok"}]
    try:
        reply = provider.generate(messages, [], Quiet(), cancel)
    except (ModelError, Cancelled) as exc:
        reason = str(exc) or f"no answer within {CHECK_TIMEOUT:g} s"
        return False, f"{label}: {settings.provider}/{settings.name} does not answer: {reason}"
    finally:
        timer.cancel()
    text = " ".join(reply.text.split())[:80]
    return True, f"{label}: {settings.provider}/{settings.name} answers in {time.monotonic() - started:.1f}s: {text!r}"
