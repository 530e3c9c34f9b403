"""Unit-test reward and its sandbox: scores, and hostile completions (deliberate attacks on the
sandbox itself: tests/rewards/test_rewards_sandbox_attacks.py)."""

import os
import time
import uuid

import pytest

from grpo_lab import rewards
from grpo_lab.rewards.code_tests import extract_code, parse_tests
from grpo_lab.rewards.sandbox import ALLOW_UNSANDBOXED_ENV, Limits, run_python

pytestmark = pytest.mark.timeout(120)

TIMEOUT_S = 2.0
ADD = "def add(a, b): return a + b"
ADD_TESTS = ["assert add(1, 2) == 3", "assert add(-1, 1) == 0", "assert add(0, 0) == 0"]


@pytest.fixture(scope="module")
def reward():
    return rewards.build("code_tests", timeout_s=TIMEOUT_S, max_output_kb=256)


def score_one(reward, code, tests=ADD_TESTS):
    return reward(["write add"], [code], tests=[tests])[0]


# --- scoring ----------------------------------------------------------------------------------


def test_fraction_of_tests_passed(reward):
    codes = [
        "def add(a, b):\n    return a + b",
        "def add(a, b):\n    return a + b + (a < 0)",
        "def add(a, b):\n    return 7",
    ]
    assert reward(["p"] * 3, codes, tests=[ADD_TESTS] * 3) == [1.0, pytest.approx(2 / 3), 0.0]


def test_code_is_taken_from_the_last_fenced_block(reward):
    text = (
        "First try:\n```python\ndef add(a, b): return 0\n```\n"
        "Fixed:\n```python\ndef add(a, b):\n    return a + b\n```\nDone."
    )
    assert score_one(reward, text) == 1.0
    assert extract_code("```py\nx = 1") == "x = 1"  # a truncated completion's unclosed fence


def test_string_tests_split_into_setup_and_asserts(reward):
    tests = "import math\ndef twice(x):\n    return 2 * x\n"
    tests += "assert add(1, 1) == twice(1)\nassert add(2, 3) == 6"
    assert [s["test"] for s in parse_tests(tests)] == [False, False, True, True]
    assert score_one(reward, "def add(a, b): return a + b", tests) == 0.5


def test_humaneval_style_check_is_one_test(reward):
    tests = "def check(candidate):\n    assert candidate(2, 2) == 4\ncheck(add)"
    assert score_one(reward, "def add(a, b): return a + b", tests) == 1.0
    assert score_one(reward, "def add(a, b): return a * b + 1", tests) == 0.0


def test_no_tests_is_no_score_and_broken_tests_are_reported(reward):
    assert reward(["p"] * 3, ["x = 1"] * 3, tests=[None, [], ""]) == [None, None, None]
    scores = rewards.score_all({"code": (reward, 1.0)}, ["p"], ["x = 1"], {"tests": ["assert (("]})
    assert scores.total == [None] and scores.errors == {"code": 1}
    assert "do not parse" in scores.messages[0]


def test_a_crashing_solution_scores_zero(reward):
    assert score_one(reward, "raise SystemExit(3)") == 0.0
    assert score_one(reward, "import os\nos.abort()") == 0.0
    assert score_one(reward, "def add(a, b):\n    return add(a, b)") == 0.0  # RecursionError


def test_tests_run_after_an_infinite_loop_count_as_failed(reward):
    code = "def add(a, b):\n    while a == 0: pass\n    return a + b"
    assert score_one(reward, code) == pytest.approx(2 / 3)  # add(0, 0), the last test, loops


# --- hostile completions ----------------------------------------------------------------------


def test_infinite_loop_scores_zero_within_the_time_limit(reward):
    start = time.monotonic()
    assert score_one(reward, "while True: pass") == 0.0
    assert score_one(reward, "import time\ntime.sleep(1000)") == 0.0
    assert time.monotonic() - start < 2 * TIMEOUT_S + 4


