"""Rules of the house that no linter checks, read from the source: every error the service raises
derives from the one base (`sursis.domain.errors.Error`) and so carries a `code`; no class is built
from more than one concrete base (Protocols, ABCs, generics and enums aside). `sursis.client` and
`sursis.integrations` run in other programs, without the service, and keep bases of their own."""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

import sursis
from sursis.domain.errors import Error

ROOT = Path(sursis.__file__).parent
OUTSIDE = ("client", "integrations")
BUILTIN_ERRORS = {
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
}
NOT_CONCRETE = ("Protocol", "ABC", "Generic", "Enum", "StrEnum", "IntEnum", "TypedDict", "NamedTuple")


def _classes() -> dict[str, tuple[str, list[str]]]:
    """Each class of the service: where it is defined and the last part of each base's name."""
    found: dict[str, tuple[str, list[str]]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT)
        if relative.parts[0] in OUTSIDE:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(base).split("[")[0].rsplit(".", 1)[-1] for base in node.bases]
                found[f"{relative}:{node.name}"] = (node.name, bases)
    return found


def _root(name: str, by_name: dict[str, list[str]], seen: frozenset[str] = frozenset()) -> str:
    bases = by_name.get(name)
    if not bases or name in seen:
        return name
    return _root(bases[0], by_name, seen | {name})


def test_every_error_derives_from_the_one_base() -> None:
    classes = _classes()
    by_name = dict(classes.values())
    errors = {where: name for where, (name, _) in classes.items() if _root(name, by_name) in BUILTIN_ERRORS}
    assert len(errors) > 60, "the walk found the service's errors"
    outside = sorted(
        where for where, name in errors.items() if name != "Error" and not _reaches(name, by_name)
    )
    assert outside == [], f"errors outside the one base ({Error.__module__}.Error): {outside}"


def _reaches(name: str, by_name: dict[str, list[str]]) -> bool:
    seen: set[str] = set()
    while name in by_name and name not in seen:
        seen.add(name)
        if "Error" in by_name[name]:
            return True
        name = by_name[name][0] if by_name[name] else ""
    return False


def test_no_class_has_two_concrete_bases() -> None:
    doubled = sorted(
        f"{where}({', '.join(bases)})"
        for where, (_, bases) in _classes().items()
        if len([base for base in bases if base not in NOT_CONCRETE and base != "object"]) > 1
    )
    assert doubled == [], f"classes built from more than one concrete base: {doubled}"
