"""Deliberate attacks on the code reward's sandbox, as root and as an unprivileged user.

Each attack is a completion scored by `code_tests` in a separate *caller* process, the trainer's
stand-in, running as the identity under test. The attacks go around the audit hook the sandbox
used to rely on (`_imp.create_builtin` loads a C module without an import event,
`_imp.create_dynamic` with one for a name the hook does not block, and
`_posixsubprocess.fork_exec` starts programs without a subprocess event). The one test of each
asserts what the attack can see of its own success, so a score of 1.0 means it got out. What
the inside cannot see is checked from outside: the caller is alive and printed its scores,
the listener on 127.0.0.1 got no connection, nothing was written to the caller's home, and
no process carrying the attack's marker is left.
"""

from __future__ import annotations

import json
import os
import pwd
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(180)

ROOT = str(Path(__file__).resolve().parents[2])  # the code under test (the project)
INTERPRETERS = (sys.executable, "/usr/bin/python3", "/usr/local/bin/python3")

# Reaches C modules and fork+exec without the audit events an audit hook would see.
BYPASS = '''
import _imp, os, sys
from importlib.machinery import BuiltinImporter, PathFinder

def load(name):
    if name in sys.builtin_module_names:
        return _imp.create_builtin(BuiltinImporter.find_spec(name))
    spec = PathFinder.find_spec(name)
    spec.name = "around.the.hook." + name  # the init function is found from the last part
    return _imp.create_dynamic(spec)

def run(*argv, setsid=False):
    fork_exec = load("_posixsubprocess").fork_exec
    errors_read, errors_write = os.pipe()
    pid = fork_exec([os.fsencode(a) for a in argv], [os.fsencode(argv[0])], True, (), None,
                    None, -1, -1, -1, -1, -1, -1, errors_read, errors_write, True, setsid, -1,
                    None, None, None, -1, None, True)
    os.close(errors_write)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])

escaped = False
'''

# name -> the attack; {caller}, {port}, {secret_path}, {drop_path}, {marker} are
# filled in per run. Each sets `escaped` only on evidence from outside the sandbox.
ATTACKS = {
    "os.kill(os.getppid(), SIGKILL)": """
parent = os.getppid()
assert parent > 1, "no parent in sight"
os.kill(parent, 9)
escaped = True
""",
    "/bin/kill -9 <caller> via _posixsubprocess": """
assert run("/bin/kill", "-9", "{caller}") == 0
escaped = True
""",
    "connect to 127.0.0.1 in-process, _socket via _imp": """
conn = load("_socket").socket(2, 1)
conn.settimeout(2)
conn.connect(("127.0.0.1", {port}))
conn.send(b"{marker}")
escaped = True
""",
    "connect to 127.0.0.1 from a spawned interpreter": """
client = "import socket; socket.create_connection(('127.0.0.1', {port}), 2).sendall(b'{marker}')"
assert run(sys.executable, "-c", client) == 0
escaped = True
""",
    "read a file in the caller's $HOME": """
escaped = open("{secret_path}").read() == "{marker}"
""",
    "write a file in the caller's $HOME via a spawned shell": """
assert run("/bin/sh", "-c", "echo pwned > {drop_path}") == 0
escaped = True
""",
    "setsid + double-forked sleeper outlives the reward": """
sleeper = "import os, time\\nif os.fork() == 0:\\n    os.setsid()\\n    time.sleep(60)"
assert run(sys.executable, "-c", sleeper, "{marker}", setsid=True) == 0
escaped = os.path.exists("/proc/{caller}")  # it lives where the caller lives
""",
}

# The caller: builds the reward like the trainer would and prints the scores.
CALLER = """
import json, sys
sys.path.insert(0, sys.argv[1])
from grpo_lab import rewards
job = json.loads(sys.stdin.readline())
reward = rewards.build("code_tests", **{"timeout_s": 3, **job["params"]})
scores = reward(["attack"], [job["code"]], tests=[["assert escaped"]])
print("scores", json.dumps(scores), flush=True)
"""


@dataclass(frozen=True)
class Identity:
    label: str
    user: pwd.struct_passwd  # who the caller runs as
    params: dict  # code_tests parameters


def identities() -> list[Identity]:
    me = pwd.getpwuid(os.geteuid())
    if os.geteuid() != 0:
        return [Identity(f"unprivileged ({me.pw_name})", me, {})]
    nobody = pwd.getpwnam("nobody")
    return [Identity("root", me, {}), Identity("root, user=None", me, {"user": None}),
            Identity("nobody", nobody, {})]


@dataclass
class Outcome:
    caller_alive: bool
    scores: list | None
    listener_hit: bool
    secret_readable_by_caller: bool
    file_dropped: bool
    survivors: int  # processes carrying the attack's marker after the reward returned
    caller_output: str