def test_fork_bomb_scores_zero_and_leaves_nothing_behind(reward):
    # Each attack marks its processes (a name, a sleep length) so that sandboxes of tests running
    # beside this one on other workers, as the same user, are not counted as leftovers.
    name = f"gl{uuid.uuid4().hex[:12]}"
    seconds = f"1000.{uuid.uuid4().int % 10**9}"
    rename = f"import ctypes\nctypes.CDLL(None).prctl(15, b'{name}', 0, 0, 0)"
    named = ["assert open('/proc/self/comm').read().strip() == %r" % name]
    assert score_one(reward, rename, tests=named) == 1.0  # the mark holds inside the sandbox
    forker = rename + "\nimport os\nwhile True:\n    os.fork()"
    assert score_one(reward, forker) == 0.0
    spawner = f"import subprocess\nwhile True:\n    subprocess.Popen(['sleep', '{seconds}'])"
    assert score_one(reward, spawner) == 0.0
    assert score_one(reward, "import multiprocessing") == 0.0
    assert _processes_marked(name, seconds) == []


def test_huge_output_scores_zero_quickly(reward):
    start = time.monotonic()
    assert score_one(reward, "print('x' * 100_000_000)\ndef add(a, b): return a + b") == 0.0
    assert score_one(reward, "while True: print('spam' * 1000)") == 0.0
    assert time.monotonic() - start < 2 * TIMEOUT_S + 4


def test_memory_bomb_scores_zero(reward):
    assert score_one(reward, "x = bytearray(4 * 1024 ** 3)\ndef add(a, b): return a + b") == 0.0


def test_only_a_private_tmp_is_writable(reward, tmp_path):
    reads = "import os\ndef add(a, b):\n    open(os.__file__).read()\n    return a + b"
    assert score_one(reward, reads) == 1.0
    private = f"/tmp/reward-private-{uuid.uuid4().hex}"
    inside = f"open({private!r}, 'w').write('ok')\nassert open({private!r}).read() == 'ok'\n"
    assert score_one(reward, inside + "def add(a, b): return a + b") == 1.0
    assert not os.path.exists(private)  # the sandbox's /tmp is its own
    outside = [str(tmp_path / "escape.txt"), f"/usr/reward-escape-{uuid.uuid4().hex}",
               f"/reward-escape-{uuid.uuid4().hex}"]
    for target in outside:
        folder, name = os.path.split(target)
        attempts = [
            f"open({target!r}, 'w').write('pwned')",
            f"import os\nos.close(os.open({target!r}, os.O_WRONLY | os.O_CREAT))",
            f"import os\nassert os.system('touch {target}') == 0",
            f"import os\nos.symlink({target!r}, 'link')\nopen('link', 'w').write('pwned')",
            f"import os\nos.chdir({folder!r})\nopen({name!r}, 'w').write('pwned')",
            f"import shutil\nshutil.copy('/usr/bin/env', {target!r})",
        ]
        for attempt in attempts:
            assert score_one(reward, attempt + "\ndef add(a, b): return a + b") == 0.0, attempt
            assert not os.path.exists(target), attempt


def test_no_network(reward):
    connect = "import socket\nsocket.create_connection(('1.1.1.1', 53), timeout=1)"
    assert score_one(reward, connect + "\ndef add(a, b): return a + b") == 0.0
    fetch = "import urllib.request\nurllib.request.urlopen('http://example.com', timeout=1)"
    assert score_one(reward, fetch + "\ndef add(a, b): return a + b") == 0.0


def test_clean_environment_and_unprivileged_user(reward, monkeypatch):
    monkeypatch.setenv("SECRET_TOKEN", "hunter2")
    tests = [
        "import os\nassert 'SECRET_TOKEN' not in os.environ",
        "import os\nassert os.environ['HOME'] == os.getcwd()",
    ]
    if os.geteuid() == 0:
        tests.append("import os\nassert os.getuid() != 0 and os.getgroups() in ([], [os.getgid()])")
    assert score_one(reward, "pass", tests) == 1.0


