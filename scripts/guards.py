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
          "inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)\n"
          "                except FileNotFoundError:",
          "inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)\n"
          "                except FileNotFoundError:",
          ["tests/test_undo_restore.py", "tests/test_e2e_undo_trust.py::test_undo_never_acts_through_a_folder_swapped_for_a_link"]),
    Guard("restore: what changed since is kept",
          "bob_acp/checkpoints/restore.py",
          "        if not same(now, expected):\n            outcome.kept.append(name)\n            continue",
          "        if False:\n            outcome.kept.append(name)\n            continue",
          ["tests/test_e2e_undo_trust.py::test_what_the_user_saves_while_the_model_answers_survives_undo"]),
    Guard("sandbox: Bob's secrets hidden",
          "bob_acp/sandbox/box.py",
          "        found = list(self._hide)\n",
          "        return []\n        found = list(self._hide)\n",
          ["tests/test_e2e_sandbox.py::test_bobs_secrets_and_the_users_credentials_are_invisible_to_sandboxed_commands"]),
    Guard("sandbox: what a command plants taken out",
          "bob_acp/sandbox/box.py",
          "        said = self._unsaid + [self._take_out(path) for path in sorted(self.snapshot() - before)]",
          "        said = self._unsaid + []",
          ["tests/test_e2e_sandbox.py::test_a_protected_file_a_command_creates_is_taken_out_and_said"]),
    Guard("sandbox: repositories inside read-only",
          "bob_acp/sandbox/box.py",
          "        self._nested = [path for root in self.roots for path in nested_repositories(root)]  # (the user's, now)",
          "        self._nested = []",
          ["tests/test_e2e_sandbox.py::test_a_repository_inside_the_project_is_read_only_like_the_roots"]),
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
    Guard("sandbox: a socket bound by a relative path covered",
          "bob_acp/sandbox/confine.py",
          "    if relative:\n        holders = socket_holders(",
          "    if False:\n        holders = socket_holders(",
          ["tests/test_e2e_sandbox.py::test_no_socket_outside_is_reachable_however_and_whenever_it_was_bound"]),
    Guard("sandbox: sockets of other network namespaces covered",
          "bob_acp/sandbox/confine.py",
          "    for name in [\"self\"] + [n for n in _listdir(\"/proc\") if n.isdigit()]:",
          "    for name in [\"self\"]:",
          ["tests/test_e2e_sandbox.py::test_no_socket_outside_is_reachable_however_and_whenever_it_was_bound"]),
    Guard("sandbox: a socket bound while a command runs covered",
          "bob_acp/sandbox/box.py",
          "                if now - seen and set(confine.socket_holders(now - seen, namespace)) != now - seen:",
          "            if False:",
          ["tests/test_e2e_sandbox.py::test_no_socket_outside_is_reachable_however_and_whenever_it_was_bound"]),
    Guard("sandbox: a job's plant between turns taken out at once",
          "bob_acp/sandbox/box.py",
          "            if self._command_runs or not self.jobs_after or self.last_look is None:\n                return\n"
          "            new = self.snapshot() - self.last_look",
          "            if True:\n                return\n"
          "            new = self.snapshot() - self.last_look",
          ["tests/test_e2e_sandbox.py::test_what_a_job_plants_between_turns_is_taken_out_at_once_and_its_sandbox_ends_with_it"]),
    Guard("sandbox: what Bob's own file tools create is not a plant",
          "bob_acp/tools/files.py",
          "            if self.commits and ctx.sandbox is not None:",
          "            if False:",
          ["tests/test_e2e_sandbox.py::test_what_a_job_plants_between_turns_is_taken_out_at_once_and_its_sandbox_ends_with_it"]),
    Guard("sandbox: a sandbox kept for a job ends when the job does",
          "bob_acp/sandbox/box.py",
          "                self._end_when_jobs_end()\n",
          "                pass\n",
          ["tests/test_e2e_sandbox.py::test_what_a_job_plants_between_turns_is_taken_out_at_once_and_its_sandbox_ends_with_it"]),
    Guard("sandbox: a repository made inside by a command taken out",
          "bob_acp/sandbox/box.py",
          "            said += [self._take_out(path) for path in sorted(made)]",
          "            said += []",
          ["tests/test_e2e_sandbox.py::test_a_repository_a_command_makes_inside_the_project_is_taken_out_at_the_turns_end"]),
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
          "                if self._steered(conv, conv.steering.take_or_close()):",
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
    Guard("mcp sse: no message posted to another host",
          "bob_acp/mcp/sse.py",
          "        if _origin(target) != _origin(self.url):",
          "        if False:",
          ["tests/test_e2e_mcp.py::test_an_sse_server_naming_another_host_is_refused_and_nothing_is_posted_there"]),
]


def check(guard: Guard) -> bool:
    """Whether the guard's tests fail once it is taken away (True: they notice)."""
    path = os.path.join(ROOT, guard.path)
    with open(path, encoding="utf-8") as handle:
        source = handle.read()
    if source.count(guard.line) != 1:
        print(f"?  {guard.name}: its line is not in {guard.path} exactly once (moved? update scripts/guards.py)")
        return False
    try:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(source.replace(guard.line, guard.broken))
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:randomly", "-p", "no:cacheprovider",
                              *guard.tests], cwd=ROOT, capture_output=True, text=True, timeout=900)
    finally:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(source)
    noticed = run.returncode != 0
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