def attack(identity: Identity, name: str, root: str = ROOT) -> Outcome:
    """Score the attack `name` in a caller running as `identity`, with the code under `root`."""
    python = caller_python(identity.user, root)
    marker = f"grpo-lab-attack-{uuid.uuid4().hex}"
    own_home = identity.user.pw_uid == os.geteuid()
    home = os.path.expanduser("~") if own_home else tempfile.mkdtemp(prefix="grpo-lab-home-")
    secret_path = os.path.join(home, f".{marker}-secret")
    drop_path = os.path.join(home, f".{marker}-dropped")
    listener = socket.create_server(("127.0.0.1", 0))
    caller = None
    try:
        if not own_home:
            os.chown(home, identity.user.pw_uid, identity.user.pw_gid)
        with open(os.open(secret_path, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            f.write(marker)
        os.chown(secret_path, identity.user.pw_uid, identity.user.pw_gid)
        caller = start_caller(identity, python, root, home)
        fields = {"caller": caller.pid, "port": listener.getsockname()[1], "marker": marker,
                  "secret_path": secret_path, "drop_path": drop_path}
        code = BYPASS + ATTACKS[name].format(**fields)
        job = json.dumps({"code": code, "params": identity.params})
        output, _ = caller.communicate(job + "\n", timeout=120)
        scores = [json.loads(line[7:]) for line in output.splitlines() if line[:7] == "scores "]
        return Outcome(
            caller_alive=caller.returncode == 0, scores=scores[0] if scores else None,
            listener_hit=bool(select.select([listener], [], [], 0.2)[0]),
            secret_readable_by_caller=can_read(identity.user, python, secret_path),
            file_dropped=os.path.exists(drop_path), survivors=kill_marked(marker),
            caller_output=output[-2000:],
        )
    finally:
        if caller is not None and caller.poll() is None:
            caller.kill()
        listener.close()
        for path in (secret_path, drop_path):
            if os.path.exists(path):
                os.remove(path)
        if not own_home:
            shutil.rmtree(home, ignore_errors=True)


def start_caller(identity: Identity, python: str, root: str, home: str) -> subprocess.Popen:
    return subprocess.Popen(
        [python, "-c", CALLER, root], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, cwd="/", env={"PATH": "/usr/bin:/bin", "HOME": home},
        **as_user(identity.user),
    )


def orphans_of_a_killed_caller(identity: Identity, root: str = ROOT) -> int:
    """SIGKILL the caller while the completion's child sleeps: how many processes survive."""
    python = caller_python(identity.user, root)
    marker = f"grpo-lab-attack-{uuid.uuid4().hex}"
    code = BYPASS + f'run(sys.executable, "-c", "import time; time.sleep(60)", "{marker}")\n'
    caller = start_caller(identity, python, root, home="/")
    try:
        job = {"code": code, "params": {**identity.params, "timeout_s": 30}}
        caller.stdin.write(json.dumps(job) + "\n")
        caller.stdin.close()
        deadline = time.monotonic() + 20
        while not marked(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marked(marker), "the completion's child never started"
    finally:
        caller.kill()
        caller.wait()
    deadline = time.monotonic() + 3  # the kernel's kill on the parent's death is asynchronous
    while marked(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    return kill_marked(marker)


_pythons: dict = {}


def caller_python(user: pwd.struct_passwd, root: str) -> str:
    """An interpreter `user` can run that imports the rewards under `root`: the test fails
    (does not skip) when there is none, since then the unprivileged case was never tried."""
    key = (user.pw_uid, root)
    if key not in _pythons:
        tried = []
        for python in dict.fromkeys(p for p in INTERPRETERS if os.path.exists(p)):
            check = f"import sys; sys.path.insert(0, {root!r}); import grpo_lab.rewards.code_tests"
            done = run_as(user, [python, "-c", check])
            if done.returncode == 0:
                _pythons[key] = python
                break
            tried.append(f"{python}: {done.stderr.strip().splitlines()[-1:]}")
        else:
            pytest.fail(f"no Python interpreter that {user.pw_name} can run imports rewards from"
                        f" {root} (make them readable by {user.pw_name}); tried {tried}")
    return _pythons[key]


def as_user(user: pwd.struct_passwd) -> dict:
    if user.pw_uid == os.geteuid():
        return {}
    return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}


def run_as(user: pwd.struct_passwd, argv: list[str]) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, capture_output=True, text=True, cwd="/", timeout=60,
                              **as_user(user))
    except OSError as exc:  # e.g. an interpreter under a folder the user cannot enter
        return subprocess.CompletedProcess(argv, 126, "", str(exc))


def can_read(user: pwd.struct_passwd, python: str, path: str) -> bool:
    return run_as(user, [python, "-c", f"open({path!r}).read()"]).returncode == 0


def marked(marker: str) -> list[int]:
    """The live processes whose command line carries `marker`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(int(pid))
        except OSError:
            pass
    return found


def kill_marked(marker: str) -> int:
    """Kill what an attack left behind; how many there were."""
    found = marked(marker)
    for pid in found:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return len(found)


@pytest.mark.parametrize("name", list(ATTACKS))
@pytest.mark.parametrize("identity", identities(), ids=lambda i: i.label)
def test_attack_scores_zero_and_harms_nothing(identity, name):
    outcome = attack(identity, name)
    assert outcome.caller_alive, f"the caller died: {outcome.caller_output}"
    assert outcome.scores == [0.0], outcome.caller_output
    assert not outcome.listener_hit, "the listener on 127.0.0.1 got a connection"
    assert not outcome.file_dropped, "a file appeared in the caller's home"
    assert outcome.survivors == 0, "a process of the attack outlived the reward"
    if "$HOME" in name:  # the secret was there to take: the caller itself can read it
        assert outcome.secret_readable_by_caller


@pytest.mark.parametrize("identity", identities(), ids=lambda i: i.label)
def test_the_sandbox_dies_with_its_caller(identity):
    assert orphans_of_a_killed_caller(identity) == 0
