"""`python -m sursis.verify PATH [--key PUBLIC.pem]`: exit 0 when the bundle holds, 1 when not."""

from __future__ import annotations

import argparse
import sys
import tarfile
import tempfile
from pathlib import Path

from sursis.verify.checks import Report, verify_bundle


def _verify(path: Path, pinned: bytes | None) -> Report:
    """A directory is checked in place; an archive (`.tar`, `.tar.gz`) is unpacked to a temporary
    directory first, refusing members that would land outside it."""
    if path.is_dir():
        return verify_bundle(path, pinned)
    with tempfile.TemporaryDirectory() as scratch, tarfile.open(path) as archive:
        archive.extractall(scratch, filter="data")
        inner = [p for p in Path(scratch).iterdir() if p.is_dir()]
        return verify_bundle(inner[0] if len(inner) == 1 else Path(scratch), pinned)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sursis.verify", description=__doc__)
    parser.add_argument("path", type=Path, help="the bundle `sursis audit export` wrote")
    parser.add_argument("--key", type=Path, help="the service's audit public key (PEM), obtained apart")
    args = parser.parse_args(argv)
    try:
        pinned = args.key.read_bytes() if args.key is not None else None
        report = _verify(args.path, pinned)
    except (OSError, tarfile.TarError) as exc:
        print(f"sursis.verify: cannot read {args.path}: {exc}", file=sys.stderr)
        return 2
    for line in report.proven:
        print(f"proven   {line}")
    for line in report.limits:
        print(f"limit    {line}")
    for line in report.failures:
        print(f"FAILED   {line}")
    print("ok: the bundle holds" if report.ok else f"BROKEN: {len(report.failures)} failure(s)")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
