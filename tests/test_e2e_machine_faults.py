"""Faults of the machine and of the peer against the real bob-acp (issue 37): nothing lost in
silence, no crash, no wedge. Limits are made as an ordinary user would meet them (a process or
memory limit, a locale, a full disk, no /proc); where this machine cannot make one, the test
skips, saying why."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import uuid

import pytest
import yaml
from bob_client import Bob, allow, allow_always, bash, bob_command, message_text, outputs, script_config, tool, updates

from bob_acp import __version__

pytestmark = pytest.mark.e2e

NOTICES = {"session": {"notices": {}}}


def notices(frames):
    return [u for u in updates(frames, "notice")]


# ---- 1. a session that cannot be saved is said ------------------------------------------------------

def test_a_session_that_cannot_be_saved_is_told_kept_and_saved_again(spawn_bob, tmp_path, workdir):
    turns = [{"replies": [{"text": "one"}]}, {"replies": [{"text": "two"}]}, {"replies": [{"text": "three"}]}]
    (workdir / ".bob").write_text("not a folder")  # where the sessions folder would be
    bob = spawn_bob({**script_config(tmp_path, turns), "sessions": {"enabled": True}})
    bob.initialize(NOTICES)
    response, frames = bob.call("session/new", {"cwd": str(workdir), "mcpServers": []})
    sid = response["result"]["sessionId"]
    while not notices(bob.frames):  # (after the answer: the client knows the session's id)
        bob.read_frame()
    said = notices(bob.frames)
    assert said[0]["title"] == "This conversation could not be saved." and said[0]["severity"] == "warning"
    assert "Not a directory" in said[0]["description"] and "tries again" in said[0]["description"]
    _, frames = bob.prompt(sid, "first")
    assert message_text(frames) == "one" and not notices(frames)  # said once, not at every save
    (workdir / ".bob").unlink()
    _, frames = bob.prompt(sid, "second")
    assert [n["title"] for n in notices(frames)] == ["This conversation is saved again."]
    saved = json.loads((workdir / ".bob" / "sessions" / f"{sid}.json").read_text())
    assert [m["content"][0]["text"] for m in saved["messages"] if m["role"] == "user"] == ["first", "second"]
    bob.wait_stderr("not saved: Not a directory")


def test_a_failed_save_is_in_the_first_turn_however_soon_it_comes_and_saved_again_has_its_own_line(
        spawn_bob, tmp_path, workdir):
    """A client without notices: the failed save of session/new is said in the answer of a
    prompt sent right behind it (every time, not only when a line outside the turn was shown),
    and "saved again" never joins the model's text."""
    for attempt in range(3):
        turns = [{"replies": [{"text": "one"}]}, {"replies": [{"text": "two"}]}]
        (workdir / ".bob").write_text("not a folder")
        bob = spawn_bob({**script_config(tmp_path, turns), "sessions": {"enabled": True}})
        bob.initialize()
        response, _ = bob.call("session/new", {"cwd": str(workdir), "mcpServers": []})
        sid = response["result"]["sessionId"]
        _, frames = bob.prompt(sid, "first")  # (sent at once: the answer of session/new is all it waited for)
        said = message_text(frames)
        assert said.startswith("⚠️ This conversation could not be saved. Not a directory"), (attempt, said)
        assert said.endswith("one")
        (workdir / ".bob").unlink()
        _, frames = bob.prompt(sid, "second")
        assert message_text(frames) == "two\nThis conversation is saved again.\n"
        assert bob.close() == 0
        shutil.rmtree(workdir / ".bob")


