"""The benchmarks use only the public API: `abeyance`'s top-level names, `abeyance.client`,
`abeyance.testing` and HTTP; never the service's internals, nor the test suite's helpers."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
PUBLIC = ("abeyance", "abeyance.client", "abeyance.testing")
INTERNAL = ("abeyance.app", "abeyance.infra", "abeyance.domain", "abeyance.migrations")


def is_public(module: str) -> bool:
    return module == "abeyance" or any(module.startswith(f"{p}.") or module == p for p in PUBLIC[1:])


def offences(source: str) -> list[str]:
    """Imports of anything under `abeyance` but the public modules, imports of `tests`, and
    strings that name an internal module (`python -m abeyance.app.cli`, `import_module(...)`)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found += [f"line {node.lineno}: names {m}" for m in INTERNAL if m in node.value]
        for module in modules:
            root = module.split(".")[0]
            if (root == "abeyance" and not is_public(module)) or root == "tests":
                found.append(f"line {node.lineno}: imports {module}")
    return found


@pytest.mark.parametrize("path", sorted(BENCH.glob("*.py")), ids=lambda p: p.name)
def test_a_bench_script_imports_only_the_public_api(path: Path) -> None:
    assert offences(path.read_text()) == []


def test_the_check_catches_internal_imports_and_allows_the_public_ones() -> None:
    source = (
        "import abeyance\nimport abeyance.client\nfrom abeyance import Service\n"
        "from abeyance.testing import ScriptedModel\nimport httpx, sqlalchemy as sa\nfrom common import send\n"
        "from abeyance.app.container import build_container\nimport abeyance.infra.db.engine\n"
        "from abeyance.domain import states\nfrom tests.faults.processes import Cluster\n"
        "cmd = ['python', '-m', 'abeyance.app.cli']\n"
    )
    assert offences(source) == [
        "line 7: imports abeyance.app.container",
        "line 8: imports abeyance.infra.db.engine",
        "line 9: imports abeyance.domain",
        "line 10: imports tests.faults.processes",
        "line 11: names abeyance.app",
    ]
    assert len(list(BENCH.glob("*.py"))) >= 5
