"""Skills: discovery order, validation, the catalogue, /skill rewriting, advertised commands."""

import json
import os

import pytest
import yaml

from bob_acp import config
from bob_acp.context import skills


def make_skill(root, folder, name=None, description="Does a thing.", body="Steps.\n", raw=None, extra_files=()):
    path = root / folder
    path.mkdir(parents=True, exist_ok=True)
    text = raw if raw is not None else f"---\nname: {name or folder}\ndescription: {description}\n---\n{body}"
    (path / "SKILL.md").write_text(text)
    for extra in extra_files:
        (path / extra).parent.mkdir(parents=True, exist_ok=True)
        (path / extra).write_text("#!/bin/sh\n")
    return path


@pytest.fixture
def places(tmp_path):
    home = tmp_path / "xdg"
    cwd = tmp_path / "project"
    extra = tmp_path / "extra"
    for p in (home, cwd, extra):
        p.mkdir()
    cfg_path = tmp_path / "config.yaml"
    cfg_path.write_text(yaml.safe_dump({"skills": {"dirs": [str(extra)]}}))
    env = {"XDG_CONFIG_HOME": str(home)}
    return {"user": home / "bob" / "skills", "project": cwd / ".bob" / "skills", "extra": extra,
            "discover": lambda: skills.discover(str(cwd), config.load(str(cfg_path), env={}), env)}


def test_shipped_skills_are_found_and_valid(places):
    catalog = places["discover"]()
    assert list(catalog.skills) == ["bg-jobs", "greetings", "vulcan-salute"] and catalog.warnings == []
    assert catalog.skills["greetings"].description == "Greet somebody with a festive message."
    assert catalog.skills["vulcan-salute"].description == "Send a vulcan salute to somebody."
    job = catalog.skills["bg-jobs"].files
    assert len(job) == 1 and job[0].endswith("bg-jobs/scripts/job") and os.access(job[0], os.X_OK)


def test_shipped_skills_are_found_from_a_source_checkout_that_was_never_installed(tmp_path):
    """Run from the checkout itself (`python -c` there imports the checkout's package first),
    without the install's `bob_acp.shipped_skills`: the skills are the checkout's skills/ folder.
    (In a fresh interpreter: the suite may be testing an installed copy of Bob.)"""
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    probe = ("import json, sys\n"
             "sys.modules['bob_acp.shipped_skills'] = None  # (importing it fails, as in a checkout never installed)\n"
             "import bob_acp\n"
             "from bob_acp import config\n"
             "from bob_acp.context import skills\n"
             "found = skills.discover(sys.argv[1], config.defaults(), {'XDG_CONFIG_HOME': sys.argv[1]})\n"
             "print(json.dumps([bob_acp.__file__, skills.shipped_dir(), list(found.skills)]))\n")
    done = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], cwd=root, capture_output=True, text=True,
                          timeout=60)
    package, shipped, names = json.loads(done.stdout or "null") or (None, None, None)
    assert package == os.path.join(root, "bob_acp", "__init__.py"), done.stderr
    assert shipped == os.path.join(root, "skills") and names == ["bg-jobs", "greetings", "vulcan-salute"]


def test_later_places_override_earlier_ones(places):
    make_skill(places["user"], "greetings", description="User greets.")
    make_skill(places["project"], "greetings", description="Project greets.")
    assert places["discover"]().skills["greetings"].description == "Project greets."
    make_skill(places["extra"], "greetings", description="Extra greets.")
    catalog = places["discover"]()
    assert catalog.skills["greetings"].description == "Extra greets."
    assert catalog.skills["greetings"].source == "skills.dirs"


@pytest.mark.parametrize("folder, raw, problem", [
    ("bad-yaml", "---\nname: [bad\n---\nx", "invalid YAML"),
    ("no-front", "just text", "no YAML front matter"),
    ("no-desc", "---\nname: no-desc\n---\nx", "missing description"),
    ("no-name", "---\ndescription: d\n---\nx", "missing name"),
    ("Upper", "---\nname: Upper\ndescription: d\n---\nx", "invalid name"),
    ("dash-", "---\nname: dash-\ndescription: d\n---\nx", "invalid name"),
    ("a--b", "---\nname: a--b\ndescription: d\n---\nx", "invalid name"),
    ("other", "---\nname: mismatch\ndescription: d\n---\nx", "differs from its folder"),
    ("listy", "---\n- a\n---\nx", "must be a mapping"),
    ("x" * 65, "---\nname: " + "x" * 65 + "\ndescription: d\n---\nx", "invalid name"),
])
def test_broken_skills_are_skipped_with_a_warning(places, folder, raw, problem):
    make_skill(places["project"], folder, raw=raw)
    catalog = places["discover"]()
    assert folder not in catalog.skills
    assert any(problem in w and "SKILL.md" in w for w in catalog.warnings), catalog.warnings


def test_non_utf8_skill_is_skipped(places):
    path = make_skill(places["project"], "latin")
    (path / "SKILL.md").write_bytes(b"---\nname: latin\ndescription: caf\xe9\n---\n")
    catalog = places["discover"]()
    assert "latin" not in catalog.skills and any("not UTF-8" in w for w in catalog.warnings)


def test_new_and_compact_skills_are_not_advertised(places):
    make_skill(places["project"], "new")
    make_skill(places["project"], "compact")
    catalog = places["discover"]()
    assert "new" in catalog.skills and "compact" in catalog.skills
    names = [c["name"] for c in skills.available_commands(catalog)]
    assert names == ["new", "compact", "bg-jobs", "greetings", "vulcan-salute"]
    assert sum("is not advertised" in w for w in catalog.warnings) == 2


def test_available_commands_exact(places):
    commands = skills.available_commands(places["discover"]())
    assert commands[:2] == [{"name": "new", "description": "Clear the history and start a new session"},
                            {"name": "compact", "description": "Compress the history now, keeping the last turns"}]
    assert commands[3] == {"name": "greetings", "description": "Greet somebody with a festive message.",
                           "input": {"hint": "parameters, if this skill needs any"}}


def test_files_are_listed_without_skill_md_and_dotfiles(places):
    path = make_skill(places["project"], "tooly", extra_files=("run.sh", "scripts/helper.py", ".hidden"))
    files = places["discover"]().skills["tooly"].files
    assert files == [str(path / "run.sh"), str(path / "scripts" / "helper.py")]


def test_catalogue_text_lists_every_skill(places):
    text = skills.catalogue_text(places["discover"]())
    assert "read_skill" in text and "$name" in text
    assert "- greetings: Greet somebody with a festive message." in text
    assert skills.catalogue_text(skills.Catalog()) == ""


@pytest.mark.parametrize("text, expected", [
    ("/greetings Bob", "$greetings Bob"),
    ("  /greetings Bob", "$greetings Bob"),
    ("/greetings", "$greetings"),
    ("/greetingsX Bob", "/greetingsX Bob"),
    ("/unknown thing", "/unknown thing"),
    ("$greetings Bob", "$greetings Bob"),
    ("say /greetings", "say /greetings"),
])
def test_rewrite(places, text, expected):
    assert skills.rewrite_prompt(text, places["discover"]()) == expected
