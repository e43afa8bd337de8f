"""The static check of model-written predicate code, before anything stores or runs it.

A predicate is one function, `def predicate(ctx) -> bool` (or `def applies_when(ctx) -> bool`),
over a plain dict of input context. The check walks the syntax tree and refuses the first node
outside a small, side-effect-free subset of Python, naming the node and its line so the model can
fix the code. Passing the check does not make code safe to run in this process: the readiness
gate still runs it in a separate, resource-limited process.
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

from sursis.domain.errors import Error

MAX_SOURCE_CHARS = 8000

ALLOWED_BUILTINS = frozenset(
    {
        "abs", "all", "any", "bool", "dict", "enumerate", "float", "int", "isinstance", "len",
        "list", "max", "min", "range", "round", "set", "sorted", "str", "sum", "tuple", "zip",
        "True", "False", "None",
    }
)  # fmt: skip
FORBIDDEN_NAMES = frozenset(
    {
        "open", "exec", "eval", "compile", "__import__", "getattr", "setattr", "delattr", "globals",
        "locals", "vars", "dir", "input", "print", "breakpoint", "help", "memoryview", "type",
        "object", "super", "id", "hash", "iter", "next", "time", "random", "os", "sys", "subprocess",
        "socket", "datetime", "uuid", "secrets", "io", "pathlib", "shutil", "importlib", "builtins",
    }
)  # fmt: skip
ALLOWED_METHODS = frozenset(
    {"get", "keys", "values", "items", "lower", "upper", "strip", "startswith", "endswith", "split",
     "count", "index", "join", "replace"}
)  # fmt: skip

_ALLOWED_NODES: tuple[type[ast.AST], ...] = (
    ast.Module, ast.FunctionDef, ast.arguments, ast.arg, ast.Return, ast.If, ast.For, ast.Break,
    ast.Continue, ast.Pass, ast.Assign, ast.AugAssign, ast.Expr, ast.BoolOp, ast.BinOp, ast.UnaryOp,
    ast.Compare, ast.IfExp, ast.Call, ast.keyword, ast.Constant, ast.Name, ast.Load, ast.Store,
    ast.Attribute, ast.Subscript, ast.Slice, ast.List, ast.Tuple, ast.Set, ast.Dict, ast.ListComp,
    ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.comprehension, ast.And, ast.Or, ast.Not,
    ast.USub, ast.UAdd, ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Eq,
    ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.In, ast.NotIn, ast.Is, ast.IsNot,
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class PredicateRefused(Error):
    """The code is outside the allowed subset: `node` is the offending syntax, `line` where it is."""

    code = "predicate_refused"

    node: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.node}: {self.reason}"


def check_predicate(source: str, function_name: str = "predicate") -> None:
    """Raise `PredicateRefused` unless `source` is exactly one allowed `def <function_name>(ctx)`."""
    if len(source) > MAX_SOURCE_CHARS:
        raise PredicateRefused("Module", 1, f"the code is longer than {MAX_SOURCE_CHARS} characters")
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise PredicateRefused("SyntaxError", exc.lineno or 1, exc.msg) from None
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function_name]
    for node in tree.body:
        if node not in functions:
            reason = (
                _reason_for(node)
                if not isinstance(node, _ALLOWED_NODES)
                else f"only `def {function_name}(ctx)` may be at the top level"
            )
            raise PredicateRefused(type(node).__name__, _line(node), reason)
    if len(functions) != 1:
        line = functions[1].lineno if functions else 1
        raise PredicateRefused("Module", line, f"the code must be exactly one `def {function_name}(ctx)`")
    function = functions[0]
    args = function.args
    if (
        [a.arg for a in args.args] != ["ctx"]
        or args.vararg
        or args.kwarg
        or args.kwonlyargs
        or args.posonlyargs
        or args.defaults
    ):
        raise PredicateRefused(
            "arguments", function.lineno, f"{function_name} takes exactly one argument, ctx"
        )
    if function.decorator_list:
        raise PredicateRefused("decorator", _line(function.decorator_list[0]), "decorators are not allowed")
    local_names = {"ctx"} | _assigned_names(function)
    nodes = list(_walk_with_lines(function))
    # Forbidden names first: `time.time()` is refused for `time`, not for the attribute after it.
    for inner, line in nodes:
        if isinstance(inner, ast.Name) and inner.id in FORBIDDEN_NAMES:
            _check_node(inner, line, local_names)
    for inner, line in nodes:
        _check_node(inner, line, local_names)


def _assigned_names(function: ast.FunctionDef) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def _line(node: ast.AST, default: int = 1) -> int:
    return getattr(node, "lineno", default)


def _walk_with_lines(root: ast.AST) -> Iterator[tuple[ast.AST, int]]:
    """Every node under `root` (breadth first, as `ast.walk`) with its line: a node that has
    none (an operator such as `<<`, a context such as `Load`) is on its parent's line."""
    queue = deque([(root, _line(root))])
    while queue:
        node, line = queue.popleft()
        yield node, line
        queue.extend((child, _line(child, line)) for child in ast.iter_child_nodes(node))


