"""`bob-acp --check`: what Bob would be with this configuration, on this machine. The version and
the profile, the effective config, what `initialize` would advertise, the sandbox as this kernel
gives it, whether what Bob starts ends with it here, the skills found, and whether each model
answers. As text, or as one JSON object (`--json`). Exit status 0 when everything configured can
be had and every model answered; 1 otherwise."""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from bob_acp.config import Config, ModelSettings
    from bob_acp.providers.base import Provider


CHECK_TIMEOUT = 60.0


def gather(cfg: Config) -> dict[str, Any]:
    """The whole report, as data."""
    from bob_acp import __version__, providers, sandbox
    from bob_acp.acp.server import agent_capabilities
    from bob_acp.config import keys
    from bob_acp.context import skills
    from bob_acp.files.workspace import Workspace
    from bob_acp.processes import children

    env = dict(os.environ)
    catalog = skills.discover(os.getcwd(), cfg)
    report: dict[str, Any] = {
        "version": __version__, "profile": cfg.profile, "configFile": cfg.source, "config": cfg.as_dict(),
        "agentCapabilities": agent_capabilities(cfg),
        "skills": [{"name": s.name, "description": s.description, "folder": s.folder} for s in catalog.skills.values()],
        "skillWarnings": catalog.warnings, "sandbox": sandbox.describe(cfg), "problems": [],
    }
    state = sandbox.status(cfg)
    if state is not None:
        report["sandbox"]["line"] = state[0]
        covered = sandbox.coverage(cfg)
        stopped = sandbox.trial(cfg, Workspace(os.getcwd())) if covered.confines else None
        if stopped is not None:  # (what the kernel offers is not what a command gets here)
            report["sandbox"].update(complete=False, missing=[*report["sandbox"]["missing"], stopped])
            report["sandbox"]["line"] = f"sandbox: {cfg.tools.sandbox} does not work here: {stopped}"
            report["problems"].append(f"the sandbox (tools.sandbox: {cfg.tools.sandbox}) does not work here: {stopped}")
        elif not covered.confines:
            report["problems"].append(f"the sandbox (tools.sandbox: {cfg.tools.sandbox}) cannot be had here: "
                                      f"{'; '.join(covered.missing)}")
        elif cfg.tools.sandbox == "workspace" and not covered.complete:
            report["problems"].append(f"the sandbox (tools.sandbox: {cfg.tools.sandbox}) is incomplete here: "
                                      f"{'; '.join(covered.missing)}")
    from bob_acp.rules.store import Store

    kept = Store(env).load(os.getcwd())
    report["rules"] = {"enabled": cfg.permissions.projectRules, "project": kept.project, "count": len(kept.rules),
                       "applied": len(kept.usable()) if cfg.permissions.projectRules else 0, "problem": kept.doubt or None}
    guard = children.orphan_guard()
    report["processes"] = {"endWithBob": guard is None, "why": guard}
    report["models"] = []
    several = len(cfg.entries) > 1
    for settings in cfg.entries:  # every model the picker offers, the default first
        label = f"model {settings.id}" if several else "model"
        model: dict[str, Any] = {"id": settings.id, "provider": settings.provider, "name": settings.name}
        key_env = keys.key_env(settings)
        if key_env:
            model["keyVariable"] = key_env
            model["keySet"] = bool(env.get(key_env))
            model["keyFile"] = settings.apiKeyFile
        provider = providers.provider_for(settings, env)  # (ConfigError for an unusable key file: exit 2)
        if provider is None:
            model.update(answers=False, line=f"{label}: not configured")
            if settings is cfg.entries[0]:
                model["howTo"] = providers.no_model_message(cfg, env)
            report["problems"].append(f"{label} is not configured")
        else:
            answered, line = probe(settings, provider, label)
            model.update(answers=answered, line=line)
            if not answered:
                report["problems"].append(f"{label} does not answer")
        report["models"].append(model)
    return report


def run_check(cfg: Config, out: TextIO | None = None, as_json: bool = False) -> int:
    """Print the report (to stdout: --check is not an ACP session); 0 when nothing is wrong."""
    out = out or sys.stdout
    report = gather(cfg)
    if as_json:
        import json

        out.write(json.dumps(report, ensure_ascii=False, indent=2) + "\n")
        return 0 if not report["problems"] else 1
    import yaml

    out.write(f"bob-acp {report['version']}, profile {report['profile']}\n")
    out.write(f"config file: {cfg.source or 'none (built-in defaults)'}\n")
    out.write(yaml.safe_dump(report["config"], sort_keys=False, allow_unicode=True))
    out.write("advertised at initialize: " + _one_line(report["agentCapabilities"]) + "\n")
    out.write(f"skills ({len(report['skills'])}):\n")
    for skill in report["skills"]:
        out.write(f"  {skill['name']}: {skill['description']}  [{skill['folder']}]\n")
    for warning in report["skillWarnings"]:
        out.write(f"  warning: {warning}\n")
    if "line" in report["sandbox"]:
        out.write(report["sandbox"]["line"] + "\n")
    rules = report["rules"]
    state = "" if rules["enabled"] else " (not applied: permissions.projectRules is off)"
    out.write(f"project rules for {rules['project']}: {rules['count']} kept, {rules['applied']} applied{state} "
              "(bob-acp rules lists them)\n")
    if rules["problem"]:
        out.write(f"  warning: {rules['problem']}\n")
    if not report["processes"]["endWithBob"]:
        out.write(f"processes: a process that leaves its group may outlive Bob here: {report['processes']['why']}\n")
    several = len(report["models"]) > 1
    for model in report["models"]:
        if "keyVariable" in model:
            where = "set" if model["keySet"] else (f"not set; apiKeyFile {model['keyFile']}" if model["keyFile"]
                                                   else "not set")
            whose = f" of {model['id']}" if several else ""
            out.write(f"API key{whose}: ${model['keyVariable']} is {where}\n")
        out.write(model["line"] + "\n")
        if "howTo" in model:
            out.write(model["howTo"] + "\n")
    return 0 if not report["problems"] else 1


def _one_line(value: object) -> str:
    import json

    return json.dumps(value, separators=(", ", ": "))


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
