"""The benchmarks use only the public API: `sursis`'s top-level names, `sursis.client`,
`sursis.testing` and HTTP; never the service's internals, nor the test suite's helpers."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
PUBLIC = ("sursis", "sursis.client", "sursis.testing")
INTERNAL = ("sursis.app", "sursis.infra", "sursis.domain", "sursis.migrations")


def is_public(module: str) -> bool:
    return module == "sursis" or any(module.startswith(f"{p}.") or module == p for p in PUBLIC[1:])


def offences(source: str) -> list[str]:
    """Imports of anything under `sursis` but the public modules, imports of `tests`, and
    strings that name an internal module (`python -m sursis.app.cli`, `import_module(...)`)."""
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
            if (root == "sursis" and not is_public(module)) or root == "tests":
                found.append(f"line {node.lineno}: imports {module}")
    return found


@pytest.mark.parametrize("path", sorted(BENCH.glob("*.py")), ids=lambda p: p.name)
def test_a_bench_script_imports_only_the_public_api(path: Path) -> None:
    assert offences(path.read_text()) == []


def test_the_check_catches_internal_imports_and_allows_the_public_ones() -> None:
    source = (
        "import sursis\nimport sursis.client\nfrom sursis import Service\n"
        "from sursis.testing import ScriptedModel\nimport httpx, sqlalchemy as sa\nfrom common import send\n"
        "from sursis.app.container import build_container\nimport sursis.infra.db.engine\n"
        "from sursis.domain import states\nfrom tests.faults.processes import Cluster\n"
        "cmd = ['python', '-m', 'sursis.app.cli']\n"
    )
    assert offences(source) == [
        "line 7: imports sursis.app.container",
        "line 8: imports sursis.infra.db.engine",
        "line 9: imports sursis.domain",
        "line 10: imports tests.faults.processes",
        "line 11: names sursis.app",
    ]
    assert len(list(BENCH.glob("*.py"))) >= 5
