"""importers/pickle_limits.py: a pickle is measured before it is loaded. The shapes below were
read (or hung) before: each now gets one line, at once, from `trl_args.read_pickle`."""

from __future__ import annotations

import pickle

import pytest

from grpo_lab.rundir.importers import pickle_limits, trl_args


def nested_tuple(levels: int = 14, width: int = 10) -> bytes:
    """The pickle of (((...("lol",)...),) * 10) * 10: shared through the memo, 10^14 leaves; hashing
    it (as a key or a set member) never finishes. Its opcodes without PROTO and STOP, to wrap."""
    value: tuple = ("lol",)
    for _ in range(levels):
        value = (value,) * width
    return pickle.dumps(value, protocol=2)[2:-1]


def held_itself() -> bytes:
    value: list = []
    value.append(value)
    return pickle.dumps({"x": value}, protocol=2)


NOT_A_KEY = "a key or set member that is not text"
HOSTILE = {
    "a frozenset of a shared tuple": (b"\x80\x02(" + nested_tuple() + b"\x91.", NOT_A_KEY),
    "a shared tuple as a dict key": (b"\x80\x02}(" + nested_tuple() + b"K\x01u.", NOT_A_KEY),
    "1,000 references to 100,000 characters": (pickle.dumps({"x": ["a" * 100_000] * 1000}),
                                               "would build more than 262,144 values and characters"),
    "a 10,000-bit integer": (pickle.dumps({"x": 1 << 10_000}), "an integer of 10,001 bits (at most 64)"),
    "a list that holds itself": (held_itself(), "an object that holds itself"),
    "30,000 values": (pickle.dumps({"x": list(range(30_000))}), "more than 20,000 operations"),
    "a GET never stored": (b"\x80\x02h\x05.", "not a well-formed pickle"),
    "an APPENDS without a MARK": (b"\x80\x02]K\x01e.", "not a well-formed pickle"),
}


@pytest.mark.parametrize("case", HOSTILE)
def test_a_hostile_pickle_is_refused_in_one_line_before_it_is_loaded(case):
    data, expected = HOSTILE[case]
    with pytest.raises(ValueError) as refused:
        trl_args.read_pickle(data)
    assert expected in str(refused.value) and "\n" not in str(refused.value)


def plain_size(value) -> int:
    """What `measure` counts, the direct way: each value 1, text its characters, shared parts each time."""
    if isinstance(value, str):
        return 1 + len(value)
    if isinstance(value, (list, tuple, set, frozenset)):
        return 1 + sum(plain_size(v) for v in value)
    if isinstance(value, dict):
        return 1 + sum(plain_size(k) + plain_size(v) for k, v in value.items())
    return 1


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_the_measure_counts_what_the_pickle_builds_in_every_protocol(protocol):
    shared = ["steps", 3]
    value = {"a": [1, 2.5, None, True, shared, shared], "b": ("x", (), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4)),
             "c": {"d": shared}, "h": [[shared] * 3] * 4, 10: -(2**63)}
    if protocol >= 4:  # before, a set is pickled as a call of builtins.set
        value["c"] |= {"e": frozenset({"f", 7}), "g": {8, 9}}
    assert pickle_limits.measure(pickle.dumps(value, protocol=protocol)) == plain_size(value)