def test_a_full_disk_is_told_to_a_client_without_notices_and_the_saved_file_stays_whole(tmp_path, bob_env, workdir):
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-Urm", "true"], capture_output=True).returncode:
        pytest.skip("this machine lets no unprivileged process mount a small file system (unshare -Urm)")
    sessions = workdir / ".bob" / "sessions"
    sessions.mkdir(parents=True)
    big = "x" * 60000  # more than the file system holds
    turns = [{"replies": [{"text": "short"}]}, {"replies": [{"text": big}]}, {"replies": [{"text": big}]}]
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({**script_config(tmp_path, turns), "sessions": {"enabled": True}}))
    # A 48 KiB file system on the sessions folder, as a full disk is met.
    command = ["unshare", "-Urm", "sh", "-c", f'mount -t tmpfs -o size=48k tmpfs "{sessions}" && exec "$@"', "sh",
               *bob_command()]
    bob = Bob(str(workdir), bob_env, command=command)
    try:
        bob.initialize()
        sid = bob.new_session()
        bob.prompt(sid, "first")
        path = sessions / f"{sid}.json"
        first = subprocess.run(["nsenter", "-t", str(bob.pid), "-U", "-m", "--preserve-credentials", "cat", str(path)],
                               capture_output=True).stdout
        _, frames = bob.prompt(sid, "second")
        _, third = bob.prompt(sid, "third")
        said = message_text(frames)
        assert "⚠️ This conversation could not be saved. No space left on device. Bob keeps" in said
        assert "could not be saved" not in message_text(third)  # once
        kept = subprocess.run(["nsenter", "-t", str(bob.pid), "-U", "-m", "--preserve-credentials", "cat", str(path)],
                              capture_output=True).stdout
        assert kept == first and json.loads(kept)["messages"]  # the file saved before is whole
    finally:
        bob.close()


# ---- 2. process and memory limits ---------------------------------------------------------------------

class ProcessLimit:
    """Bob run under a limit on its processes and threads: a pids cgroup (root), else ulimit -u
    counted from the user's own processes."""

    def __init__(self, limit: int):
        self.limit = limit
        self.folder = None
        for base in ("/sys/fs/cgroup/pids", "/sys/fs/cgroup"):
            if os.geteuid() == 0 and os.access(base, os.W_OK) and (
                    base.endswith("pids") or "pids" in open(os.path.join(base, "cgroup.controllers")).read()):
                self.folder = os.path.join(base, f"bob-test-{uuid.uuid4().hex[:8]}")
                os.mkdir(self.folder)
                with open(os.path.join(self.folder, "pids.max"), "w") as handle:
                    handle.write(str(limit))
                return
        if os.geteuid() == 0:
            pytest.skip("root, and no pids cgroup to make a process limit with (RLIMIT_NPROC does not bind root)")
        self.mine = len([p for p in os.listdir("/proc") if p.isdigit() and os.stat(f"/proc/{p}").st_uid == os.geteuid()])

    def command(self) -> list[str]:
        if self.folder:
            return ["sh", "-c", f'echo $$ > "{self.folder}/cgroup.procs" && exec "$@"', "sh", *bob_command()]
        return ["prlimit", f"--nproc={self.mine + self.limit}", "--", *bob_command()]

    def close(self) -> None:
        if self.folder:
            with open(os.path.join(self.folder, "cgroup.procs")) as handle:
                for pid in handle.read().split():
                    os.kill(int(pid), signal.SIGKILL)
            for _ in range(50):
                try:
                    os.rmdir(self.folder)
                    return
                except OSError:
                    time.sleep(0.05)


@pytest.mark.parametrize("limit", [2, 4, 6, 9])
def test_every_request_is_answered_whatever_the_process_limit(spawn_bob, tmp_path, workdir, limit):
    made = ProcessLimit(limit)
    limit_named = "pids.max" if made.folder else "ulimit -u"  # (the limit that binds, by its name)
    try:
        bob = spawn_bob({**script_config(tmp_path, [{"replies": [bash("echo hi"), {"text": "done"}]}]),
                         "permissions": {"mode": "allow-all"}}, command=made.command())
        answers = [bob.call("initialize", {"protocolVersion": 1})[0]]
        answers.append(bob.call("session/new", {"cwd": str(workdir), "mcpServers": []})[0])
        if "result" in answers[-1]:
            answer, frames = bob.prompt(answers[-1]["result"]["sessionId"], "go")
            answers.append(answer)
            words = " ".join(outputs(frames)) + json.dumps(answer)
            assert "result" not in answer or limit_named in words or "[exit code: 0]" in words
        for answer in answers:
            assert "result" in answer or limit_named in answer["error"]["message"], answer
        assert bob.close() == 0
        assert "Traceback" not in bob.stderr()
    finally:
        made.close()


