"""Project rules through the real bob-acp (permissions.projectRules, in the full profile): the
question offers "always" and "never" for the project, the answer is kept in Bob's own state and
answers the next session's question (in another Bob process), every use is said, a "never" wins
in every approval mode, and the default profile is unchanged (allow_always: the tool, for the
session; nothing persists)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml
from bob_client import allow_always, bash, bob_command, reject, updates

from bob_acp.rules.store import Store

RULES = {"permissions": {"projectRules": True}}


def choose(option_id):
    def answer(request):
        assert option_id in [o["optionId"] for o in request["params"]["options"]], request["params"]["options"]
        return {"outcome": {"outcome": "selected", "optionId": option_id}}
    return answer


def asked(frames):
    return [f for f in frames if f.get("method") == "session/request_permission"]


def results(frames):
    return [(u["status"], u["rawOutput"]["output"]) for u in updates(frames, "tool_call_update")
            if u.get("status") in ("completed", "failed")]


def test_always_in_this_project_is_kept_and_answers_the_next_bobs_question(scripted, workdir):
    turns = [{"match": "first", "replies": [bash("echo ran > first.txt"), {"text": "done"}]},
             {"match": "again", "replies": [bash("echo ran -n > again.txt"), {"text": "done"}]},
             {"match": "both", "replies": [bash("echo x && touch pwned"), {"text": "done"}]}]
    bob, sid = scripted(turns, config=RULES)
    response, frames = bob.prompt(sid, "first", answer=choose("allow_project"))
    options = asked(frames)[0]["params"]["options"]
    assert [(o["optionId"], o["kind"], o["name"]) for o in options] == [
        ("allow", "allow_once", "Allow"),
        ("allow_always", "allow_always", "Always allow bash in this session"),
        ("allow_project", "allow_always", "Always allow `echo ran …` in this project"),
        ("reject", "reject_once", "Reject"),
        ("reject_project", "reject_always", "Never allow `echo ran …` in this project")]
    assert (workdir / "first.txt").exists()
    assert "project rule kept for" in bob.wait_stderr("project rule kept for")
    bob.close()
    later, sid = scripted(turns, config=RULES)  # another Bob process, another session
    response, frames = later.prompt(sid, "again", answer=reject)
    assert asked(frames) == [] and (workdir / "again.txt").exists()
    running = [u for u in updates(frames, "tool_call_update") if u.get("status") == "in_progress"]
    assert running[0]["_meta"]["bob"]["rule"] == "always `echo ran …`"
    assert running[0]["title"].endswith("· rule: always `echo ran …`")
    assert "run by a rule of this project" in later.wait_stderr("run by a rule of this project")
    response, frames = later.prompt(sid, "both", answer=reject)  # `echo x` is no `echo ran`, nor is touch
    assert len(asked(frames)) == 1 and not (workdir / "pwned").exists()


def test_never_in_this_project_refuses_in_every_mode_and_tells_the_model_why(scripted, workdir):
    turns = [{"match": "push", "replies": [bash("git push --force origin main"), {"text": "done"}]},
             {"match": "wrapped", "replies": [bash("sh -c 'git push --force'"), {"text": "done"}]}]
    bob, sid = scripted(turns, config=RULES)
    response, frames = bob.prompt(sid, "push", answer=choose("reject_project"))
    assert results(frames)[0][0] == "failed"
    bob.close()
    later, sid = scripted(turns, config={**RULES, "permissions": {"projectRules": True, "mode": "allow-all"}})
    for prompt in ("push", "wrapped"):
        response, frames = later.prompt(sid, prompt)
        assert asked(frames) == []
        status, output = results(frames)[0]
        assert status == "failed" and "the user keeps a rule for this project: never `git push …`" in output
    assert "refused by a rule of this project" in later.wait_stderr("refused by a rule of this project")


def test_file_rules_cover_the_tool_in_the_folder_and_nothing_else(scripted, workdir):
    (workdir / "src").mkdir()
    turns = [{"match": "one", "replies": [{"tool_calls": [{"name": "write_file", "arguments": {
                 "path": "src/a.txt", "content": "a"}}]}, {"text": "done"}]},
             {"match": "two", "replies": [{"tool_calls": [
                 {"name": "write_file", "arguments": {"path": "src/b.txt", "content": "b"}},
                 {"name": "write_file", "arguments": {"path": "c.txt", "content": "c"}},
                 {"name": "edit_file", "arguments": {"path": "src/b.txt", "old_string": "b", "new_string": "B"}}]},
                 {"text": "done"}]}]
    bob, sid = scripted(turns, config=RULES)
    response, frames = bob.prompt(sid, "one", answer=choose("allow_project"))
    assert [o["name"] for o in asked(frames)[0]["params"]["options"]][2] == \
        "Always allow write_file in src/ in this project"
    response, frames = bob.prompt(sid, "two", answer=reject)
    assert [f["params"]["toolCall"]["title"] for f in asked(frames)] == ["write_file: c.txt", "edit_file: src/b.txt"]
    assert (workdir / "src" / "b.txt").read_text() == "b" and not (workdir / "c.txt").exists()


def test_a_rules_file_a_repository_ships_grants_nothing(scripted, workdir):
    """Rules are read from Bob's own state alone: files a clone brings (.bob/rules.yaml, and the
    peers' settings files) are never read as rules."""
    (workdir / ".bob").mkdir()
    planted = {"project": str(workdir), "rules": [{"allow": "bash", "command": "touch"}]}
    for name in (".bob/rules.yaml", ".bob/permissions.yaml", ".bob/settings.json"):
        (workdir / name).write_text(yaml.safe_dump(planted))
    bob, sid = scripted([{"replies": [bash("touch planted.txt"), {"text": "done"}]}], config=RULES)
    response, frames = bob.prompt(sid, "go", answer=reject)
    assert len(asked(frames)) == 1 and not (workdir / "planted.txt").exists()


