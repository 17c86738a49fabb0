"""The log: a console line redacted whole, JSON lines field by field, and no line lost when many
threads log at once (they queue without a lock)."""

import subprocess
import sys
import textwrap

from bob_acp import log, sessions

SECRET = "sk-test-9c1e4f7a2b"


def console_line(event):
    log.add_secret(SECRET)
    event = log._fill_processor(None, "info", {"level": "info", "timestamp": "T", **event})
    return log._redact_line(None, "info", log._console_renderer(None, "info", event))


def test_a_console_line_is_redacted_whole_in_every_form_a_field_is_written():
    line = console_line({"event": "[acp] session {session}: sent {what}", "session": "s1", "what": f"key={SECRET}"})
    assert SECRET not in line and "sent key=[redacted]" in line
    line = console_line({"event": "plain", "payload": {"headers": {"Authorization": f"Bearer {SECRET}"}},
                         "detail": f"Traceback ...\nValueError: {SECRET!r}"})
    assert SECRET not in line and line.count("[redacted]") == 2
    assert console_line({"event": "nothing secret here", "n": 3}) == "T [info     ] nothing secret here n=3"


def test_a_json_line_is_redacted_field_by_field():
    log.add_secret(SECRET)
    event = log._redact_processor(None, "info", {"event": "x", "data": [SECRET, "\\" + SECRET], "n": 1})
    line = log._json_renderer(None, "info", event)
    assert SECRET not in line and '"n":1' in line


def test_no_line_is_lost_when_many_threads_log_at_once(tmp_path):
    """(A subprocess: the log thread is one per process.)"""
    path = tmp_path / "bob.log"
    code = textwrap.dedent(f"""
        import threading
        from bob_acp import log
        log.setup("info", "console", {str(path)!r}, delay=0)
        logger = log.get("t")
        def work(n):
            for i in range(2000):
                logger.info("line {{thread}} {{i}}", thread=n, i=i)
        threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
        for t in threads: t.start()
        for t in threads: t.join()
        assert log.close(10)
    """)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    lines = path.read_text().splitlines()
    seen = {tuple(line.rsplit(" ", 2)[1:]) for line in lines if " line " in line}
    dropped = sum(int(line.split(" log line(s) dropped")[0].rsplit(" ", 1)[1]) for line in lines if "dropped" in line)
    assert len(seen) + dropped == 12000 and len(seen) > 0


def test_session_ids_never_repeat_within_a_process_even_thousands_a_second():
    ids = [sessions.new_id() for _ in range(200_000)]
    assert len(set(ids)) == len(ids) and all(sessions.valid_id(i) for i in ids[:1000])


def test_console_lines_show_templates_filled_fields_details_and_never_a_secret():
    log.add_secret(SECRET)
    at = 1764763200.125
    stamp = "2025-12-03T12:00:00.125000Z"
    cases = [
        ("info", "[acp] session {session}: new in {cwd}; {n} MCP server(s)", {"session": "s1", "cwd": "/p", "n": 0},
         f"{stamp} [info     ] [acp] session s1: new in /p; 0 MCP server(s)"),
        ("warning", "[acp] input closed: bye", {}, f"{stamp} [warning  ] [acp] input closed: bye"),
        ("error", "text with {braces} and no fields", {}, f"{stamp} [error    ] text with {{braces}} and no fields"),
        ("debug", "key {k} is {v}", {"k": "token", "v": SECRET}, f"{stamp} [debug    ] key token is [redacted]"),
        ("info", "{level} is the event's own", {"level": "x"}, f"{stamp} [info     ] {{level}} is the event's own"),
        ("info", "a field left over {a}", {"a": 1, "b": 2}, f"{stamp} [info     ] a field left over 1"),
        ("info", "not a template", {"x": 1, "y": "two"}, f"{stamp} [info     ] not a template x=1 y=two"),
        ("info", "with detail {a}", {"a": 1, "detail": "Traceback\n  line\n"},
         f"{stamp} [info     ] with detail 1\nTraceback\n  line"),
    ]
    for method, event, fields, line in cases:
        assert log._console_line(method, event, {**fields, "_at": at}) == line, event
