"""Tools a policy calls during a rollout: loading them, finding calls in text, running them safely.

The multi-turn rollout that uses them is grpo_lab/trainer/multiturn.py.
"""

from grpo_lab.tools.calculator import calculator
from grpo_lab.tools.parsing import CHARACTER_CALC, XML_CALC, TagSyntax, ToolCall, find_call
from grpo_lab.tools.registry import BUILTIN, ToolError, environment_tools, load_environment, load_tools, new_environment
from grpo_lab.tools.runner import ToolResult, run_call

__all__ = ["BUILTIN", "CHARACTER_CALC", "XML_CALC", "TagSyntax", "ToolCall", "ToolError", "ToolResult",
           "calculator", "environment_tools", "find_call", "load_environment", "load_tools", "new_environment",
           "run_call"]
