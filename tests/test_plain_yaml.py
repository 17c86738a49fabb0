"""The config file's plain reader (bob_acp.plain_yaml) against PyYAML: on every document it
accepts it must give what yaml.safe_load gives, type for type; everything else it hands on."""

import random

import pytest
import yaml

from bob_acp import config, plain_yaml

SCALARS = [
    "a", "hello world", "http://localhost:8080/v1", "Bearer ${TOKEN}", "gpt-4o", "claude-sonnet-4", "x.y.z",
    "yes", "Yes", "NO", "on", "OFF", "true", "False", "y", "n", "null", "Null", "~", "0", "7", "-3", "+4", "10",
    "123456789012345678901234567890", "007", "0x1f", "0o17", "0b101", "1_000", "1.5", "-0.5", "+2.25", "01.5", "1.",
    ".5", "1e5", "1.0e+5", "1.5E-3", "1:30", "190:20:30", "2026-01-01", "2026-01-01 10:00:00", ".inf", "-.inf",
    ".nan", "a:b", "a: b", "a #b", "a#b", "-", "-x", "-1x", "=", "<<", "*a", "&a", "!tag", "|", ">", "%x", "@x",
    "`x`", "a, b", "[x]", "a]", "x{y}", "it's", "?x", "? x", "1password", "$HOME", "/usr/bin", "~/x", "a ~", "a;b",
    "f(x)", "a^b", "a=b", "x: ", "trailing:", "ü", "a\\b", "{}", "[]", "[a, b]", "[1, 2.5, yes, null]", "[ ]",
    "[a,, b]", "[a, [b]]", "[a: b]", "['q', b]", "{a: 1}", "{} # c", "{}x", "- a", "-- x",
]
QUOTED = ["'single'", "'it''s'", "'a: b # c'", "''", '"double"', '"a: b # c"', '""', '"esc\\n"', "'x' # c",
          '"x" # c', "'x'y", '"x"y', "'unterminated", '"a\'b"']
KEYS = ["name", "provider", "baseUrl", "x-api-key", "Authorization", "a.b", "_k", "K9", "on", "yes", "1", "1.5",
        "null", "~", "<<", "a b", "-k", "k:", "models", "dirs"]


