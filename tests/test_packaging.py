"""Packaging: every subpackage is listed in setup.cfg, and the installed package finds its data."""

import configparser
import os

import bob_acp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_every_subpackage_is_listed_in_setup_cfg():
    parser = configparser.ConfigParser()
    parser.read(os.path.join(ROOT, "setup.cfg"))
    listed = set(parser["options"]["packages"].split())
    found = set()
    for folder, _dirs, files in os.walk(os.path.join(ROOT, "bob_acp")):
        if "__init__.py" in files:
            found.add(os.path.relpath(folder, ROOT).replace(os.sep, "."))
    assert found <= listed, f"missing from setup.cfg packages: {sorted(found - listed)}"
    assert "bob_acp.shipped_skills" in listed


def test_version():
    assert bob_acp.__version__ == "0.12.0"


def test_shipped_skills_are_installed_with_the_package():
    from bob_acp import shipped_skills

    folder = os.path.dirname(shipped_skills.__file__)
    for name in ("bg-jobs", "greetings", "vulcan-salute"):
        assert os.path.isfile(os.path.join(folder, name, "SKILL.md")), name
