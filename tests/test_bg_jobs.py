"""The bg-jobs skill's script, run for real."""

import os
import signal
import subprocess
import time

import pytest

from bob_acp.context import skills

JOB = os.path.join(skills.shipped_dir(), "bg-jobs", "scripts", "job")


@pytest.fixture
def job(tmp_path):
    env = {**os.environ, "BOB_JOBS_DIR": str(tmp_path / "jobs")}

    def run(*args, timeout=30):
        return subprocess.run([JOB, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout)

    yield run
    listing = run("list").stdout
    for line in listing.splitlines():
        if "\trunning\t" in line:
            run("stop", line.split("\t")[0], "1")


def pid_of(tmp_path, job_id):
    return int((tmp_path / "jobs" / job_id / "pid").read_text())


def alive(pid):
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (ProcessLookupError, FileNotFoundError):
        return False


def test_a_job_outlives_the_bash_call_that_started_it(job, tmp_path):
    env = {**os.environ, "BOB_JOBS_DIR": str(tmp_path / "jobs")}
    starter = subprocess.Popen(["bash", "-c", f"{JOB} start sleep 30; sleep 30"], cwd=tmp_path, env=env,
                               stdout=subprocess.PIPE, text=True, start_new_session=True)
    job_id = starter.stdout.readline().strip()
    pid = pid_of(tmp_path, job_id)
    os.killpg(starter.pid, signal.SIGKILL)  # what Bob does when a bash call ends
    starter.wait()
    # The kill reached every process of the group at once; the job, in a session of its own, is
    # not one of them (alive could still see a process on its way out: its session says why not).
    assert os.getsid(pid) == pid != starter.pid
    assert alive(pid)
    assert "status:  running" in job("status", job_id).stdout
    assert job("stop", job_id, "1").returncode == 0
    assert not alive(pid_of(tmp_path, job_id))


def test_wait_returns_the_exit_code_or_times_out(job):
    quick = job("start", "echo hello; exit 7").stdout.strip()
    result = job("wait", quick, "10")
    assert result.returncode == 0 and "status:  exited" in result.stdout and "exit:    7" in result.stdout
    assert "hello" in result.stdout
    slow = job("start", "sleep 30").stdout.strip()
    started = time.monotonic()
    result = job("wait", slow, "1")
    assert result.returncode == 124 and "still running" in result.stdout and time.monotonic() - started < 5


def test_status_log_list_and_stop_kill_the_whole_group(job, tmp_path):
    job_id = job("start", "echo line1; echo line2; sleep 300 & sleep 301").stdout.strip()
    deadline = time.monotonic() + 10
    while "sleep 301" not in job("status", job_id).stdout and time.monotonic() < deadline:
        time.sleep(0.05)  # until the job has printed and started its children
    status = job("status", job_id).stdout
    assert "running" in status and "line2" in status and "sleep 301" in status
    assert job("log", job_id, "1").stdout == "line2\n"
    assert f"{job_id}\trunning\t" in job("list").stdout
    pid = pid_of(tmp_path, job_id)
    assert "stopped" in job("stop", job_id, "1").stdout
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        members = [p for p in os.listdir("/proc") if p.isdigit() and _pgid(p) == pid and alive(int(p))]
        if not members:
            break
        time.sleep(0.05)
    assert members == []
    assert f"{job_id}\texited\t" in job("list").stdout


def test_errors_are_clear(job):
    assert job("status", "../../etc").returncode == 2
    assert "no job" in job("status", "nope").stderr
    assert job("start").returncode == 2


def _pgid(pid):
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[2])
    except (OSError, ValueError, IndexError):
        return None
