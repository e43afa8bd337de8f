"""One SoftHSM2 token per test process, for the PKCS#11 tests (Debian's `softhsm2`; `.ci/run`
installs it). A PKCS#11 library is initialized once per process and reads its configuration
then, so every test of the process shares this token, each with key labels of its own."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

MODULE = Path("/usr/lib/softhsm/libsofthsm2.so")
TOKEN, PIN = "sursis-audit", "4321"
_made: list[Path] = []


def softhsm_token(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The process's token's configuration file (made, and the token initialized, on first use)."""
    if not MODULE.exists():
        pytest.skip("Debian's softhsm2 is not installed (.ci/run installs it)")
    if _made:
        return _made[0]
    root = tmp_path_factory.mktemp("softhsm")
    (root / "tokens").mkdir()
    conf = root / "softhsm2.conf"
    conf.write_text(
        f"directories.tokendir = {root / 'tokens'}\nobjectstore.backend = file\nlog.level = ERROR\n"
    )
    os.environ["SOFTHSM2_CONF"] = str(conf)
    subprocess.run(
        ["softhsm2-util", "--init-token", "--free", "--label", TOKEN, "--pin", PIN, "--so-pin", "8765"],
        check=True,
        capture_output=True,
    )
    _made.append(conf)
    return conf
