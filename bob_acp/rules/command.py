"""`bob-acp rules`: a project's rules, listed, added and removed from a terminal.

    bob-acp rules                          this folder's project: its rules, numbered
    bob-acp rules --all                    every project's
    bob-acp rules add allow bash npm test  always `npm test …` here (never: refused, in every mode)
    bob-acp rules add never write_file src
    bob-acp rules remove 2
    --project PATH                         another project than this folder
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys

from bob_acp.rules import ALLOW, NEVER, Rule
from bob_acp.rules.store import RulesError, Store, listing, parse

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bob-acp rules", description="A project's rules: what Bob does without "
                                     "asking (allow) and never does (never), kept in Bob's own state folder.")
    parser.add_argument("--project", metavar="PATH", help="the project (default: this folder)")
    parser.add_argument("--all", action="store_true", help="every project's rules")
    parser.add_argument("action", nargs="?", choices=("list", "add", "remove"), default="list")
    parser.add_argument("words", nargs="*", help="add: allow|never, a tool, then the command's first words (bash) "
                                                 "or a folder of the project; remove: the rule's number")
    return parser.parse_args(argv)


def main(argv: list[str], enabled: bool | str = True) -> int:
    """`enabled`: whether Bob's configuration applies the rules (permissions.projectRules), or
    why that configuration cannot be read."""
    args = parse_args(argv)
    store = Store()
    project = os.path.realpath(args.project or os.getcwd())
    out = sys.stdout
    try:
        if args.all:
            found = store.everything()
            if not found:
                out.write("no project has rules yet\n")
            for kept in found:
                out.write(f"{kept.project}:\n" + "\n".join(listing(kept)) + "\n")
        elif args.action == "list":
            kept = store.load(project)
            if not kept.rules and not kept.problems:
                out.write(f"{project}: no rules yet (answer a question with \"always in this project\" or "
                          "\"never in this project\", or `bob-acp rules add …`)\n")
            else:
                out.write(f"{project}:\n" + "\n".join(listing(kept)) + "\n")
        elif args.action == "add":
            rule = _rule(args.words)
            added = store.add(project, rule)
            out.write(f"{project}: {'kept' if added else 'kept already'}: {rule.shown()}\n")
        else:
            if len(args.words) != 1 or not args.words[0].isdigit():
                raise RulesError("remove takes the number of a rule, as `bob-acp rules` lists them")
            rule = store.remove(project, int(args.words[0]))
            out.write(f"{project}: removed: {rule.shown()}\n")
    except RulesError as exc:
        sys.stderr.write(f"bob-acp rules: {exc}\n")
        return EXIT_USAGE
    except OSError as exc:
        sys.stderr.write(f"bob-acp rules: {exc.strerror or exc}: {getattr(exc, 'filename', '') or store.folder}\n")
        return EXIT_FAILED
    if isinstance(enabled, str):
        sys.stderr.write(f"bob-acp rules: note: Bob's configuration cannot be read ({enabled}): whether the rules "
                         "apply is its to say\n")
    elif not enabled:
        sys.stderr.write("bob-acp rules: note: the rules apply only with permissions.projectRules: true in Bob's "
                         "config (or --profile full, as editors and bob-acp chat start Bob)\n")
    return EXIT_OK


def _rule(words: list[str]) -> Rule:
    """The rule `add` names, read as its file's entry would be (one parser, one set of words)."""
    if len(words) < 3 or words[0] not in (ALLOW, NEVER):
        raise RulesError("add takes allow or never, a tool, then the command's first words (bash) or a folder: "
                         "bob-acp rules add allow bash npm test")
    decision, tool, rest = words[0], words[1], words[2:]
    if tool == "bash":
        entry = {decision: tool, "command": shlex.join(rest)}
    else:  # (one folder: more words than one are none, and parse says what a folder rule needs)
        entry = {decision: tool, "folder": rest[0] if len(rest) == 1 else ""}
    rule = parse(entry)
    if isinstance(rule, str):
        raise RulesError(rule)
    return rule
