"""One resolver for `package.module:name` strings: a user's reward function or factory
(rewards/registry.py), a tool or an environment class (tools/registry.py).

`resolve` raises ImportPathError saying which of three things went wrong (`kind`: "shape", "import",
"attribute"); each caller words the one-line message for its own option, so a config error names
the option the user wrote. A module that fails on import, whatever it raises, is an "import" error:
the user's file, not the trainer, is at fault.

>>> resolve("json:dumps").__name__
'dumps'
>>> resolve("os:path.join").__name__
'join'
>>> resolve("json")
Traceback (most recent call last):
...
grpo_lab.rewards.import_path.ImportPathError: 'json' is not module:name
"""

from __future__ import annotations

import importlib


class ImportPathError(ValueError):
    """`path` could not be resolved: `kind` is "shape" (not module:name), "import" (the module failed;
    `cause` is why) or "attribute" (the module has no `attr`)."""

    def __init__(self, message: str, *, kind: str, module: str = "", attr: str = "",
                 cause: BaseException | None = None):
        super().__init__(message)
        self.kind, self.module, self.attr, self.cause = kind, module, attr, cause


def resolve(path: str):
    """The object `path` ("package.module:name", the name may be dotted: "module:Class.method") names."""
    module_name, _, attr_path = path.partition(":")
    if not module_name or not attr_path:
        raise ImportPathError(f"{path!r} is not module:name", kind="shape")
    try:
        obj = importlib.import_module(module_name)
    except Exception as exc:  # ImportError, or the module itself failing on import
        raise ImportPathError(f"cannot import {module_name!r} ({exc})", kind="import", module=module_name,
                              attr=attr_path, cause=exc) from exc
    for attr in attr_path.split("."):
        if not hasattr(obj, attr):
            raise ImportPathError(f"module {module_name!r} has no {attr_path!r}", kind="attribute",
                                  module=module_name, attr=attr_path)
        obj = getattr(obj, attr)
    return obj
