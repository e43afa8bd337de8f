"""`sursis audit export` and `python -m sursis.verify`: a workspace's evidence checked offline.

The bundle comes from the real service (a keyring, so decisions are sealed; a signing key; the
external checkpoint log) after a quorum-2 refund ran; the verifier then runs on it with nothing but
the files, and on copies with one row edited, one row dropped, one seal swapped between two
records, or two checkpoints' signatures swapped: each fails and names what was changed. A fresh
venv holding only `cryptography` runs the verifier from the source tree (`packaging` marker).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from sursis.app.cli import run as run_cli
from sursis.app.settings import Settings
from sursis.domain.access import Role
from sursis.infra.encryption.signing import Ed25519Signer, write_signing_key
from sursis.verify.__main__ import main as verify_main
from tests.attacks.forged_decisions import FINANCE_2, keyring, settled
from tests.attacks.policy_attacks import Shop, open_shop, refunds
from tests.conftest import KeyMaker
from tests.packaging.installing import REPO, clean_env, fresh_venv


@pytest.fixture
async def shop(seeded: str, keys: KeyMaker, tmp_path: Path) -> AsyncIterator[Shop]:
    key = tmp_path / "audit-signing.pem"
    write_signing_key(key)
    async with open_shop(
        seeded,
        keys,
        encryption_keys=keyring(),
        audit_signing_key_file=key,
        audit_checkpoint_dir=tmp_path / "checkpoints",
    ) as opened:
        for name in ("rex", "ann", "bob"):
            await opened.key(name, Role.OPERATOR)
        await opened.group("finance", "ann", "bob")
        assert (await opened.put_policy(FINANCE_2)).status_code == 200
        yield opened


async def cli(settings: Settings, *argv: str) -> int:
    return await asyncio.to_thread(run_cli, list(argv), settings)


@pytest.fixture
async def bundle(shop: Shop, tmp_path: Path) -> Path:
    """Two refunds decided by both approvers, the chain sealed and signed after each, exported."""
    assert shop.settings is not None
    for order in ("A1", "A2"):
        asked = await shop.ask("rex", order_id=order, amount=5)
        [call] = asked["pending"]
        assert (await shop.resolve("ann", call["correlation_id"])).status_code == 200
        assert (await shop.resolve("bob", call["correlation_id"])).json()["status"] == "approved"
        assert (await settled(shop, asked["id"]))["status"] == "completed"
        assert await cli(shop.settings, "audit", "verify", "--workspace", "default", "--seal") == 0
    assert len(refunds()) == 2
    out = tmp_path / "bundle"
    assert await cli(shop.settings, "audit", "export", "--workspace", "default", "--out", str(out)) == 0
    return out


def verify(path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    capsys.readouterr()
    code = verify_main([str(path), *extra])
    return code, capsys.readouterr().out


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def rewrite(path: Path, records: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in records))


def tampered(bundle: Path, tmp_path: Path, name: str) -> Path:
    copy = tmp_path / name
    shutil.copytree(bundle, copy)
    return copy


async def test_an_exported_bundle_verifies_offline_and_says_what_it_proves(
    bundle: Path, shop: Shop, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = json.loads((bundle / "bundle.json").read_text())
    kinds = [s["kind"] for s in lines(bundle / "seals.jsonl")]
    assert kinds.count("ask") == 2 and kinds.count("decision") == 2 and kinds.count("vote") == 4, kinds
    assert manifest["counts"]["rows"] == manifest["head"]["seq"] > 0
    assert manifest["counts"]["policies"] >= 1 and manifest["decision_seals"] == "on"
    key = tmp_path / "public.pem"
    key.write_bytes((bundle / "public_key.pem").read_bytes())
    code, out = verify(bundle, capsys, "--key", str(key))
    assert code == 0, out
    assert "ok: the bundle holds" in out and "FAILED" not in out, out
    assert f"the chain from seq 1 to {manifest['head']['seq']} is whole" in out, out
    assert "8 decision seal(s) were checked by the service" in out, out
    assert "the bundle's key is the one given" in out, out

    other = tmp_path / "other.pem"
    write_signing_key(tmp_path / "other-private.pem")
    other.write_text(Ed25519Signer.from_file(tmp_path / "other-private.pem").public_pem())
    code, out = verify(bundle, capsys, "--key", str(other))
    assert code == 1 and "is not the key given" in out, out

    assert shop.settings is not None
    archive = tmp_path / "evidence.tar.gz"
    assert await cli(shop.settings, "audit", "export", "--workspace", "default", "--out", str(archive)) == 0
    code, out = verify(archive, capsys)
    assert code == 0 and "came with the bundle" in out, out
    assert await cli(shop.settings, "audit", "export", "--workspace", "default", "--out", str(archive)) == 2


async def test_since_starts_the_export_later_and_the_export_is_on_record(
    bundle: Path, shop: Shop, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert shop.settings is not None
    rows = lines(bundle / "chain.jsonl")
    middle = rows[len(rows) // 2]
    later = tmp_path / "later"
    since = middle["content"]["at"]
    assert (
        await cli(
            shop.settings, "audit", "export", "--workspace", "default", "--since", since, "--out", str(later)
        )
        == 0
    )
    manifest = json.loads((later / "bundle.json").read_text())
    first = lines(later / "chain.jsonl")[0]
    assert manifest["since"] is not None and manifest["from_seq"] == first["seq"] > 1
    assert first["content"]["at"] >= since and manifest["from_hash"] == first["prev_hash"]
    code, out = verify(later, capsys)
    assert code == 0 and f"the chain from seq {first['seq']} to" in out, out

    assert await cli(shop.settings, "audit", "verify", "--workspace", "default", "--seal") == 0
    audit = await shop.http.get(
        "/v1/audit", params={"action": "audit.exported"}, headers=shop.headers["admin"]
    )
    exported = [e for e in audit.json()["items"] if e["action"] == "audit.exported"]
    assert len(exported) == 2 and exported[0]["actor"] == "cli", exported


async def test_an_edited_row_fails_naming_it(
    bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tampered(bundle, tmp_path, "edited")
    rows = lines(copy / "chain.jsonl")
    victim = rows[3]
    victim["content"]["actor"] = "someone-else"
    rewrite(copy / "chain.jsonl", rows)
    code, out = verify(copy, capsys)
    assert code == 1, out
    assert (
        f"seq {victim['seq']} (row id {victim['content']['id']}): content does not match its hash (edited)"
        in out
    ), out
    assert "chain.jsonl: does not match the digest the manifest signed" in out, out


async def test_a_malformed_bundle_fails_without_a_traceback(
    bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tampered(bundle, tmp_path, "malformed")
    rows = lines(copy / "chain.jsonl")
    rows[0]["seq"] = "one"
    rewrite(copy / "chain.jsonl", rows)
    code, out = verify(copy, capsys)
    assert code == 1 and "the bundle is malformed (ValueError" in out, out


async def test_a_dropped_row_fails_naming_it(
    bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tampered(bundle, tmp_path, "dropped")
    rows = lines(copy / "chain.jsonl")
    gone = rows.pop(2)
    rewrite(copy / "chain.jsonl", rows)
    code, out = verify(copy, capsys)
    assert code == 1, out
    assert f"seq {gone['seq']} to {gone['seq']} missing (rows dropped)" in out, out

    rows.pop()  # the newest row too: the chain ends before the head the manifest names
    rewrite(copy / "chain.jsonl", rows)
    code, out = verify(copy, capsys)
    head = json.loads((copy / "bundle.json").read_text())["head"]["seq"]
    assert code == 1 and f"seq {head} to {head} missing (the head is at {head})" in out, out


async def test_a_swapped_seal_fails_naming_both_calls(
    bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tampered(bundle, tmp_path, "swapped-seal")
    seals = lines(copy / "seals.jsonl")
    first, second = [s for s in seals if s["kind"] == "decision"]
    first["seal"], second["seal"] = second["seal"], first["seal"]
    rewrite(copy / "seals.jsonl", seals)
    code, out = verify(copy, capsys)
    assert code == 1, out
    for record in (first, second):
        call = record["facts"]["correlation_id"]
        assert f"the decision seal of call {call}: its attestation does not hold" in out, out


async def test_swapped_checkpoints_fail_naming_them(
    bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tampered(bundle, tmp_path, "swapped-checkpoint")
    checkpoints = lines(copy / "checkpoints.jsonl")
    external = [c for c in checkpoints if c["source"] == "external"]
    assert len(external) >= 2, checkpoints
    first, last = external[0], external[-1]
    first["signature"], last["signature"] = last["signature"], first["signature"]
    rewrite(copy / "checkpoints.jsonl", checkpoints)
    code, out = verify(copy, capsys)
    assert code == 1, out
    for cp in (first, last):
        assert f"the external checkpoint at seq {cp['seq']}: its signature does not hold" in out, out


def python(bin_dir: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The venv's python, with the source tree on its path and nothing else from the checkout."""
    env = clean_env(bin_dir, PYTHONPATH=str(REPO))
    return subprocess.run([str(bin_dir / "python"), *args], capture_output=True, text=True, env=env, cwd=cwd)


