"""`python -m sursis.verify PATH`: an audit bundle checked with no database and no service.

Runs with only the standard library and `cryptography` installed (importing `sursis` loads nothing
else). `sursis audit export` writes the bundle (docs/audit.md: what it proves).
"""

from __future__ import annotations

from sursis.verify.checks import Report, verify_bundle

__all__ = ["Report", "verify_bundle"]
