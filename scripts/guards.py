"""Does the suite notice when a guard is taken away? Each entry below breaks one guard of Bob's
on purpose (one line of its source replaced), runs the tests that stand for it, and expects them
to fail; the source is put back whatever happens. A guard whose tests still pass is reported:
its tests do not test it.

    python scripts/guards.py            # every guard
    python scripts/guards.py restore    # those whose name holds "restore"
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass
class Guard:
    name: str
    path: str  # the source file, relative to the repository
    line: str  # the text that makes the guard (exactly once in the file)
    broken: str  # what it becomes: the guard gone
    tests: list[str]  # pytest node ids or -k expressions that must fail then


GUARDS = [
    Guard("restore: no link followed on the way",
          "bob_acp/files/beneath.py",
          "inner = os.open(part, PASSAGE | os.O_NOFOLLOW, dir_fd=fd)\n"
          "                except FileNotFoundError:",
          "inner = os.open(part, PASSAGE, dir_fd=fd)\n"
          "                except FileNotFoundError:",
          ["tests/test_undo_restore.py", "tests/test_e2e_undo_trust.py::test_undo_never_acts_through_a_folder_swapped_for_a_link"]),
    Guard("restore: what changed since is kept",
          "bob_acp/checkpoints/restore.py",
          "        elif not same(now, expected):\n            outcome.kept.append(name)\n            continue",
          "        elif False:\n            outcome.kept.append(name)\n            continue",
          ["tests/test_e2e_undo_trust.py::test_what_the_user_saves_while_the_model_answers_survives_undo"]),
    Guard("sandbox: Bob's secrets hidden",
          "bob_acp/sandbox/box.py",
          "        found = [config] + [self._folder_of(path) for path in self._hide]\n",
          "        return [], []\n",
          ["tests/test_e2e_sandbox.py::test_bobs_secrets_and_the_users_credentials_are_invisible_to_sandboxed_commands"]),
    Guard("sandbox: the names at a root reserved while it lives",
          "bob_acp/sandbox/box.py",
          "        self._unreserved = []\n        self._reserve()",
          "        self._unreserved = []",
          ["tests/test_e2e_sandbox_prevent.py::"
           "test_no_command_or_job_creates_a_protected_name_at_a_root_however_often_it_tries"]),
    Guard("sandbox: a placeholder someone wrote to is theirs",
          "bob_acp/sandbox/reserve.py",
          "                elif stat.S_ISREG(info.st_mode) and info.st_size == 0:",
          "                elif stat.S_ISREG(info.st_mode):",
          ["tests/test_e2e_sandbox_prevent.py::"
           "test_no_command_or_job_creates_a_protected_name_at_a_root_however_often_it_tries"]),
    Guard("sandbox: the placeholders of a killed Bob swept",
          "bob_acp/sandbox/reserve.py",
          "    \"\"\"The ledgers of Bobs no longer running: their placeholders released, the ledgers gone.\"\"\"\n",
          "    \"\"\"The ledgers of Bobs no longer running: their placeholders released, the ledgers gone.\"\"\"\n"
          "    return\n",
          ["tests/test_e2e_sandbox_prevent.py::test_the_placeholders_of_a_killed_bob_go_at_the_next_sandboxs_start"]),
    Guard("sandbox: repositories inside read-only",
          "bob_acp/sandbox/box.py",
          "        self._nested = [path for root in self.roots for path in nested_repositories(root)]  # (the user's, now)",
          "        self._nested = []",
          ["tests/test_e2e_sandbox.py::test_a_repository_inside_the_project_is_read_only_like_the_roots"]),
    Guard("sandbox: no UNIX socket can be made (seccomp)",
          "bob_acp/sandbox/confine.py",
          "    if not unix_sockets:\n        program += [(LD_ABS, 0, 0, 0), (JEQ, 0, 3, calls[\"socket\"])",
          "    if False:\n        program += [(LD_ABS, 0, 0, 0), (JEQ, 0, 3, calls[\"socket\"])",
          ["tests/test_e2e_sandbox.py::test_no_socket_outside_is_reachable_however_and_whenever_it_was_bound"]),
    Guard("sandbox: no set-ID bit can be set (seccomp)",
          "bob_acp/sandbox/confine.py",
          "    for name, index in MODE_ARG.items():",
          "    for name, index in {}.items():",
          ["tests/test_e2e_sandbox_prevent.py::test_no_command_can_make_a_set_id_file"]),
    Guard("sandbox: a hidden file hidden by its whole folder",
          "bob_acp/sandbox/box.py",
          "        return hidden, [os.path.join(config, \"skills\")]",
          "        return [p for p in hidden if p != config] + [os.path.join(config, \"openai.key\")], []",
          ["tests/test_e2e_sandbox_prevent.py::test_a_hidden_key_replaced_by_a_rename_stays_hidden_from_a_running_job"]),
    Guard("sandbox: turning the network off ends the jobs that have it",
          "bob_acp/sandbox/box.py",
          "            closed = self._host_pid is not None and (not kept if on else self._host_network)",
          "            closed = self._host_pid is not None and (not kept if on else False)",
          ["tests/test_e2e_switches.py::test_turning_the_network_off_ends_the_jobs_that_have_it"]),
    Guard("sandbox: a linked AGENTS.md's target read-only",
          "bob_acp/sandbox/box.py",
          "                    found.append(os.path.realpath(path))  # (AGENTS.md -> CLAUDE.md: CLAUDE.md read-only too)",
          "                    pass",
          ["tests/test_e2e_sandbox_prevent.py::test_a_linked_agents_md_has_its_target_read_only_or_its_commands_asked"]),
    Guard("sandbox: a link it cannot hold makes it ask",
          "bob_acp/sandbox/box.py",
          "                if os.path.islink(path) and not self._inside_root(os.path.realpath(path)):",
          "                if False:",
          ["tests/test_e2e_sandbox_prevent.py::test_a_linked_agents_md_has_its_target_read_only_or_its_commands_asked"]),
    Guard("sandbox: a name a command made below a root taken out",
          "bob_acp/sandbox/plants.py",
          "            said = [self._take_out(path, stamp) for path in made]",
          "            said = []",
          ["tests/test_e2e_sandbox.py::test_a_repository_a_command_makes_inside_the_project_is_taken_out_when_the_command_ends"]),
    Guard("sandbox: a planted link taken out as the link, never its target",
          "bob_acp/sandbox/plants.py",
          "            move_beneath(root, relative, kept)",
          "            move_beneath(root, os.path.relpath(os.path.realpath(path), root), kept)",
          ["tests/test_e2e_sandbox.py::test_a_planted_name_that_is_a_link_is_taken_out_as_the_link"]),
    Guard("sandbox: an AGENTS.md a job may have written is said, not read",
          "bob_acp/acp/opener.py",
          "        for path in system_prompt.doubted_agents(ws):",
          "        for path in []:",
          ["tests/test_e2e_sandbox_prevent.py::"
           "test_an_agents_md_a_job_writes_below_a_root_is_doubted_never_moved_and_not_read"]),
    Guard("sandbox: what Bob's own file tools write is not doubted",
          "bob_acp/tools/files.py",
          "            if self.commits and ctx.sandbox is not None:",
          "            if False:",
          ["tests/test_e2e_sandbox_prevent.py::test_an_agents_md_bobs_own_write_makes_while_a_job_runs_is_bobs"]),
    Guard("sandbox: a sandbox kept for a job ends when the job does",
          "bob_acp/sandbox/box.py",
          "                    if self.jobs_running():\n                        continue",
          "                    if True:\n                        continue",
          ["tests/test_e2e_sandbox_prevent.py::"
           "test_no_command_or_job_creates_a_protected_name_at_a_root_however_often_it_tries"]),
    Guard("sandbox: an idle sandbox ends with its turn",
          "bob_acp/sandbox/box.py",
          "            if self.jobs_running():\n                self._resting = True",
          "            if True:\n                self._resting = True",
          ["tests/test_e2e_sandbox.py::test_an_idle_sessions_sandbox_costs_no_process_and_no_descriptor"]),
    Guard("sandbox: without Landlock, a read-only view",
          "bob_acp/sandbox/launcher.py",
          "        left = confine.read_only_view(options[\"write\"], own + have[\"private_dirs\"])",
          "        left = []",
          ["tests/test_e2e_sandbox.py::test_without_landlock_the_namespace_confines_writes"]),
    Guard("sandbox: one memory bound for a session's commands",
          "bob_acp/sandbox/launcher.py",
          "            join_cgroup(options[\"cgroup\"])  # (before the fork: the program is counted with the rest)",
          "            pass",
          ["tests/test_e2e_sandbox.py::test_a_sessions_commands_share_one_memory_bound"]),
    Guard("--check proves the sandbox can write the project",
          "bob_acp/check.py",
          "        stopped = sandbox.trial(cfg, Workspace(os.getcwd())) if covered.confines else None",
          "        stopped = None",
          ["tests/test_e2e_sandbox.py::test_check_never_calls_a_sandbox_complete_that_cannot_write_the_project"]),
    Guard("undo: an undo point whose copies are gone is said once and dropped",
          "bob_acp/checkpoints/session.py",
          "        if not missing:\n            return \"\"\n        self.records.remove(record)",
          "        if True:\n            return \"\"\n        self.records.remove(record)",
          ["tests/test_e2e_undo_trust.py::test_an_undo_point_whose_copies_are_gone_is_said_once_and_dropped"]),
    Guard("undo: a name that is not UTF-8 kept exactly in the session file",
          "bob_acp/checkpoints/records.py",
          "    exact = item.get(key + \"Bytes\")",
          "    exact = None",
          ["tests/test_e2e_undo_trust.py::test_a_name_that_is_not_utf8_keeps_its_undo_point_across_a_restart"]),
    Guard("undo: a restore left half-done is said to the folder's new sessions",
          "bob_acp/acp/opener.py",
          "        conv.notices += conv.checkpoints.others_unfinished()",
          "        pass",
          ["tests/test_e2e_undo_trust.py::test_a_bob_killed_during_undo_says_so_at_load_and_the_next_undo_finishes"]),
    Guard("undo: a restore goes through a folder by its search permission alone",
          "bob_acp/files/beneath.py",
          "PASSAGE = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC",
          "PASSAGE = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC",
          ["tests/test_undo_restore.py::test_a_restore_as_an_ordinary_user_reaches_beneath_a_folder_it_may_not_read"]),
    Guard("undo: what /undo replaced stays redo-able after later prompts",
          "bob_acp/checkpoints/session.py",
          "        for record in self.records:\n            if record.undone:\n                record.later = True",
          "        self.records = [r for r in self.records if not r.undone]",
          ["tests/test_e2e_undo_trust.py::test_a_save_during_a_command_is_never_lost_to_undo_and_only_it_is_hedged"]),
    Guard("undo: a steered turn is taken out whole",
          "bob_acp/engine/turn.py",
          "            if conv.checkpoints.end_turn(question) is not None:",
          "            if conv.checkpoints.end_turn(conv.messages[-1]) is not None:",
          ["tests/test_e2e_steering.py::test_undo_takes_a_steered_turn_out_whole"]),
    Guard("undo: a change to an AGENTS.md is said in the turn",
          "bob_acp/checkpoints/look.py",
          "            if name == \"AGENTS.md\":  # (never written by /undo: a change to it is said, not recorded)",
          "            if False:",
          ["tests/test_e2e_undo_trust.py::test_a_command_that_deletes_agents_md_says_so_in_the_turn"]),
    Guard("checkpoints: the first look starts from the store's last",
          "bob_acp/checkpoints/store.py",
          "                last = self._kept_look()",
          "                last = {}",
          ["tests/test_checkpoint_look.py::test_the_first_look_lasts_across_processes_and_a_cut_one_is_continued"]),
    Guard("checkpoints: a repository inside is never entered",
          "bob_acp/checkpoints/look.py",
          "        os.stat(\".git\", dir_fd=inner, follow_symlinks=False)\n",
          "        raise FileNotFoundError()\n",
          ["tests/test_e2e_undo_trust.py::test_a_repository_planted_inside_runs_nothing_when_a_command_changes_it"]),
    Guard("undo: a turn that left a job running names what changed since",
          "bob_acp/checkpoints/session.py",
          "        if record.jobs:\n            said.append(self._since_jobs(record))",
          "        if False:\n            said.append(self._since_jobs(record))",
          ["tests/test_e2e_undo_trust.py::test_undo_of_a_turn_that_left_a_job_running_names_what_changed_since"]),
    Guard("undo: with the editor's files, the buffer is what is put back",
          "bob_acp/checkpoints/restore.py",
          "        buffer = buffers.get(os.path.join(change.root, change.path))\n        if buffer is not None:",
          "        buffer = buffers.get(os.path.join(change.root, change.path))\n        if False:",
          ["tests/test_e2e_undo_trust.py::test_with_the_editors_files_the_buffer_is_what_undo_puts_back"]),
    Guard("undo: an edit made through the editor is recorded as the editor had and was given it",
          "bob_acp/checkpoints/session.py",
          "        if given is not None and not (after is not None and after.get(\"type\") == \"file\"",
          "        if False and not (after is not None and after.get(\"type\") == \"file\"",
          ["tests/test_e2e_undo_trust.py::test_with_the_editors_files_the_buffer_is_what_undo_puts_back"]),
    Guard("undo: an unrecorded latest turn is said",
          "bob_acp/checkpoints/session.py",
          "        if notes or missed:\n            question[UNRECORDED] = True",
          "        if False:\n            question[UNRECORDED] = True",
          ["tests/test_e2e_undo_trust.py::test_undo_never_skips_an_unrecorded_latest_turn_without_saying_so"]),
    Guard("checkpoints: a file is read without waiting or following a link",
          "bob_acp/checkpoints/look.py",
          "    own = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY, dir_fd=fd)",
          "    own = os.open(name, os.O_RDONLY | os.O_CLOEXEC, dir_fd=fd)",
          ["tests/test_checkpoint_look.py::test_a_fifo_a_link_and_a_repository_inside_are_never_read_entered_or_run"]),
    Guard("checkpoints: HEAD read as a small regular file beneath .git",
          "bob_acp/checkpoints/head.py",
          "        with Place(root, relative) as place:\n            return place.read(MAX_HEAD) if place.lstat() is not None else None",
          "        with open(os.path.join(root, relative), \"rb\") as handle:\n            return handle.read(MAX_HEAD)",
          ["tests/test_e2e_undo_trust.py::test_a_planted_head_never_wedges_a_turn"]),
    Guard("a command grant covers that command alone",
          "bob_acp/tools/bash.py",
          "        return f\"bash{unconfined}: \" + _BLANKS.sub(\" \", command).strip(\" \")",
          "        return \"bash\"",
          ["tests/test_e2e_history.py::test_allow_always_per_command"]),
    Guard("the configuration read again when its file changed",
          "bob_acp/acp/runtime.py",
          "            if signature != self._tried and self._reading is None:",
          "            if False:",
          ["tests/test_e2e_machine_faults.py::test_a_fixed_config_opens_a_working_session_in_the_same_bob"]),
    Guard("notices only to clients that advertise them",
          "bob_acp/acp/updates.py",
          "    notices = channel.capabilities.notices\n",
          "    notices = True\n",
          ["tests/test_e2e_machine_faults.py::"
           "test_a_failed_save_is_in_the_first_turn_however_soon_it_comes_and_saved_again_has_its_own_line"]),
    Guard("config: only a regular file is read",
          "bob_acp/config/__init__.py",
          "        with open_regular(path) as handle:",
          "        with open(path, \"rb\") as handle:",
          ["tests/test_e2e_machine_faults.py::"
           "test_a_config_file_swapped_for_a_fifo_or_grown_huge_never_holds_a_prompt_or_a_session"]),
    Guard("steering: a steer as the turn ends keeps it going",
          "bob_acp/engine/turn.py",
          "                if self._steered(conv, sink, conv.steering.take_or_close()):",
          "                if conv.steering.close() and False:",
          ["tests/test_e2e_steering.py::test_a_steer_while_the_model_answers_keeps_the_turn_going"]),
    Guard("steering: nothing joins a cancelled turn",
          "bob_acp/engine/steering.py",
          "            if self._cancel is None or self._cancel.is_set():",
          "            if self._cancel is None:",
          ["tests/test_e2e_steering.py::test_cancel_still_ends_a_steered_turn_and_what_it_was_told_is_kept"]),
    Guard("elicitation only to clients that show forms",
          "bob_acp/acp/updates.py",
          "        if self.channel.capabilities.forms:\n            field: dict[str, Any]",
          "        if True:\n            field: dict[str, Any]",
          ["tests/test_e2e_ask_user.py::test_without_forms_options_are_a_choice_and_a_typed_answer_cannot_be_had"]),
    Guard("logout: only the file setup wrote, never through a link",
          "bob_acp/config/written.py",
          "        if not stat.S_ISREG(info.st_mode) or (info.st_dev, info.st_ino) != (record.get(\"dev\"), record.get(\"ino\")):",
          "        if False:",
          ["tests/test_e2e_logout.py::test_a_link_put_in_the_stored_keys_place_is_not_followed"]),
    Guard("http: an origin read as the connection is made (a backslash, user information refused)",
          "bob_acp/providers/httpio.py",
          "    if connects.auth is not None or standard.username is not None or standard.password is not None:",
          "    if False:",
          ["tests/test_e2e_mcp.py::test_an_endpoint_the_parsers_could_read_two_ways_is_refused"]),
    Guard("http: no redirect followed to another origin (the key and the conversation would go there)",
          "bob_acp/providers/httpio.py",
          "            return target if same_origin(resp.url, urljoin(resp.url, target)) else None",
          "            return target",
          ["tests/test_e2e_http_model.py::test_a_redirect_to_another_origin_is_not_followed_and_said"]),
    Guard("mcp sse: a failed start leaves no thread behind (the poster ends with the connection)",
          "bob_acp/mcp/sse.py",
          "        self._outbox.put(None)  # (the poster ends)",
          "        pass",
          ["tests/test_e2e_mcp.py::test_sse_servers_that_fail_to_start_leave_nothing_behind"]),
    Guard("mcp sse: a message POST never follows a redirect",
          "bob_acp/mcp/sse.py",
          "                                       allow_redirects=False, headers={**self._headers, \"Content-Type\": \"application/json\"})",
          "                                       allow_redirects=True, headers={**self._headers, \"Content-Type\": \"application/json\"})",
          ["tests/test_e2e_mcp.py::test_a_message_post_never_follows_a_redirect"]),
    Guard("mcp sse: a message endpoint on another origin is refused",
          "bob_acp/mcp/sse.py",
          "        if not httpio.same_origin(target, self.url):",
          "        if False:",
          ["tests/test_e2e_mcp.py::test_an_sse_server_naming_another_host_is_refused_and_nothing_is_posted_there"]),
    Guard("chat: a line that only starts with a slash steers (a command waits)",
          "bob_acp/chat/client.py",
          "        return word in CHAT_COMMANDS or (word.startswith(\"/\") and word[1:] in {",
          "        return word.startswith(\"/\") or (word.startswith(\"/\") and word[1:] in {",
          ["tests/test_e2e_steering.py::test_in_the_chat_a_line_that_only_starts_with_a_slash_steers",
           "tests/test_e2e_steering.py::test_in_the_chat_a_line_typed_during_a_turn_steers_it_and_says_so"]),
    Guard("logout: signed out with a baseUrl too",
          "bob_acp/acp/server.py",
          "        self.signed_out = bool(forgotten) and not self._keyed(self.reader.current)",
          "        self.signed_out = False",
          ["tests/test_e2e_logout.py::test_with_a_base_url_logout_signs_out_and_no_request_carries_the_key"]),
    Guard("steering: idle, a steer starts a turn",
          "bob_acp/acp/turns.py",
          "        if idle == \"promptRequired\":",
          "        if True:",
          ["tests/test_e2e_steering.py::test_idle_a_steer_starts_a_turn_unless_the_client_asks_for_a_prompt"]),
    Guard("steering: the inbox is bounded",
          "bob_acp/engine/steering.py",
          "            if len(self._waiting) >= MAX_WAITING or held + size > MAX_WAITING_BYTES:",
          "            if False:",
          ["tests/test_e2e_steering.py::test_the_inbox_of_a_running_turn_is_bounded"]),
    Guard("ask_user: a client that fails forms is asked with a choice",
          "bob_acp/acp/updates.py",
          "            self.channel.capabilities.forms = False\n            return None",
          "            return Answer(\"error: the editor could not ask the question\", True)",
          ["tests/test_e2e_ask_user.py::test_a_client_that_fails_the_form_is_asked_with_a_choice_instead"]),
    Guard("signals: a handler only notes its signal",
          "bob_acp/cli.py",
          "    def noted(signum: int, _frame: object) -> None:\n        signals.append(signum)",
          "    def noted(signum: int, _frame: object) -> None:\n        signals.append(signum)\n"
          "        log.info(f\"[acp] {signal.Signals(signum).name}: shutting down\")",
          ["tests/test_e2e_transport.py::test_a_burst_of_signals_never_wedges_bob"]),
    Guard("mcp http: a request's POST never follows a redirect",
          "bob_acp/mcp/http.py",
          "                                       timeout=(10, self._timeout), allow_redirects=False)",
          "                                       timeout=(10, self._timeout), allow_redirects=True)",
          ["tests/test_e2e_security.py::test_a_redirect_is_not_followed"]),
    Guard("mcp http: a request given up ends its POST",
          "bob_acp/mcp/http.py",
          "            response = self._exchanges.pop(msg_id, None)\n        if response is not None:\n"
          "            httpio.shutdown(response)",
          "            response = self._exchanges.pop(msg_id, None)\n        if False:\n"
          "            httpio.shutdown(response)",
          ["tests/test_mcp_transports.py::test_a_request_given_up_ends_its_post_though_the_server_keeps_its_stream_open"]),
    Guard("mcp: a request past mcp.timeout tells the server",
          "bob_acp/mcp/connection.py",
          "            self.cancel_notice(sent.id, f\"no answer within {timeout:g} s\")",
          "            pass",
          ["tests/test_mcp_transports.py::test_a_request_past_its_timeout_tells_the_server_without_a_timer_thread"]),
    Guard("chat: control keys never reach the model",
          "bob_acp/chat/ask.py",
          "    return re.sub(NOT_TEXT, \"\", text)",
          "    return text",
          ["tests/test_e2e_steering.py::test_in_the_chat_without_steering_a_line_typed_during_a_turn_is_the_next_prompt"]),
    Guard("chat: what is typed during a turn is not echoed into its output",
          "bob_acp/chat/ask.py",
          "            quiet[3] &= ~termios.ECHO",
          "            pass",
          ["tests/test_e2e_steering.py::test_in_the_chat_without_steering_a_line_typed_during_a_turn_is_the_next_prompt",
           "tests/test_e2e_steering.py::test_in_the_chat_a_line_typed_during_a_turn_steers_it_and_says_so"]),
    Guard("chat: /help lists only the commands that work",
          "bob_acp/chat/client.py",
          "        if self.can_list:",
          "        if True:",
          ["tests/test_chat_newcomer.py::test_the_chat_starts_bob_as_editors_do_and_help_lists_only_what_works"]),
    Guard("chat: its agent runs with the full profile unless one is named",
          "bob_acp/chat/__init__.py",
          "    profile = args.profile or (None if file_profile(config, env) else \"full\")",
          "    profile = args.profile",
          ["tests/test_chat_newcomer.py::test_the_chat_starts_bob_as_editors_do_and_help_lists_only_what_works"]),
]


def check(guard: Guard) -> bool:
    """Whether the guard's tests fail once it is taken away (True: they notice). The break must
    compile, and only a test failure counts (pytest's status 1: not an error collecting them)."""
    path = os.path.join(ROOT, guard.path)
    with open(path, encoding="utf-8") as handle:
        source = handle.read()
    if source.count(guard.line) != 1:
        print(f"?  {guard.name}: its line is not in {guard.path} exactly once (moved? update scripts/guards.py)")
        return False
    try:
        compile(source.replace(guard.line, guard.broken), path, "exec")
    except SyntaxError as exc:
        print(f"?  {guard.name}: its break does not compile ({exc}): update scripts/guards.py")
        return False
    try:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(source.replace(guard.line, guard.broken))
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:randomly", "-p", "no:cacheprovider",
                              *guard.tests], cwd=ROOT, capture_output=True, text=True, timeout=900)
    finally:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(source)
    noticed = run.returncode == 1
    print(f"{'ok' if noticed else 'NOT NOTICED'}  {guard.name}")
    return noticed


def main(argv: list[str]) -> int:
    wanted = [g for g in GUARDS if not argv or any(word in g.name for word in argv)]
    missed = [g.name for g in wanted if not check(g)]
    if missed:
        print(f"{len(missed)} guard(s) whose tests do not notice their removal: {', '.join(missed)}")
        return 1
    print(f"all {len(wanted)} guard(s) noticed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
