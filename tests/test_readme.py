"""The README a newcomer reads: short enough to be read, its links lead somewhere, and every
`bob-acp` command in it is one Bob takes as written (each option known to that command)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
MAX_WORDS = 2000


def text() -> str:
    with open(README, encoding="utf-8") as handle:
        return handle.read()


def test_the_readme_is_at_most_two_thousand_words():
    assert len(text().split()) <= MAX_WORDS


def _anchors(path: str) -> set[str]:
    """GitHub's anchors of a Markdown file's headings."""
    with open(path, encoding="utf-8") as handle:
        headings = [line.lstrip("#").strip() for line in handle if line.startswith("#")]
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


def test_every_link_of_the_readme_leads_to_a_file_and_heading_that_exist():
    links = re.findall(r"\]\(([^)#\s]+)?(?:#([^)\s]+))?\)", text())
    assert links
    for target, anchor in links:
        if target.startswith(("http://", "https://")):
            continue
        path = os.path.join(ROOT, target) if target else README
        assert os.path.exists(path), target
        if anchor:
            assert anchor in _anchors(path), f"{target}#{anchor}"


def _commands() -> list[list[str]]:
    """Each `bob-acp …` command the README shows (in code blocks and in backticks)."""
    found = []
    for line in re.findall(r"`([^`]*bob-acp[^`]*)`", text()) + re.findall(r"^(?:.*&& )?(bob-acp[^\n#]*)", text(), re.M):
        start = line.find("bob-acp")
        words = line[start:].replace("…", "").split()
        if words and words[0] == "bob-acp":
            found.append(words)
    return found


def test_every_bob_acp_command_in_the_readme_is_one_bob_takes():
    commands = _commands()
    assert any(c[:2] == ["bob-acp", "setup"] for c in commands) and any(c[:2] == ["bob-acp", "chat"] for c in commands)
    helps: dict[str, str] = {}
    for words in commands:
        sub = words[1] if len(words) > 1 and words[1] in ("setup", "chat") else ""
        if sub not in helps:
            args = [sys.executable, "-m", "bob_acp", *([sub] if sub else []), "--help"]
            helps[sub] = subprocess.run(args, capture_output=True, text=True, timeout=60, cwd=ROOT).stdout
        for word in words[1:]:
            if word.startswith("--"):
                assert word.split("=")[0] in helps[sub], (words, word)


def test_every_option_the_readme_names_is_an_option_of_bob():
    """`--yes`, `--continue`, `--profile default`…: each an option of bob-acp, its chat or its setup."""
    named = {m.split()[0].split("=")[0] for m in re.findall(r"`(--[a-z][^`]*)`", text())}
    assert "--yes" in named and "--profile" in named
    helps = "".join(subprocess.run([sys.executable, "-m", "bob_acp", *sub, "--help"], capture_output=True, text=True,
                                   timeout=60, cwd=ROOT).stdout for sub in ([], ["chat"], ["setup"]))
    assert [option for option in sorted(named) if option not in helps] == []
