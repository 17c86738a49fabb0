"""Config: defaults, lookup order, validation naming the key and the file, env overrides."""

import os

import pytest

from bob_acp import config
from bob_acp.exceptions import ConfigError


def write(tmp_path, text, name="config.yaml"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_defaults_are_the_documented_ones():
    cfg = config.defaults()
    assert cfg.source is None
    assert cfg.as_dict() == {
        "profile": "default",
        "model": {"provider": "openai", "name": "gpt-4.1-mini", "baseUrl": None, "apiKeyEnv": None,
                  "apiKeyFile": None, "script": None,
                  "maxTokens": None, "temperature": None, "timeout": 120, "callTimeout": 600, "retries": 4,
                  "thinking": None, "price": {"input": None, "output": None}, "choices": [], "reasoning": None,
                  "window": None, "headers": {}, "query": {}, "keyHeader": None, "extraBody": {}},
        "models": [],
        "context": {"window": 128000, "threshold": 0.8, "keepLastTurns": 2},
        "sessions": {"enabled": False, "dir": ".bob/sessions"},
        "tools": {"bash": {"timeout": 120, "outputLimit": 30000}, "maxReadBytes": 262144,
                  "sandbox": "off", "sandboxNetwork": False, "sandboxUnixSockets": "deny",
                  "sandboxHide": ["~/.ssh", "~/.aws", "~/.gnupg", "~/.netrc", "~/.config/gh", "~/.docker/config.json",
                                  "~/.kube"], "limits": {"processes": 512, "memory": None},
                  "plan": False, "askUser": False, "clientFs": False, "clientTerminal": False, "checkpoints": False,
                  "checkpointTurns": 20,
                  "checkpointMaxBytes": 10485760, "checkpointStoreLimit": 1073741824,
                  "env": {"drop": ["*_API_KEY", "*_SECRET*", "*_TOKEN"]}},
        "loop": {"warnAt": 3, "stopAt": 5},
        "limits": {"maxSessions": 1024, "sessionOverflow": "refuse", "maxModelCalls": 50},
        "skills": {"dirs": []},
        # Features the product document does not have are off: its behaviour, exactly.
        "acp": {"sessionHistory": False, "configOptions": False, "replayStatus": "completed", "auth": False,
                "embeddedContext": False, "images": False, "cancelRequest": False, "additionalDirectories": False,
                "fork": False, "steering": False, "clientTimeout": 60},
        "permissions": {"mode": "ask", "allowAlways": "tool", "newForgetsGrants": False, "projectRules": False},
        "mcp": {"enabled": False, "timeout": 30},
        "chat": {"mcpServers": []},
        "log": {"level": "info", "format": "console", "file": None},
    }


def test_file_values_override_defaults_and_keep_the_rest(tmp_path):
    path = write(tmp_path, "model:\n  name: llama3\n  baseUrl: http://127.0.0.1:11434/v1\ncontext:\n  keepLastTurns: 5\n")
    cfg = config.load(path, env={})
    assert cfg.model.name == "llama3" and cfg.model.baseUrl == "http://127.0.0.1:11434/v1"
    assert cfg.context.keepLastTurns == 5 and cfg.context.window == 128000
    assert cfg.source == path


def test_lookup_order_explicit_then_env_then_xdg(tmp_path):
    explicit = write(tmp_path, "model: {name: a}\n", "a.yaml")
    from_env = write(tmp_path, "model: {name: b}\n", "b.yaml")
    xdg = tmp_path / "xdg" / "bob"
    xdg.mkdir(parents=True)
    (xdg / "config.yaml").write_text("model: {name: c}\n")
    env = {"BOB_CONFIG": from_env, "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    assert config.load(explicit, env=env).model.name == "a"
    assert config.load(None, env=env).model.name == "b"
    assert config.load(None, env={"XDG_CONFIG_HOME": str(tmp_path / "xdg")}).model.name == "c"
    assert config.load(None, env={"XDG_CONFIG_HOME": str(tmp_path / "none")}).model.name == "gpt-4.1-mini"


def test_home_config_when_no_xdg(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".config" / "bob").mkdir(parents=True)
    (tmp_path / ".config" / "bob" / "config.yaml").write_text("model: {name: home}\n")
    assert config.load(None, env={}).model.name == "home"


def test_env_overrides_the_three_model_keys(tmp_path):
    path = write(tmp_path, "model: {provider: anthropic, name: x}\n")
    env = {"BOB_PROVIDER": "openai", "BOB_MODEL": "qwen", "BOB_BASE_URL": "http://127.0.0.1:8080/v1"}
    cfg = config.load(path, env=env)
    assert (cfg.model.provider, cfg.model.name, cfg.model.baseUrl) == ("openai", "qwen", "http://127.0.0.1:8080/v1")


def test_bob_model_naming_an_entry_picks_that_entry(tmp_path):
    """An editor's snippet sets BOB_MODEL: naming an entry of `models:` it starts sessions with that
    entry (its provider, URL and key too); any other name is model.name, as before."""
    models = ("models:\n"
              "  - {id: fast, provider: openai, name: gpt-4.1-mini}\n"
              "  - {id: local, provider: openai, name: qwen3, baseUrl: 'http://127.0.0.1:11434/v1'}\n")
    path = write(tmp_path, models)
    cfg = config.load(path, env={"BOB_MODEL": "local"})
    assert [e.id for e in cfg.entries] == ["local", "fast"]
    assert (cfg.model.name, cfg.model.baseUrl) == ("qwen3", "http://127.0.0.1:11434/v1")
    both = write(tmp_path, "model: {provider: anthropic, name: claude-x}\n" + models, "both.yaml")
    cfg = config.load(both, env={"BOB_MODEL": "local"})
    assert [e.id for e in cfg.entries] == ["local", "claude-x", "fast"] and cfg.model.name == "qwen3"
    cfg = config.load(both, env={"BOB_MODEL": "claude-y"})  # not an entry: the name of `model:`
    assert [e.id for e in cfg.entries] == ["claude-y", "fast", "local"] and cfg.model.provider == "anthropic"


def test_a_bad_env_override_names_the_variable():
    with pytest.raises(ConfigError, match=r"model.provider.*\$BOB_PROVIDER"):
        config.load(None, env={"BOB_PROVIDER": "gemini", "XDG_CONFIG_HOME": "/nonexistent"})


@pytest.mark.parametrize("text, key", [
    ("modle: {name: x}\n", "modle"),
    ("model: {nmae: x}\n", "model.nmae"),
    ("tools: {bash: {timout: 3}}\n", "tools.bash.timout"),
])
def test_unknown_keys_are_named_with_the_file(tmp_path, text, key):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        config.load(path, env={})
    assert f"'{key}'" in str(info.value) and path in str(info.value) and "unknown key" in str(info.value)


@pytest.mark.parametrize("text, key", [
    ("model: {timeout: soon}\n", "model.timeout"),
    ("model: {retries: 1.5}\n", "model.retries"),
    ("model: {provider: gemini}\n", "model.provider"),
    ("sessions: {enabled: 'yes'}\n", "sessions.enabled"),
    ("skills: {dirs: /one/path}\n", "skills.dirs"),
    ("context: {threshold: 3}\n", "context.threshold"),
    ("limits: {maxModelCalls: true}\n", "limits.maxModelCalls"),
    ("limits: {sessionOverflow: drop}\n", "limits.sessionOverflow"),
    ("model: {name: null}\n", "model.name"),
    ("log: {level: loud}\n", "log.level"),
    ("model: 3\n", "model"),
])
def test_wrong_types_are_named_with_the_file(tmp_path, text, key):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        config.load(path, env={})
    assert f"'{key}'" in str(info.value) and path in str(info.value)
    assert "\n" not in str(info.value)


def test_stop_at_must_exceed_warn_at(tmp_path):
    with pytest.raises(ConfigError, match="loop.stopAt"):
        config.load(write(tmp_path, "loop: {warnAt: 4, stopAt: 4}\n"), env={})


def test_broken_yaml_and_non_mapping_and_missing_named_file(tmp_path):
    with pytest.raises(ConfigError, match="invalid YAML at line 3"):
        config.load(write(tmp_path, "model:\n  name: [unclosed\n"), env={})
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        config.load(write(tmp_path, "- a\n- b\n"), env={})
    with pytest.raises(ConfigError, match="not found"):
        config.load(str(tmp_path / "missing.yaml"), env={})


def test_empty_file_gives_defaults(tmp_path):
    assert config.load(write(tmp_path, ""), env={}).model.provider == "openai"


def test_paths_are_relative_to_the_config_file(tmp_path):
    path = write(tmp_path, "model: {provider: script, script: replies.yaml}\nskills: {dirs: [my-skills, ~/s]}\n")
    cfg = config.load(path, env={})
    assert cfg.model.script == str(tmp_path / "replies.yaml")
    assert cfg.skills.dirs[0] == str(tmp_path / "my-skills")
    assert cfg.skills.dirs[1] == os.path.expanduser("~/s")


def test_config_is_read_only():
    cfg = config.defaults()
    with pytest.raises(AttributeError):
        cfg.model.name = "x"


def test_the_full_profile_switches_the_opt_ins_on_and_explicit_keys_win(tmp_path):
    env = {"XDG_CONFIG_HOME": str(tmp_path / "none")}
    full = config.load(env=env, profile="full")
    assert (full.sessions.enabled, full.acp.sessionHistory, full.acp.configOptions, full.acp.auth,
            full.permissions.allowAlways, full.mcp.enabled, full.acp.replayStatus, full.tools.sandbox) == (
        True, True, True, True, "command", True, "recorded", "workspace")
    path = write(tmp_path, "profile: full\nsessions: {enabled: false}\nmcp: {enabled: false}\n")
    mixed = config.load(path, env={})
    assert mixed.profile == "full" and mixed.sessions.enabled is False and mixed.acp.sessionHistory is False
    assert mixed.mcp.enabled is False and mixed.acp.configOptions is True
    assert config.load(path, env={}, profile="default").acp.configOptions is False  # the command line wins
    with pytest.raises(ConfigError, match="'profile'.*must be one of default, full"):
        config.load(write(tmp_path, "profile: everything\n", "bad.yaml"), env={})


def test_the_reference_is_made_from_the_declarations():
    """docs/configuration.md shows every key with its default and meaning as the declarations
    say (one declaration per key: type, default, limits, full-profile value, documentation)."""
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "configuration.md").read_text()
    assert "```yaml\n" + config.reference() + "```\n" in text
    reference = config.reference()
    for section in config.SCHEMA:
        assert f"\n{section}:" in "\n" + reference
    assert config.FULL_PROFILE["tools.sandbox"] == "workspace" and len(config.FULL_PROFILE) == 21
    import re

    # (a key with a long default once had its words wrapped one letter to a line beside it)
    squeezed = [line for line in reference.splitlines() if re.fullmatch(r"\s*#\s+\S{1,3}", line)]
    assert not squeezed


def test_the_reference_is_valid_yaml_that_loads_to_the_defaults(tmp_path):
    """Copied as it is into a config file, the reference gives the defaults (an `off` that YAML
    would read as false is quoted)."""
    import yaml

    path = tmp_path / "config.yaml"
    path.write_text(config.reference())
    assert config.load(str(path), env={}).as_dict() == config.defaults().as_dict()
    assert yaml.safe_load(config.reference())["tools"]["sandbox"] == "off"


def test_a_misspelt_key_is_a_type_error_for_mypy_too():
    """The configuration's sections are real classes: their keys are known attributes."""
    from bob_acp.config.schema import ModelSettings as Model

    assert "name" in Model.__annotations__ and "nmae" not in Model.__annotations__
    assert isinstance(config.defaults().model, Model)


@pytest.mark.parametrize("written", ["off", "false", "no", "'off'"])
def test_the_sandbox_off_as_yaml_reads_an_unquoted_off(tmp_path, written):
    """YAML 1.1 reads an unquoted `off` as false: `tools.sandbox: off` means off all the same."""
    path = write(tmp_path, f"tools: {{sandbox: {written}}}\n")
    assert config.load(path, env={}).tools.sandbox == "off"
