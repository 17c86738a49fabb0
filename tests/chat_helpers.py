"""Writing the config and script `bob-acp chat` tests start Bob with."""

from __future__ import annotations

import yaml


def write_config(tmp_path, script=None, config=None):
    cfg = dict(config or {})
    if script is not None:
        path = tmp_path / "script.yaml"
        path.write_text(yaml.safe_dump(script))
        cfg.setdefault("model", {}).update({"provider": "script", "script": str(path)})
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))


def quit_chat(child) -> None:
    """At the chat's prompt, /quit: the chat ends, with status 0."""
    import pexpect

    child.expect("you> ")
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