def _check_node(node: ast.AST, line: int, local_names: set[str]) -> None:
    name = type(node).__name__
    if isinstance(node, ast.FunctionDef) and node.name not in ("predicate", "applies_when"):
        raise PredicateRefused(name, line, "nested functions are not allowed")
    if not isinstance(node, _ALLOWED_NODES):
        raise PredicateRefused(name, line, _reason_for(node))
    if isinstance(node, ast.Name):
        if node.id.startswith("__"):
            raise PredicateRefused(name, line, f"dunder name {node.id!r} is not allowed")
        if node.id in FORBIDDEN_NAMES:
            raise PredicateRefused(name, line, f"{node.id!r} is I/O, reflection or nondeterministic")
        if isinstance(node.ctx, ast.Load) and node.id not in local_names and node.id not in ALLOWED_BUILTINS:
            raise PredicateRefused(name, line, f"{node.id!r} is not an allowed builtin or local name")
    elif isinstance(node, ast.Attribute):
        if node.attr.startswith("_"):
            raise PredicateRefused(name, line, f"private or dunder attribute {node.attr!r}")
        if isinstance(node.ctx, ast.Store):
            raise PredicateRefused(name, line, "assigning to an attribute is not allowed")
        if node.attr not in ALLOWED_METHODS:
            raise PredicateRefused(name, line, f"attribute {node.attr!r} is not an allowed method")
    elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
        raise PredicateRefused(name, line, "assigning to a subscript is not allowed")
    elif isinstance(node, ast.Constant) and isinstance(node.value, str | bytes) and len(node.value) > 1000:
        raise PredicateRefused(name, line, "string constants are limited to 1000 characters")
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
        raise PredicateRefused(name, line, "exponentiation is not allowed")


def _reason_for(node: ast.AST) -> str:
    match node:
        case ast.Import() | ast.ImportFrom():
            return "imports are not allowed"
        case ast.Global() | ast.Nonlocal():
            return "global and nonlocal are not allowed"
        case ast.While():
            return "while loops are not allowed; iterate over a bounded collection with for"
        case ast.Lambda() | ast.AsyncFunctionDef() | ast.ClassDef():
            return "nested definitions are not allowed"
        case ast.Try() | ast.Raise() | ast.With() | ast.AsyncWith():
            return "exception handling and context managers are not allowed"
        case ast.Yield() | ast.YieldFrom() | ast.Await():
            return "generators and coroutines are not allowed"
        case ast.Delete():
            return "del is not allowed"
        case ast.NamedExpr():
            return "assignment expressions are not allowed"
        case ast.LShift() | ast.RShift() | ast.BitAnd() | ast.BitOr() | ast.BitXor() | ast.Invert():
            return "bitwise operators are not allowed"
        case _:
            return "this syntax is not allowed in a predicate"