def same(a, b):
    """Equal, type for type (True is not 1, 1.0 is not 1)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a) or (a == b and not a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def check(text):
    """plain_yaml's answer on `text` is PyYAML's, or it handed the document on. True: accepted."""
    try:
        got = plain_yaml.load(text)
    except plain_yaml.NotPlain:
        return False
    want = yaml.safe_load(text)  # (a document PyYAML refuses must never be accepted: this raises)
    assert same(got, want), f"{text!r}: plain {got!r}, PyYAML {want!r}"
    return True


@pytest.mark.parametrize("value", SCALARS + QUOTED)
def test_each_scalar_as_a_value_a_list_item_and_in_a_nested_block(value):
    for text in (f"key: {value}\n", f"key:\n  - {value}\n", f"key:\n- {value}\n", f"a:\n  b:\n    c: {value}\n",
                 f"key: {value}  # note\n", f"x: 1\nkey: {value}\ny: 2\n"):
        try:
            check(text)
        except yaml.YAMLError:
            pytest.fail(f"accepted what PyYAML refuses: {text!r}")


@pytest.mark.parametrize("key", KEYS)
def test_each_key(key):
    for text in (f"{key}: v\n", f"{key}:\n  inner: 1\n", f"- {key}: v\n"):
        try:
            check(text)
        except yaml.YAMLError:
            pytest.fail(f"accepted what PyYAML refuses: {text!r}")


PLAIN_SCALARS = ["a", "hello world", "http://localhost:8080/v1", "Bearer ${TOKEN}", "gpt-4o", "yes", "off", "true",
                 "null", "0", "7", "-3", "1.5", "'single'", "'it''s'", '"double # not a comment"', "[a, b]", "[]",
                 "/usr/bin", "$HOME"]
PLAIN_KEYS = KEYS[:8] + KEYS[-2:]


def _document(rng, depth=0, indent=0, step=2, scalars=SCALARS + QUOTED, keys=KEYS):
    lines = []
    for _ in range(rng.randint(1, 4)):
        key = rng.choice(PLAIN_KEYS + [rng.choice(keys)])
        pad = " " * indent
        kind = rng.random()
        comment = rng.choice(["", "", "  # why"])
        if rng.random() < 0.2:
            lines.append(f"{pad}# a comment")
        if rng.random() < 0.1:
            lines.append("")
        if kind < 0.5 or depth > 2:
            lines.append(f"{pad}{key}: {rng.choice(scalars)}{comment}")
        elif kind < 0.7:
            lines.append(f"{pad}{key}:{comment}")
            lines += _document(rng, depth + 1, indent + rng.choice([step, 4]), step, scalars, keys)
        elif kind < 0.9:
            lines.append(f"{pad}{key}:")
            at = indent + rng.choice([0, step])
            for _ in range(rng.randint(1, 3)):
                if rng.random() < 0.5:
                    lines.append(f"{' ' * at}- {rng.choice(scalars)}")
                else:
                    inner = _document(rng, depth + 1, at + 2, step, scalars, keys)
                    while not inner[0].strip() or inner[0].lstrip().startswith("#"):
                        inner = inner[1:] or [f"{' ' * (at + 2)}k: v"]
                    lines.append(f"{' ' * at}- {inner[0].lstrip(' ')}")
                    lines += inner[1:]
        else:
            lines.append(f"{pad}{key}: {rng.choice(['[a, b]', '[1, 2]', '[]', '{}', '[x, yes, 1.5]'])}")
    return lines


def test_thousands_of_random_documents_read_as_pyyaml_reads_them():
    rng = random.Random(20261204)
    accepted = refused_by_pyyaml_but_accepted = 0
    for _ in range(4000):
        text = "\n".join(_document(rng)) + "\n"
        try:
            accepted += check(text)
        except yaml.YAMLError:
            refused_by_pyyaml_but_accepted += 1
    assert refused_by_pyyaml_but_accepted == 0 and accepted > 400


def test_documents_written_the_plain_way_are_all_read_without_pyyaml():
    rng = random.Random(4)
    for _ in range(2000):
        text = "\n".join(_document(rng, scalars=PLAIN_SCALARS, keys=PLAIN_KEYS)) + "\n"
        assert check(text), text


def test_json_documents_read_as_pyyaml_reads_them():
    for text in ('{"model": {"provider": "script", "script": "/x.yaml"}, "limits": {"maxSessions": -1}}',
                 '{"a":1,"b":[true,false,null],"c":{"d":"e: f # g"}}', '{"a": 1.5, "b": -0.25, "a": 2}', '{}',
                 '{"x": 1e5}', '{"x": 1.5e3}', '{"x": NaN}', '{"x": "\\u00e9"}', '[1, 2]', '{"x": 1', '{a: 1}'):
        try:
            check(text)
        except yaml.YAMLError:
            pytest.fail(f"accepted what PyYAML refuses: {text!r}")
    assert check('{"model": {"name": "m"}, "x": [1, 2.5]}')


def test_the_config_reads_the_same_either_way_and_errors_still_say_where(tmp_path, monkeypatch):
    path = tmp_path / "config.yaml"
    path.write_text("model:\n  provider: openai  # the default\n  name: gpt-4o\n  headers:\n"
                    "    X-Team: ${TEAM}\nskills:\n  dirs:\n  - /opt/skills\nlimits:\n  maxSessions: 8\n")
    fast = config.load(str(path), env={})
    monkeypatch.setattr(plain_yaml, "load", lambda text: (_ for _ in ()).throw(plain_yaml.NotPlain("test")))
    slow = config.load(str(path), env={})
    assert fast.model.headers == slow.model.headers == {"X-Team": "${TEAM}"}
    assert fast.skills.dirs == slow.skills.dirs == ["/opt/skills"] and fast.limits.maxSessions == 8
    path.write_text("model:\n  name: [unclosed\n")
    with pytest.raises(config.ConfigError, match="invalid YAML at line 3: expected"):
        config.load(str(path), env={})
