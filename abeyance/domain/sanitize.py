"""Masking of secrets and personal data in argument summaries and logs."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

SECRET_KEY = re.compile(
    r"(pass(word|wd)?|secret|token|api[_-]?key|auth|credential|private[_-]?key|cookie)", re.I
)
EMAIL = re.compile(r"[\w.+-]+@[\w-]+(\.[\w-]+)+")
CARD = re.compile(r"\b(?:\d[ -]?){13,19}\b")
PHONE = re.compile(r"(?<!\w)\+?\d[\d ()-]{7,}\d(?!\w)")
MASK = "***"
MAX_STRING = 200
MAX_ITEMS = 20
MAX_DEPTH = 4


def mask_text(text: str) -> str:
    text = EMAIL.sub("***@***", text)
    text = CARD.sub("****", text)
    text = PHONE.sub("***", text)
    if len(text) > MAX_STRING:
        text = text[:MAX_STRING] + f"…(+{len(text) - MAX_STRING} chars)"
    return text


def sanitize(value: Any, *, depth: int = 0) -> Any:
    """A bounded copy of `value` with secrets and personal data masked."""
    if depth >= MAX_DEPTH:
        return "…"
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for i, (key, item) in enumerate(value.items()):
            if i >= MAX_ITEMS:
                out["…"] = f"+{len(value) - MAX_ITEMS} more"
                break
            out[str(key)] = MASK if SECRET_KEY.search(str(key)) else sanitize(item, depth=depth + 1)
        return out
    if isinstance(value, list | tuple):
        items = [sanitize(v, depth=depth + 1) for v in value[:MAX_ITEMS]]
        if len(value) > MAX_ITEMS:
            items.append(f"+{len(value) - MAX_ITEMS} more")
        return items
    if isinstance(value, str):
        return mask_text(value)
    if isinstance(value, bool | float) or value is None:
        return value
    if isinstance(value, int):
        return mask_text(str(value)) if len(str(abs(value))) >= 9 else value
    return mask_text(str(value))


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def args_hash(tool_name: str, args: dict[str, Any]) -> str:
    """Binds an approval to exactly what was shown: the tool name and its canonical args."""
    return hashlib.sha256(canonical_json({"tool": tool_name, "args": args}).encode()).hexdigest()
