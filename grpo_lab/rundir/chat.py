"""Chat prompts as the samples table holds them (rendered by a chat template): back to their turns.

Below both of its readers: the dashboard shows a prompt's turns, and preferences.py exports TRL's
conversational preference rows from them.
"""

from __future__ import annotations

import re

# Chat templates as rendered into prompts: ChatML (SmolLM2, Qwen) and Llama 3's headers.
_TURNS = (re.compile(r"<\|im_start\|>(\w+)\n(.*?)(?:<\|im_end\|>|$)", re.S),
          re.compile(r"<\|start_header_id\|>(\w+)<\|end_header_id\|>\n*(.*?)(?:<\|eot_id\|>|$)", re.S))


def chat_turns(prompt: str) -> list[tuple[str, str]]:
    """[(role, content), ...] of a chat-formatted prompt; [] when it is plain text.

    >>> chat_turns("<|im_start|>user\\nHi<|im_end|>\\n<|im_start|>assistant\\n")
    [('user', 'Hi')]
    >>> chat_turns("3+4=")
    []
    """
    for pattern in _TURNS:
        turns = [(role, content.strip()) for role, content in pattern.findall(prompt or "")]
        if turns:
            return [t for t in turns if t[1] or t[0] != "assistant"]  # the open assistant turn is the completion
    return []


_MESSAGE_LINE = re.compile(r"^(system|user|assistant|tool): ", re.M)


def prompt_key(prompt: str) -> str:
    """What a prompt asks, whatever the source wrote around it: the user turns of a chat template
    (a native run's rendered prompt) or of `role: content` lines (an imported conversation), else
    the text itself. The same question matches across a native run and a TRL run.

    >>> prompt_key("<|im_start|>user\\nHi<|im_end|>\\n<|im_start|>assistant\\n") == prompt_key("user: Hi")
    True
    """
    turns = chat_turns(prompt or "")
    if not turns and _MESSAGE_LINE.match(prompt or ""):
        parts = _MESSAGE_LINE.split(prompt)[1:]  # role, content, role, content, ...
        turns = [(role, content.strip()) for role, content in zip(parts[::2], parts[1::2])]
    user = [content for role, content in turns if role == "user"]
    return "\n".join(user) if user else (prompt or "").strip()
