"""`make dashboard PORT=N` / `grpo-lab-dashboard --server.port N`: a taken port is said on the console,
a port the user named stops the start (exit 2), Streamlit's default moves on with a note."""

import socket

from grpo_lab.dashboard import serve


def listening() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


def test_a_taken_port_is_said_and_a_named_one_stops_the_start(monkeypatch, tmp_path):
    with listening() as taken:
        port = taken.getsockname()[1]
        said, stop = serve.port_note(["--server.port", str(port)])
        assert stop and f"port {port} is taken" in said and f"PORT={port + 1}" in said
        monkeypatch.setattr(serve, "DEFAULT_PORT", port)  # the default is taken: a note, and the start goes on
        said, stop = serve.port_note([])
        assert not stop and f"port {port} is taken" in said and "next free port" in said
        monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(tmp_path / "runs"))
        assert serve.main(["--server.port", str(port)]) == 2  # before any server or scheduler starts
    assert serve.port_note(["--server.port", str(port)]) is None  # free again