def test_a_whole_turn_with_256_mb_of_address_space_and_below_it_one_line(spawn_bob, tmp_path, workdir):
    turns = [{"replies": [bash("echo hi"), tool("write_file", path="x.txt", content="x\n"), {"text": "done"}]}]
    config = {**script_config(tmp_path, turns), "permissions": {"mode": "allow-all"}, "sessions": {"enabled": True}}
    bob = spawn_bob(config, command=["prlimit", f"--as={256 << 20}", "--", *bob_command()])
    bob.initialize()
    sid = bob.new_session()
    response, frames = bob.prompt(sid, "go")
    assert response["result"]["stopReason"] == "end_turn"
    assert outputs(frames)[0].startswith("hi") and outputs(frames)[1].startswith("created")
    low = spawn_bob(config, command=["prlimit", f"--as={64 << 20}", "--", *bob_command()])
    low.initialize()
    low.wait_stderr("the address space is limited to 64 MiB (ulimit -v): Bob needs 256 MiB")
    low.close()
    assert "Traceback" not in low.stderr()


# ---- 3. any locale -------------------------------------------------------------------------------------

def test_a_command_and_a_file_name_past_latin_1_work_in_an_iso_8859_1_locale(spawn_bob, tmp_path, workdir):
    locales = tmp_path / "locales"
    locales.mkdir()
    made = subprocess.run(["localedef", "-i", "en_US", "-f", "ISO-8859-1", str(locales / "en_US.ISO-8859-1")],
                          capture_output=True) if shutil.which("localedef") else None
    if made is None or not (locales / "en_US.ISO-8859-1").exists():
        pytest.skip("cannot make an ISO-8859-1 locale here (localedef and the locale sources)")
    turns = [{"replies": [bash("echo 'price: 5€'"), tool("write_file", path="prix-€.txt", content="5€\n"),
                          {"text": "done"}]}]
    bob = spawn_bob({**script_config(tmp_path, turns), "permissions": {"mode": "allow-all"}},
                    env={"LOCPATH": str(locales), "LC_ALL": "en_US.ISO-8859-1", "LANG": "en_US.ISO-8859-1"})
    bob.initialize()
    sid = bob.new_session()
    response, frames = bob.prompt(sid, "go")
    assert response["result"]["stopReason"] == "end_turn"
    assert outputs(frames)[0] == "price: 5€\n[exit code: 0]"
    assert (workdir / "prix-€.txt").read_text(encoding="utf-8") == "5€\n"
    finals = [u["status"] for u in updates(frames, "tool_call_update") if u.get("status") in ("completed", "failed")]
    assert finals == ["completed", "completed"]


# ---- 4. no /proc ---------------------------------------------------------------------------------------

def test_without_proc_the_orphan_guarantee_is_said_not_pretended(spawn_bob, tmp_path, bob_env):
    if subprocess.run(["unshare", "-Urm", "true"], capture_output=True).returncode:
        pytest.skip("this machine lets no unprivileged process make a mount namespace (unshare -Urm)")
    hide = ["unshare", "-Urm", "sh", "-c", 'mount -t tmpfs -o size=4k none /proc && exec "$@"', "sh"]
    bob = spawn_bob({"model": {"provider": "script", "script": "/nonexistent"}}, command=[*hide, *bob_command()])
    bob.initialize()
    bob.wait_stderr("a process that leaves its group may outlive Bob here: there is no /proc")
    check = subprocess.run([*hide, *bob_command(), "--check"], env=bob_env, capture_output=True, text=True, timeout=60)
    assert "processes: a process that leaves its group may outlive Bob here: there is no /proc" in check.stdout


