"""The audit signing key in a PKCS#11 token (SoftHSM2): made inside the token by `sursis audit
keygen --pkcs11`, never extractable; every checkpoint the sealer signs is signed there and checks
under the public key alone (an auditor's `verify`), an edited row is still named, and an exported
bundle signed through the token verifies offline.

Needs Debian's `softhsm2` and `python-pkcs11` (the `dev` extra; `.ci/run` installs softhsm2).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from sursis.app.cli import run as run_cli
from sursis.app.settings import Settings
from sursis.app.storage import build_audit_chain, build_unit_of_work
from sursis.domain.audit.audit_chain import Breach
from sursis.infra.db.engine import create_engine
from sursis.verify.__main__ import main as verify_main
from tests.conftest import make_settings
from tests.integration.softhsm import MODULE, PIN, TOKEN, softhsm_token
from tests.integration.test_audit_chain import row_id, sql, write_rows

pkcs11 = pytest.importorskip("pkcs11", reason="python-pkcs11 (the dev extra) is not installed")


@pytest.fixture(scope="session")
def softhsm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return softhsm_token(tmp_path_factory)


@pytest.fixture
def settings(softhsm: Path, database_url: str, tmp_path: Path) -> Settings:
    return make_settings(
        database_url,
        audit_signing_pkcs11_module=MODULE,
        audit_signing_pkcs11_token=TOKEN,
        audit_signing_pkcs11_key=f"audit-{uuid.uuid4().hex[:8]}",
        audit_signing_pkcs11_pin=PIN,
        audit_checkpoint_dir=tmp_path / "checkpoints",
        run_worker=False,
    )


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(database_url)
    yield engine
    await engine.dispose()


async def cli(settings: Settings, *argv: str) -> int:
    return await asyncio.to_thread(run_cli, list(argv), settings)


async def keygen(settings: Settings, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Path:
    """`sursis audit keygen --pkcs11`; the public key it prints, as a file."""
    assert await cli(settings, "audit", "keygen", "--pkcs11") == 0
    out = capsys.readouterr().out
    public = tmp_path / "public.pem"
    public.write_text(out[out.index("-----BEGIN PUBLIC KEY-----") :])
    return public


async def test_checkpoints_are_signed_in_the_token_and_check_under_the_public_key(
    settings: Settings, engine: AsyncEngine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    public = await keygen(settings, capsys, tmp_path)
    assert await cli(settings, "audit", "keygen", "--pkcs11") == 2
    assert "already holds a key labelled" in capsys.readouterr().err

    chain = build_audit_chain(settings.storage, build_unit_of_work(settings.storage, engine))
    assert chain.can_sign
    await write_rows(engine, "alpha", 6)
    assert await chain.seal_all() == 6
    [report] = await chain.verify("alpha")
    assert report.ok and report.head_seq == 6, report

    # an auditor's machine: the public key only, no token
    auditor = make_settings(settings.database_url, audit_signing_key_file=public, run_worker=False)
    assert await cli(auditor, "audit", "verify", "--workspace", "alpha") == 0
    assert "ok  workspace alpha" in capsys.readouterr().out

    victim = await row_id(engine, "alpha", 3)
    await sql(engine, "UPDATE audit_log SET actor = 'someone-else' WHERE id = :i", i=victim)
    [broken] = await chain.verify("alpha")
    assert broken.finding is not None and broken.finding.breach is Breach.EDITED and broken.finding.seq == 3
    assert await cli(auditor, "audit", "verify", "--workspace", "alpha") == 1


async def test_the_private_key_never_leaves_the_token(
    settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    await keygen(settings, capsys, tmp_path)
    token = pkcs11.lib(str(MODULE)).get_token(token_label=TOKEN)
    with token.open() as session:  # the process is logged in: keygen opened the token with the PIN
        private = session.get_key(
            object_class=pkcs11.ObjectClass.PRIVATE_KEY, label=settings.audit_signing_pkcs11_key
        )
        assert private[pkcs11.Attribute.SENSITIVE] is True
        assert private[pkcs11.Attribute.EXTRACTABLE] is False
        with pytest.raises(pkcs11.PKCS11Error):
            private[pkcs11.Attribute.VALUE]


async def test_a_bundle_signed_through_the_token_verifies_offline(
    settings: Settings, engine: AsyncEngine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    public = await keygen(settings, capsys, tmp_path)
    await write_rows(engine, "default", 4)
    assert (
        await build_audit_chain(settings.storage, build_unit_of_work(settings.storage, engine)).seal_all()
        == 4
    )
    out = tmp_path / "bundle"
    assert await cli(settings, "audit", "export", "--workspace", "default", "--out", str(out)) == 0
    capsys.readouterr()
    assert verify_main([str(out), "--key", str(public)]) == 0
    printed = capsys.readouterr().out
    assert "the bundle's key is the one given" in printed and "rows up to seq 4" in printed, printed


async def test_a_token_setting_left_out_is_named(
    softhsm: Path, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    partial = make_settings(database_url, audit_signing_pkcs11_module=MODULE, run_worker=False)
    assert await cli(partial, "audit", "keygen", "--pkcs11") == 2
    assert "also needs SURSIS_AUDIT_SIGNING_PKCS11_TOKEN" in capsys.readouterr().err
    wrong_pin = make_settings(
        database_url,
        audit_signing_pkcs11_module=MODULE,
        audit_signing_pkcs11_token=TOKEN,
        audit_signing_pkcs11_key="none-such",
        audit_signing_pkcs11_pin="0000",
        run_worker=False,
    )
    assert await cli(wrong_pin, "audit", "checkpoint") == 2
    err = capsys.readouterr().err
    assert "'none-such' in token 'sursis-audit' cannot be used" in err or "another PIN" in err, err
    assert "0000" not in err
