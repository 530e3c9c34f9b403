"""What a pickle may build, measured before it is loaded (TRL's `training_args.bin`, trl_args.py).

Loading a pickle with inert classes runs no code, but it is still input whose cost is not its size:
a memo lets one part be referred to again for two bytes, so 285 bytes describe a list of ten lists
of ten lists ... twelve levels down, 10^12 values in all ("billion laughs"). The unpickler builds
that quickly (the references are shared); then anything that walks it (turning the options into
plain values, writing them as JSON, hashing a tuple used as a key) never finishes.

So the pickle's operations are read first (`pickletools.genops`, no object built) and its stack is
replayed with a node per object, keeping who holds whom. A pickle is loaded only when it has at
most MAX_OPS operations, no object holds itself, its keys and set members are text or numbers
(a key of shared tuples would be hashed in full), every integer fits in 64 bits, and its value,
every shared part counted each time it is held, has at most MAX_SIZE values and characters.
TRL 1.16's GRPOConfig: about 750 operations, 4,600 values and characters.

>>> import pickle
>>> measure(pickle.dumps({"reward_weights": [2.0, 0.5], "output_dir": "out"}))
34
>>> laugh = ["lol"]
>>> for _ in range(12):
...     laugh = [laugh] * 10
>>> len(pickle.dumps(laugh))
285
>>> try:
...     measure(pickle.dumps(laugh))
... except PickleRefused as exc:
...     print(exc)
the pickle would build more than 262,144 values and characters (one part held many times over)
"""

from __future__ import annotations

import pickletools

MAX_OPS = 20_000  # TRL's GRPOConfig: about 750 (and a dict of colliding integer keys stays under a second)
MAX_SIZE = 1 << 18  # values and characters, shared parts counted each time they are held
SCALARS = {"int", "int_or_bool", "bool", "float", "bytes_or_str", "bytes", "str", "None"}
MUTATORS = {"APPEND", "APPENDS", "SETITEM", "SETITEMS", "ADDITEMS", "BUILD"}  # change the object below, push it back
KEYED = {"SETITEM": 2, "SETITEMS": 2, "DICT": 2, "ADDITEMS": 1, "FROZENSET": 1}  # every n-th popped value is a key
MARK = -1  # the stack's mark; nodes are 0, 1, ...


class PickleRefused(ValueError):
    """A pickle past a limit: the message is one line saying which."""


def measure(data: bytes) -> int:
    """The number of values and characters the pickle's value holds; ValueError (one line) when a
    limit in the module docstring is passed or the operations do not make a pickle."""
    cost: list[int] = []  # a node's own values and characters
    held: list[list[int]] = []  # the nodes a node holds
    scalar: list[bool] = []
    stack: list[int] = []
    memo: dict[int, int] = {}
    root = None
    try:
        for count, (op, arg, _) in enumerate(pickletools.genops(data), start=1):
            if count > MAX_OPS:
                raise PickleRefused(f"the pickle has more than {MAX_OPS:,} operations")
            if isinstance(arg, int) and arg.bit_length() > 64:
                raise PickleRefused(f"the pickle holds an integer of {arg.bit_length():,} bits (at most 64)")
            before = [s.name for s in op.stack_before]
            popped: list[int] = []
            if "mark" in before or (op.name == "POP" and stack and stack[-1] == MARK):
                mark = len(stack) - 1 - stack[::-1].index(MARK)  # ValueError: no mark
                popped, stack[mark:] = stack[mark + 1:], []
                before = before[:before.index("mark")] if "mark" in before else []
            if len(before) > len(stack) or MARK in stack[len(stack) - len(before):]:
                raise ValueError(f"{op.name} finds too few values on the stack")
            if before:
                popped, stack[-len(before):] = stack[-len(before):] + popped, []
            if op.name in KEYED:
                start = 1 if op.name in ("SETITEM", "SETITEMS", "ADDITEMS") else 0  # past the dict or set
                if not all(scalar[k] for k in popped[start::KEYED[op.name]]):
                    raise PickleRefused(f"the pickle has a key or set member that is not text or a number "
                                        f"({op.name})")
            if op.name in ("PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE"):
                stack.extend(popped)  # MEMOIZE leaves its value where it was, as PUT does
                if not stack or stack[-1] == MARK:
                    raise ValueError(f"{op.name} finds no value on the stack")
                memo[len(memo) if op.name == "MEMOIZE" else arg] = stack[-1]
            elif op.name in ("GET", "BINGET", "LONG_BINGET"):
                stack.append(memo[arg])  # KeyError: never stored
            elif op.name == "DUP":
                stack.extend(popped * 2)
            elif op.name == "MARK":
                stack.append(MARK)
            elif op.name == "STOP":
                root = popped[0]
                break
            elif op.name in MUTATORS:
                held[popped[0]].extend(popped[1:])
                stack.append(popped[0])
            elif op.stack_after:  # a new object holding what it popped (a tuple, a stub's arguments, ...)
                cost.append(1 + (len(arg) if isinstance(arg, (str, bytes)) else 0))
                held.append(popped)
                scalar.append(op.stack_after[0].name in SCALARS)
                stack.append(len(cost) - 1)
    except PickleRefused:
        raise
    except (KeyError, IndexError, ValueError) as exc:  # genops' own refusals, a GET never stored, no MARK
        raise ValueError(f"not a well-formed pickle ({type(exc).__name__}: {str(exc)[:100]})") from None
    if root is None:
        raise ValueError("not a well-formed pickle (no STOP)")
    return _size(root, cost, held)


def _size(root: int, cost: list[int], held: list[list[int]]) -> int:
    """The values and characters under `root`, shared nodes counted each time they are held, at most
    MAX_SIZE (without recursion: a pickle may nest as deeply as it has operations)."""
    size: dict[int, int] = {}
    open_nodes: set[int] = set()  # on the path from the root: meeting one again is a cycle
    todo = [(root, False)]
    while todo:
        node, children_done = todo.pop()
        if children_done:
            open_nodes.discard(node)
            size[node] = cost[node] + sum(size[c] for c in held[node])
            if size[node] > MAX_SIZE:
                raise PickleRefused(f"the pickle would build more than {MAX_SIZE:,} values and characters "
                                 "(one part held many times over)")
        elif node in open_nodes:
            raise PickleRefused("the pickle holds an object that holds itself")
        elif node not in size:
            open_nodes.add(node)
            todo.append((node, True))
            todo.extend((c, False) for c in held[node] if c not in size)
    return size[root]