# ---- 5. frames -----------------------------------------------------------------------------------------

def test_an_image_within_its_size_fits_a_frame_and_a_larger_prompt_is_answered_under_its_id(spawn_bob, tmp_path):
    import base64

    bob = spawn_bob({**script_config(tmp_path, [{"replies": [{"text": "seen"}]}]), "acp": {"images": True}})
    bob.initialize()
    sid = bob.new_session()
    png = b"\x89PNG\r\n\x1a\n" + os.urandom(2 * 1024 * 1024 - 64)  # (2 MiB of image: the documented most)
    block = {"type": "image", "mimeType": "image/png", "data": base64.b64encode(png).decode()}
    response, _ = bob.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "look"}, block]})
    assert response["result"]["stopReason"] == "end_turn"
    huge = {"type": "image", "mimeType": "image/png", "data": base64.b64encode(os.urandom(3_500_000)).decode()}
    response, _ = bob.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "look"}, huge]})
    assert response["error"]["code"] == -32600 and "limit of 4194304 bytes" in response["error"]["message"]


# ---- 6. an editor that never answers ---------------------------------------------------------------------

def test_requests_to_an_editor_that_never_answers_end_at_their_time_limit(spawn_bob, tmp_path, workdir):
    (workdir / "a.txt").write_text("old\n")
    turns = [{"replies": [tool("read_file", path="a.txt"), tool("write_file", path="b.txt", content="new\n"),
                          bash("echo in-terminal"), {"text": "the turn went on"}]}]
    bob = spawn_bob({**script_config(tmp_path, turns), "tools": {"clientFs": True, "clientTerminal": True},
                     "acp": {"clientTimeout": 1}})
    bob.initialize({"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True})
    sid = bob.new_session()
    started = time.monotonic()
    answered = []

    def answer(request):  # permissions yes; the editor's own methods: never a word
        if request["method"] == "session/request_permission":
            return allow(request)
        answered.append(request["method"])
        return None

    msg_id = bob.request_async("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
    frames = []
    while True:
        frame = bob.read_frame(timeout=30)
        frames.append(frame)
        if frame.get("id") == msg_id and "method" not in frame:
            break
        if "method" in frame and "id" in frame:
            result = answer(frame)
            if result is not None:
                bob.send({"jsonrpc": "2.0", "id": frame["id"], "result": result})
    assert frame["result"]["stopReason"] == "end_turn" and time.monotonic() - started < 20
    results = outputs(frames)
    assert all("did not answer" in out and "within 1 s" in out for out in results), results
    assert "the turn went on" in message_text(frames)
    assert answered[:1] == ["fs/read_text_file"] and "terminal/create" in answered


# ---- 7. Anthropic: no empty text block -------------------------------------------------------------------

def test_a_turn_cut_before_a_word_never_sends_anthropic_an_empty_text_block(spawn_bob, server, workdir):
    server.enqueue(server.anthropic_cut(""), server.anthropic_text("fine"))
    bob = spawn_bob({"model": {"provider": "anthropic", "baseUrl": server.url, "retries": 0}},
                    env={"ANTHROPIC_API_KEY": "sk-ant-test-0123456789"})
    bob.initialize()
    sid = bob.new_session()
    first, _ = bob.prompt(sid, "one")
    assert first["result"]["stopReason"] == "max_tokens"
    second, _ = bob.prompt(sid, "two")  # (the fake refuses blank text blocks with 400, as the API does)
    assert second["result"]["stopReason"] == "end_turn", second
    sent = server.requests[-1]["body"]["messages"]
    assert all(b.get("text", "x").strip() for m in sent for b in m["content"] if isinstance(b, dict))


# ---- 8. peer data is bounded -----------------------------------------------------------------------------

def test_a_huge_reasoning_item_is_not_kept_and_listed_models_are_cleaned(spawn_bob, server, workdir):
    huge = "e" * (2 * 1024 * 1024)
    server.enqueue(server.responses_reply("first", summary=["thinking"], encrypted=huge),
                   server.responses_reply("second"))
    bob = spawn_bob({"model": {"provider": "openai-responses", "baseUrl": server.url, "retries": 0},
                     "sessions": {"enabled": True}, "log": {"level": "debug"}}, env={"OPENAI_API_KEY": "sk-r-0123456789"})
    bob.initialize()
    sid = bob.new_session()
    bob.prompt(sid, "one")
    bob.prompt(sid, "two")
    assert huge not in json.dumps(server.requests[-1]["body"])
    assert huge not in (workdir / ".bob" / "sessions" / f"{sid}.json").read_text()
    bob.wait_stderr("is not kept")


def test_model_names_a_server_lists_are_bounded_and_without_controls(spawn_bob, server, workdir):
    names = ["good-model", "bad\u202emodel", "ctl\x1b[31mred", "x" * 500, " spaced ", "fine-2"]
    server.models = names
    bob = spawn_bob({"model": {"baseUrl": server.url + "/v1", "choices": "auto"}, "acp": {"configOptions": True}},
                    env={"OPENAI_API_KEY": "sk-l-0123456789"})
    bob.initialize()
    result = bob.result("session/new", {"cwd": str(workdir), "mcpServers": []})
    offered = [o["value"] for o in result["configOptions"][0]["options"]]
    assert "good-model" in offered and "fine-2" in offered
    assert not any(name in offered for name in names[1:5])
    assert server.gets[0]["headers"]["User-Agent"] == f"bob-acp/{__version__}"  # (not python-requests)


# ---- 9. one line, never a traceback ----------------------------------------------------------------------

def test_a_config_nested_a_thousand_deep_is_one_line(spawn_bob, tmp_path, bob_env):
    (tmp_path / "config.yaml").write_text("model: {extraBody: " + "[" * 1000 + "]" * 1000 + "}\n")
    check = subprocess.run(bob_command() + ["--check"], env=bob_env, capture_output=True, text=True, timeout=60)
    assert check.returncode == 2 and "nested deeper than" in check.stderr and "Traceback" not in check.stderr
    bob = Bob(str(tmp_path / "project"), bob_env)
    try:
        bob.initialize()
        sid = bob.new_session()
        response, frames = bob.prompt(sid, "hi")
        assert "nested deeper than" in message_text(frames)
    finally:
        assert bob.close() == 0
    assert "Traceback" not in bob.stderr()


def test_setup_with_a_read_only_home_is_one_line_and_its_key_file_follows_no_link(tmp_path, bob_env):
    home = tmp_path / "ro-home"
    home.mkdir()
    home.chmod(0o555)
    env = {**bob_env, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    env.pop("BOB_CONFIG")
    as_user = ["setpriv", "--bounding-set=-all", "--inh-caps=-all", "--"] if os.geteuid() == 0 else []
    done = subprocess.run([*as_user, *bob_command(), "setup", "--provider", "openai-compatible", "--base-url",
                           "http://127.0.0.1:9/v1", "--model", "m", "--no-check"], env=env, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and "cannot write" in done.stderr and "Traceback" not in done.stderr
    home.chmod(0o755)
    folder = tmp_path / "keys"
    folder.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    (folder / "openai.key").symlink_to(victim)  # a link where the key goes: replaced, never followed
    done = subprocess.run([*bob_command(), "setup", "--provider", "openai", "--model", "m", "--key-stdin",
                           "--key-file", str(folder / "openai.key"), "--config", str(tmp_path / "new.yaml"),
                           "--no-check"], env=env, input="sk-setup-0123456789\n", capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert victim.read_text() == "keep\n" and not (folder / "openai.key").is_symlink()
    assert (folder / "openai.key").read_text() == "sk-setup-0123456789\n"
    assert oct((folder / "openai.key").stat().st_mode & 0o777) == "0o600"
    assert [p.name for p in folder.iterdir()] == ["openai.key"]  # no temp file left


# ---- 10. a fixed config is used without a restart ---------------------------------------------------------

def test_a_fixed_config_opens_a_working_session_in_the_same_bob(spawn_bob, tmp_path, workdir):
    config = tmp_path / "config.yaml"
    bob = spawn_bob({})
    config.write_text("model: {provider: script, script: 5}\nnonsense: true\n")  # broken after start: no matter
    bob.initialize()
    old = bob.new_session()
    _, frames = bob.prompt(old, "hi")
    assert "could not use its configuration" in message_text(frames) and "'nonsense'" in message_text(frames)
    config.write_text(yaml.safe_dump(script_config(tmp_path, [{"replies": [{"text": "working now"}]}])))
    fresh = bob.new_session()
    _, frames = bob.prompt(fresh, "hi")
    assert message_text(frames) == "working now"
    _, frames = bob.prompt(old, "hi")  # a session already open keeps the configuration it had
    assert "could not use its configuration" in message_text(frames)
    bob.wait_stderr("changed: read again")


def test_a_config_rewritten_in_place_with_its_old_size_and_time_is_read_again(spawn_bob, tmp_path, workdir):
    """An edit that keeps the file's inode, size and modification time (written in place, its
    time put back, as `touch -r` does) is still a change: the next session has it."""
    from bob_client import dump_yaml

    for name, words in (("one.yaml", "from one"), ("two.yaml", "from two")):
        (tmp_path / name).write_text(dump_yaml({"turns": [{"replies": [{"text": words}]}]}))
    config = tmp_path / "config.yaml"
    bob = spawn_bob({"model": {"provider": "script", "script": str(tmp_path / "one.yaml")}})
    bob.initialize()
    _, frames = bob.prompt(bob.new_session(), "hi")
    assert message_text(frames) == "from one"
    before = os.stat(config)
    text = config.read_text()
    with open(config, "r+") as handle:
        handle.write(text.replace("one.yaml", "two.yaml"))
    os.utime(config, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(config)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)
    _, frames = bob.prompt(bob.new_session(), "hi")
    assert message_text(frames) == "from two"


def test_after_setup_authenticate_and_a_new_session_work_in_the_same_bob(spawn_bob, tmp_path, workdir, bob_env):
    bob = spawn_bob({"acp": {"auth": True}})
    bob.initialize()
    refused, _ = bob.call("session/new", {"cwd": str(workdir), "mcpServers": []})
    assert refused["error"]["code"] == -32000
    assert "setup" in refused["error"]["message"] or "setup" in json.dumps(refused["error"].get("data", {}))
    done = subprocess.run([*bob_command(), "setup", "--provider", "openai-compatible", "--base-url",
                           "http://127.0.0.1:9/v1", "--model", "local", "--no-check"], env=bob_env,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert bob.result("authenticate", {"methodId": "bob-model"}) == {}
    assert "sessionId" in bob.result("session/new", {"cwd": str(workdir), "mcpServers": []})


# ---- 11. /new and "always" ---------------------------------------------------------------------------------

@pytest.mark.parametrize("profile", ["default", "full"])
def test_new_forgets_always_only_where_configured_and_says_so(scripted, workdir, profile):
    turns = [{"replies": [bash("ls"), {"text": "listed"}]}, {"replies": [{"text": "x"}]},
             {"replies": [bash("rm -rf build"), {"text": "removed"}]}]
    config = {"permissions": {"newForgetsGrants": True}} if profile == "full" else {}
    bob, sid = scripted(turns, config=config)
    bob.prompt(sid, "list", answer=allow_always)
    _, frames = bob.prompt(sid, "/new")
    asked = []
    bob.prompt(sid, "clean", answer=lambda r: asked.append(r) or allow(r))
    if profile == "full":
        assert "“always” answer(s) of this session are forgotten too" in message_text(frames) and asked
    else:  # the default profile: the product document's /new, word for word, grants kept
        assert message_text(frames) == "🆕 New session: 4 message(s) forgotten." and not asked


# ---- 12. ops ----------------------------------------------------------------------------------------------

def test_sigusr1_writes_the_stacks_and_bob_goes_on(spawn_bob):
    bob = spawn_bob()
    bob.initialize()
    for _ in range(30):  # while the warm-up imports behind initialize too (a dump then crashed Bob once)
        os.kill(bob.pid, signal.SIGUSR1)
        time.sleep(0.005)
    bob.wait_stderr("Bob's threads (SIGUSR1)")
    bob.wait_stderr("thread bob-dispatcher")
    assert bob.result("authenticate", {"methodId": "x"}) == {}  # (and it exits 0: the fixture checks)
    assert bob.stderr().count("Bob's threads (SIGUSR1)") <= 3  # (at most one a second: 30 in 0.15 s)


def test_sigusr1_with_a_json_log_is_one_record_tying_each_thread_to_its_session(scripted):
    bob, sid = scripted([{"replies": [bash("sleep 30"), {"text": "never"}]}],
                        config={"permissions": {"mode": "allow-all"}, "log": {"format": "json"}})
    msg_id = bob.request_async("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
    while not any(u.get("status") == "in_progress" for u in updates(bob.frames, "tool_call_update")):
        bob.read_frame()
    for _ in range(50):
        os.kill(bob.pid, signal.SIGUSR1)
    bob.wait_stderr('"threads (SIGUSR1)"')
    bob.notify("session/cancel", {"sessionId": sid})
    bob.wait_response(msg_id)
    assert bob.close() == 0
    records = [json.loads(line) for line in bob.stderr().splitlines() if line.strip()]  # (every line JSON)
    dumps = [r for r in records if r.get("event") == "threads (SIGUSR1)"]
    assert 1 <= len(dumps) <= 2
    turn = [t for t in dumps[0]["threads"] if t.get("session") == sid]
    assert turn and turn[0]["turn"].endswith("(bash): running") and turn[0]["name"].startswith("bob-session/prompt #")
    assert any(t["name"] == "bob-dispatcher" and t["stack"] for t in dumps[0]["threads"])


def test_sigquit_ends_bob_as_sigterm_does(scripted):
    bob, sid = scripted([{"replies": [bash("sleep 30"), {"text": "never"}]}], config={"permissions": {"mode": "allow-all"}})
    msg_id = bob.request_async("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
    while not any(u.get("status") == "in_progress" for u in updates(bob.frames, "tool_call_update")):
        bob.read_frame()
    os.kill(bob.pid, signal.SIGQUIT)
    response, _ = bob.wait_response(msg_id)
    assert response["result"]["stopReason"] == "cancelled"
    assert bob.wait(5) == 0 and "SIGQUIT: shutting down" in bob.stderr()


def test_a_log_file_moved_away_is_opened_again_at_its_path(spawn_bob, tmp_path):
    path = tmp_path / "bob.log"
    bob = spawn_bob({"log": {"file": str(path)}})
    bob.initialize()
    deadline = time.monotonic() + 10
    while "[acp] initialize" not in (path.read_text() if path.exists() else "") and time.monotonic() < deadline:
        time.sleep(0.05)
    os.rename(path, tmp_path / "bob.log.1")  # logrotate
    bob.call("initialize", {"protocolVersion": 1, "clientInfo": {"name": "after-rotation"}})
    while "after-rotation" not in (path.read_text() if path.exists() else "") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "after-rotation" in path.read_text() and "after-rotation" not in (tmp_path / "bob.log.1").read_text()


def test_check_names_the_version_profile_capabilities_and_sandbox_and_has_a_json_form(tmp_path, bob_env):
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"profile": "full", "model": {"provider": "script",
                                                                                         "script": "/nonexistent"}}))
    nothing = {**bob_env, "BOB_ACP_NO_LANDLOCK": "1", "BOB_ACP_NO_NAMESPACES": "1"}  # (nothing confines)
    report = subprocess.run(bob_command() + ["--check", "--json"], env=nothing,
                            capture_output=True, text=True, timeout=60)
    data = json.loads(report.stdout)
    assert data["version"] == __version__ and data["profile"] == "full"
    assert data["agentCapabilities"]["loadSession"] is True and "fork" in data["agentCapabilities"]["sessionCapabilities"]
    assert data["sandbox"]["mode"] == "workspace" and data["sandbox"]["complete"] is False
    assert report.returncode == 1 and any("sandbox" in p for p in data["problems"])
    text = subprocess.run(bob_command() + ["--check"], env=nothing,
                          capture_output=True, text=True, timeout=60)
    assert text.returncode == 1 and f"bob-acp {__version__}, profile full" in text.stdout
    assert "advertised at initialize:" in text.stdout and "sandbox: workspace is incomplete here" in text.stdout


def test_the_sandbox_folders_go_with_bob_however_bob_ends(scripted, tmp_path):
    from bob_acp import sandbox as sandbox_module

    if sandbox_module.abi() < 1:
        pytest.skip("needs Landlock")
    bob, sid = scripted([{"replies": [bash('echo x > /tmp/mine; echo "owner=$BOB_ACP_OWNER"'), {"text": "ok"}]}],
                        config={"tools": {"sandbox": "workspace"}, "permissions": {"mode": "allow-all"}})
    _, frames = bob.prompt(sid, "go")
    import tempfile

    # This Bob's session's folder only (the user may run other Bobs meanwhile): the command names
    # its session's label, which the folder's name carries.
    label = next(line for line in "\n".join(outputs(frames)).splitlines() if line.startswith("owner="))
    folders = [f"bob-sandbox-{os.getuid()}-{label.rpartition(':')[2].strip()}"]
    assert os.path.isdir(os.path.join(tempfile.gettempdir(), folders[0]))
    bob.kill()
    deadline = time.monotonic() + 10
    while any(os.path.exists(os.path.join(tempfile.gettempdir(), f)) for f in folders) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(os.path.exists(os.path.join(tempfile.gettempdir(), f)) for f in folders)


# ---- the config file cannot wedge Bob --------------------------------------------------------------------

def test_a_config_file_swapped_for_a_fifo_or_grown_huge_never_holds_a_prompt_or_a_session(
        spawn_bob, tmp_path, workdir, bob_env):
    """Swapped for a FIFO nobody writes, the config file would hold every read of it: open
    sessions' prompts go on, a new session opens with the configuration read last and is told;
    a file grown to megabytes is refused unread, in one line."""
    turns = [{"replies": [{"text": "one"}]}, {"replies": [{"text": "two"}]}, {"replies": [{"text": "three"}]}]
    bob = spawn_bob(script_config(tmp_path, turns))
    bob.initialize()
    sid = bob.new_session()
    config = tmp_path / "config.yaml"
    config.unlink()
    os.mkfifo(config)
    _, frames = bob.prompt(sid, "first")
    assert message_text(frames) == "one"
    seen = len(bob.frames)
    response, frames = bob.call("session/new", {"cwd": str(workdir), "mcpServers": []})
    fresh = response["result"]["sessionId"]
    while not updates(bob.frames[seen:], "agent_message_chunk"):
        bob.read_frame()
    told = message_text(bob.frames[seen:])
    assert "not a regular file" in told and "is a FIFO" in told and "configuration as it was last read" in told, told
    _, frames = bob.prompt(fresh, "second")
    assert message_text(frames) == "one"  # (the last good configuration: the script model, from its start)
    config.unlink()
    with open(config, "wb") as handle:
        handle.truncate(200 * 1024 * 1024)  # (sparse: 200 MB that take no disk)
    response, _ = bob.call("session/new", {"cwd": str(workdir), "mcpServers": []})
    assert "result" in response
    bob.wait_stderr("more than a config file may have (256 KiB): not read")
    check = subprocess.run(bob_command() + ["--check"], env=bob_env, capture_output=True, text=True, timeout=60)
    lines = check.stderr.strip().splitlines()
    assert check.returncode == 2 and len(lines) == 1 and "not read" in lines[0], check.stderr