IMPORTED = (
    "import sys, sursis, sursis.verify.__main__; "
    "print(sorted({m.split('.')[0] for m in sys.modules if not m.startswith(('sursis', '_'))}))"
)


@pytest.mark.packaging
async def test_the_verifier_runs_in_a_venv_with_only_cryptography(bundle: Path, tmp_path: Path) -> None:
    bin_dir = await asyncio.to_thread(fresh_venv, tmp_path / "venv", ["cryptography"])
    imported = await asyncio.to_thread(python, bin_dir, tmp_path, "-c", IMPORTED)
    assert imported.returncode == 0, imported.stderr
    assert "sqlalchemy" not in imported.stdout and "pydantic" not in imported.stdout, imported.stdout
    done = await asyncio.to_thread(python, bin_dir, tmp_path, "-m", "sursis.verify", str(bundle))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok: the bundle holds" in done.stdout, done.stdout
    rows = lines(bundle / "chain.jsonl")
    rows[1]["content"]["action"] = "pending.approved"
    rewrite(bundle / "chain.jsonl", rows)
    done = await asyncio.to_thread(python, bin_dir, tmp_path, "-m", "sursis.verify", str(bundle))
    assert done.returncode == 1 and f"seq {rows[1]['seq']}" in done.stdout, done.stdout
