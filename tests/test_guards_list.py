"""scripts/guards.py takes each guard away and expects its tests to fail. That proves something
only while each guard's line is still in its file exactly once, its break compiles, and the tests
it names exist: a refactor that moves a line must move the guard with it (checked here, on every
run of the suite, without running the slow breaks themselves)."""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def guards() -> list:
    spec = importlib.util.spec_from_file_location("bob_guards", ROOT / "scripts" / "guards.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bob_guards"] = module  # (its dataclass looks its module up)
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules["bob_guards"]
    return module.GUARDS


def test_every_guard_names_a_line_that_is_there_once_a_break_that_compiles_and_tests_that_exist():
    problems = []
    listed = guards()
    assert len({guard.name for guard in listed}) == len(listed)
    for guard in listed:
        source = (ROOT / guard.path).read_text(encoding="utf-8")
        if source.count(guard.line) != 1:
            problems.append(f"{guard.name}: its line is in {guard.path} {source.count(guard.line)} times")
            continue
        try:
            compile(source.replace(guard.line, guard.broken), guard.path, "exec")
        except SyntaxError as exc:
            problems.append(f"{guard.name}: its break does not compile: {exc}")
        for test in guard.tests:
            file, _, name = test.partition("::")
            if not (ROOT / file).is_file():
                problems.append(f"{guard.name}: no test file {file}")
            elif name and f"def {name.split('[')[0]}(" not in (ROOT / file).read_text(encoding="utf-8"):
                problems.append(f"{guard.name}: no test {test}")
    assert problems == []