def test_own_namespaces_only_loopback_and_own_processes():
    check = ("import os\n"
             "lines = open('/proc/self/net/dev').readlines()[2:]\n"
             "names = [line.split(':')[0].strip() for line in lines]\n"
             "assert names == ['lo'], names\n"
             "assert os.getpid() == 1, os.getpid()\n"
             "assert sorted(p for p in os.listdir('/proc') if p.isdigit()) == ['1']\n"
             "assert not os.path.exists(os.path.expanduser('~root') + '/.bashrc')")
    result = run_python(check, [{"code": "pass", "test": True}], Limits(wall_s=5))
    assert result.loaded, result.output


def test_limits_are_in_place_before_the_code_runs():
    check = ("import resource\n"
             "assert resource.getrlimit(resource.RLIMIT_CPU)[0] == 3\n"
             "assert resource.getrlimit(resource.RLIMIT_FSIZE)[0] == 4096\n"
             "assert resource.getrlimit(resource.RLIMIT_AS)[0] == 300 * 1024 ** 2\n"
             "assert resource.getrlimit(resource.RLIMIT_NPROC)[0] >= 8")
    limits = Limits(wall_s=3, cpu_s=3, memory_mb=300, file_bytes=4096, nproc=8)
    result = run_python(check, [{"code": "pass", "test": True}], limits)
    assert result.loaded and result.passed == 1, result.output


def test_without_bwrap_the_reward_refuses_unless_allowed(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on it
    monkeypatch.delenv(ALLOW_UNSANDBOXED_ENV, raising=False)
    with pytest.raises(ValueError, match="bwrap.*not installed.*allow_unsandboxed=True") as error:
        rewards.build("code_tests", timeout_s=TIMEOUT_S)
    assert "\n" not in str(error.value)
    with pytest.warns(UserWarning, match="without a sandbox"):
        weak = rewards.build("code_tests", timeout_s=TIMEOUT_S, user=None, allow_unsandboxed=True)
    # What is left is an audit hook against accidents (not attacks: see the attack tests).
    target = tmp_path / "escape.txt"
    assert score_one(weak, f"open({str(target)!r}, 'w').write('x')\n{ADD}") == 0.0
    assert score_one(weak, f"import os\nos.fork()\n{ADD}") == 0.0
    assert not target.exists()
    monkeypatch.setenv(ALLOW_UNSANDBOXED_ENV, "1")
    with pytest.warns(UserWarning, match="without a sandbox"):
        assert score_one(rewards.build("code_tests", timeout_s=TIMEOUT_S), ADD) == 1.0


def test_a_bwrap_that_cannot_make_namespaces_is_refused_with_its_reason(tmp_path, monkeypatch):
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2; exit 1")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    monkeypatch.delenv(ALLOW_UNSANDBOXED_ENV, raising=False)
    with pytest.raises(ValueError, match="No permissions to create new namespace.*allow_unsand"):
        rewards.build("code_tests", timeout_s=TIMEOUT_S, user=None)  # the fake is root's only


# --- parallelism ------------------------------------------------------------------------------


def test_a_group_runs_in_parallel(reward):
    good = "def add(a, b):\n    return a + b"
    codes = ["while True: pass", "import time\ntime.sleep(100)"] + [good] * 6  # the slow ones first: both at once
    start = time.monotonic()
    scores = reward(["p"] * 8, codes, tests=[ADD_TESTS] * 8)
    elapsed = time.monotonic() - start
    assert scores == [0.0, 0.0] + [1.0] * 6
    assert elapsed < 2 * TIMEOUT_S + 2  # two slow ones side by side, not one after the other


def _processes_marked(name, argument):
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/comm") as f:
                comm = f.read().strip()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        if comm == name or argument in args:
            found.append((pid, comm, args))
    return found