def test_the_default_profile_keeps_its_question_and_keeps_nothing(scripted, workdir, bob_env):
    turns = [{"replies": [bash("echo one"), bash("echo two"), {"text": "done"}]}]
    bob, sid = scripted(turns)
    response, frames = bob.prompt(sid, "go", answer=allow_always)
    questions = asked(frames)
    assert len(questions) == 1  # allow_always covers the tool name, for the session
    assert [o["optionId"] for o in questions[0]["params"]["options"]] == ["allow", "allow_always", "reject"]
    available = [u for u in updates(bob.frames, "available_commands_update")][-1]["availableCommands"]
    assert "rules" not in [c["name"] for c in available]
    assert not os.path.exists(os.path.join(bob_env["HOME"], ".local", "state", "bob", "rules"))


def test_rules_in_the_editor_and_in_the_terminal(scripted, workdir, bob_env):
    bob, sid = scripted([{"replies": [{"text": "never reached"}]}], config=RULES)
    available = [u for u in updates(bob.frames, "available_commands_update")][-1]["availableCommands"]
    assert "rules" in [c["name"] for c in available]
    response, frames = bob.prompt(sid, "/rules")
    text = "".join(u["content"]["text"] for u in updates(frames, "agent_message_chunk"))
    assert "No rules kept for this project yet" in text

    def cli(*args):
        return subprocess.run([*bob_command(), "rules", *args], capture_output=True, text=True, timeout=60,
                              cwd=str(workdir), env=bob_env)

    added = cli("add", "allow", "bash", "npm", "test")
    assert added.returncode == 0 and "kept: always `npm test …`" in added.stdout
    assert cli("add", "never", "write_file", "secrets").returncode == 0
    listed = cli()
    assert "1. always `npm test …`" in listed.stdout and "2. never write_file in secrets/" in listed.stdout
    assert str(workdir) in cli("--all").stdout
    response, frames = bob.prompt(sid, "/rules")
    text = "".join(u["content"]["text"] for u in updates(frames, "agent_message_chunk"))
    assert "1. always `npm test …`" in text and "2. never write_file in secrets/" in text  # (no restart)
    response, frames = bob.prompt(sid, "/rules forget 1")
    assert "Removed this project's rule: always `npm test …`" in "".join(
        u["content"]["text"] for u in updates(frames, "agent_message_chunk"))
    assert "1. never write_file in secrets/" in cli().stdout
    bad = cli("add", "allow", "rm", "x")
    assert bad.returncode == 2 and "no tool a rule can name" in bad.stderr
    check = subprocess.run([*bob_command(), "--check", "--json"], capture_output=True, text=True, timeout=120,
                           cwd=str(workdir), env=bob_env)
    rules = json.loads(check.stdout)["rules"]
    assert rules["count"] == 1 and rules["enabled"] and rules["applied"] == 1 and rules["project"] == str(workdir)


