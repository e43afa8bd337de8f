"""The static check of predicate code: refusals name the node and the line."""

from __future__ import annotations

import pytest

from sursis.domain.worlds.predicates import PredicateRefused, check_predicate

GOOD = """def predicate(ctx):
    total = 0
    for item in ctx.get("items", []):
        if item.get("damaged") and not item.get("refunded"):
            total += 1
    return total > 0 and ctx.get("country", "").upper() in {"DE", "FR"}
"""


def refusal(source: str, function: str = "predicate") -> PredicateRefused:
    with pytest.raises(PredicateRefused) as caught:
        check_predicate(source, function)
    return caught.value


def test_a_plain_predicate_passes() -> None:
    check_predicate(GOOD)
    check_predicate("def applies_when(ctx):\n    return 'order' in ctx\n", "applies_when")


@pytest.mark.parametrize(
    ("source", "node", "line"),
    [
        ("import os\ndef predicate(ctx):\n    return True\n", "Import", 1),
        ("def predicate(ctx):\n    from os import path\n    return True\n", "ImportFrom", 2),
        ("def predicate(ctx):\n    while True:\n        pass\n", "While", 2),
        ("def predicate(ctx):\n    return __import__('os') is None\n", "Name", 2),
        ("def predicate(ctx):\n    return open('/etc/passwd') is None\n", "Name", 2),
        ("def predicate(ctx):\n    return eval('1') == 1\n", "Name", 2),
        ("def predicate(ctx):\n    return getattr(ctx, 'x')\n", "Name", 2),
        ("def predicate(ctx):\n    return time.time() > 0\n", "Name", 2),
        ("def predicate(ctx):\n    return random.random() > 0.5\n", "Name", 2),
        ("def predicate(ctx):\n    global x\n    return True\n", "Global", 2),
        ("def predicate(ctx):\n    def inner():\n        return 1\n    return True\n", "FunctionDef", 2),
        ("def predicate(ctx):\n    ctx['x'] = 1\n    return True\n", "Subscript", 2),
        ("def predicate(ctx):\n    ctx.x = 1\n    return True\n", "Attribute", 2),
        ("def predicate(ctx):\n    return ctx.__class__ is dict\n", "Attribute", 2),
        ("def predicate(ctx):\n    return (lambda: 1)() == 1\n", "Lambda", 2),
        ("def predicate(ctx):\n    return 2 ** 100000 > 1\n", "BinOp", 2),
        (
            "def predicate(ctx):\n    try:\n        return True\n    except Exception:\n        return False\n",
            "Try",
            2,
        ),
        ("def predicate(ctx):\n    return undefined_name\n", "Name", 2),
        ("x = 1\ndef predicate(ctx):\n    return True\n", "Assign", 1),
        ("def other(ctx):\n    return True\n", "FunctionDef", 1),
        ("def predicate(ctx, extra):\n    return True\n", "arguments", 1),
        ("def predicate(ctx):\n    return (\n", "SyntaxError", 2),
        # Nodes without a line of their own (operators) are reported on their parent's line.
        ("def predicate(ctx):\n    return (1 << 100000000000) > 0\n", "LShift", 2),
        ("def predicate(ctx):\n    x = 1\n    y = ~x\n    return y > 0\n", "Invert", 3),
        ("\n\ndef predicate(ctx):\n    return ctx.get('a') | 1\n", "BitOr", 4),
        # A decorator is reported where it is written, not on the `def` below it.
        ("@staticmethod\ndef predicate(ctx):\n    return True\n", "decorator", 1),
    ],
)
def test_refusals_name_the_node_and_line(source: str, node: str, line: int) -> None:
    refused = refusal(source)
    assert (refused.node, refused.line) == (node, line), str(refused)
    assert str(refused).startswith(f"line {line}: {node}: ")


def test_a_refusal_says_why() -> None:
    assert "while loops are not allowed" in str(refusal("def predicate(ctx):\n    while 1:\n        pass\n"))
    assert "imports are not allowed" in str(refusal("import os\ndef predicate(ctx):\n    return True\n"))
    assert "'__import__'" in str(refusal("def predicate(ctx):\n    return __import__('os')\n"))


def test_the_code_is_bounded() -> None:
    assert "longer than" in str(refusal("def predicate(ctx):\n    return True\n" + "#" * 9000))