@pytest.mark.parametrize("how", ["malformed", "moved"])
def test_rules_in_doubt_are_said_once_and_their_always_rules_do_not_apply(scripted, workdir, tmp_path, how):
    store = Store()
    store.add(str(workdir), __import__("bob_acp.rules", fromlist=["Rule"]).Rule("allow", "bash", ("echo",)))
    if how == "malformed":
        with open(store.path_of(str(workdir)), "a") as handle:
            handle.write("- {allow: nothing}\n")
    else:
        document = yaml.safe_load(open(store.path_of(str(workdir))))
        document["folder"]["inode"] += 1  # (made for another folder than the one at this path now)
        with open(store.path_of(str(workdir)), "w") as handle:
            yaml.safe_dump(document, handle)
    bob, sid = scripted([{"replies": [bash("echo one"), bash("echo two"), {"text": "done"}]}], config=RULES)
    response, frames = bob.prompt(sid, "go", answer=choose("allow"))
    assert len(asked(frames)) == 2
    said = [f for f in frames if "not all applied" in json.dumps(f)]
    assert len(said) == 1


def test_rules_are_out_of_a_sandboxed_commands_sight(spawn_bob, tmp_path, workdir, bob_env):
    from bob_acp import sandbox as sandbox_module
    from bob_acp.config import defaults

    cfg = defaults("full")
    state = sandbox_module.status(cfg)
    if state is None or not sandbox_module.coverage(cfg).confines:
        pytest.skip("no sandbox on this machine")
    Store().add(str(workdir), __import__("bob_acp.rules", fromlist=["Rule"]).Rule("allow", "bash", ("cat",)))
    folder = os.path.join(bob_env["HOME"], ".local", "state", "bob", "rules")
    assert os.listdir(folder)
    script = tmp_path / "s.yaml"
    script.write_text(yaml.safe_dump({"turns": [{"replies": [
        bash(f"ls {folder}; cat {folder}/*.yaml; echo > {folder}/mine.yaml"), {"text": "done"}]}]}))
    bob = spawn_bob({"model": {"provider": "script", "script": str(script)}, "profile": "full",
                     "permissions": {"mode": "sandboxed"}})
    bob.initialize()
    sid = bob.new_session()
    response, frames = bob.prompt(sid, "go", answer=choose("allow"), timeout=120)
    output = results(frames)[0][1]
    assert "command: cat" not in output and "No such file or directory" in output, output  # (not seen, not read)
    assert not os.path.exists(os.path.join(folder, "mine.yaml"))  # (nor written)


def test_the_rules_command_needs_no_agent(tmp_path, bob_env, write_config):
    write_config({})  # (the default profile)
    done = subprocess.run([sys.executable, "-m", "bob_acp", "rules", "--project", str(tmp_path)], capture_output=True,
                          text=True, timeout=60, env=bob_env)
    assert done.returncode == 0 and "no rules yet" in done.stdout
    assert "apply only with permissions.projectRules" in done.stderr  # (the default profile: said)


def test_a_command_run_out_of_its_sandbox_is_asked_whatever_the_rules(scripted, workdir):
    """`unconfined: true` (the sandbox stopped it) always asks: an "always" rule for the command
    does not cover it, and no rule is offered for it."""
    from bob_acp import sandbox as sandbox_module
    from bob_acp.config import defaults

    if not sandbox_module.coverage(defaults("full")).confines:
        pytest.skip("no sandbox on this machine")
    Store().add(str(workdir), __import__("bob_acp.rules", fromlist=["Rule"]).Rule("allow", "bash", ("echo",)))
    turns = [{"replies": [{"tool_calls": [{"name": "bash", "arguments": {"command": "echo in-box"}}]},
                          {"tool_calls": [{"name": "bash", "arguments": {"command": "echo out", "unconfined": True}}]},
                          {"text": "done"}]}]
    bob, sid = scripted(turns, config={**RULES, "tools": {"sandbox": "workspace"}})
    response, frames = bob.prompt(sid, "go", answer=reject)
    questions = asked(frames)
    assert len(questions) == 1 and questions[0]["params"]["toolCall"]["title"] == "bash (unconfined): echo out"
    assert "allow_project" not in [o["optionId"] for o in questions[0]["params"]["options"]]
