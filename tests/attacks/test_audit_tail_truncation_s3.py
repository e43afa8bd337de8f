"""The newest audit rows cut off by an insider with SQL rights, against a witness off the host: the
signed checkpoints also written to an S3-compatible bucket with object lock (here moto's S3 server,
started by the test, which enforces retention like S3).

The attack of `test_audit_tail_truncation.py` (copy `audit_checkpoints` and `audit_chain_heads`,
delete the newer rows, put the copies back) fails `verify` against the newest object in the bucket,
and the objects cannot be deleted while their retention holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from sursis.app.cli import run as run_cli
from sursis.app.settings import Settings
from sursis.domain.audit.audit_chain import Breach
from sursis.infra.db.engine import create_engine
from sursis.infra.encryption.signing import write_signing_key
from sursis.verify.__main__ import main as verify_main
from tests.attacks.test_audit_tail_truncation import chain_for, copy_rows, cut_tail_and_put_back
from tests.conftest import make_settings
from tests.integration.test_audit_chain import write_rows

boto3 = pytest.importorskip("boto3", reason="boto3 (the dev extra) is not installed")
pytest.importorskip("moto.server", reason="moto[server] (the dev extra) is not installed")

BUCKET = "sursis-witness"


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(database_url)
    yield engine
    await engine.dispose()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def s3_server() -> Iterator[str]:
    """moto's S3-compatible server on a free port, for this module's tests."""
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.fixture
def s3(s3_server: str, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> str:
    """A fresh object-locked bucket's prefix (one per test) and the credentials the client reads."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    client = boto3.client("s3", endpoint_url=s3_server)
    with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
        client.create_bucket(Bucket=BUCKET, ObjectLockEnabledForBucket=True)
    return f"run-{abs(hash(request.node.nodeid))}"


@pytest.fixture
def settings(database_url: str, tmp_path: Path, s3_server: str, s3: str) -> Settings:
    key = tmp_path / "audit-signing.pem"
    write_signing_key(key)
    return make_settings(
        database_url,
        audit_signing_key_file=key,
        audit_checkpoint_s3_bucket=BUCKET,
        audit_checkpoint_s3_prefix=s3,
        audit_checkpoint_s3_endpoint_url=s3_server,
        audit_checkpoint_s3_retention_days=1,
        run_worker=False,
    )


async def test_a_cut_tail_fails_against_the_bucket_and_its_objects_stay(
    settings: Settings, engine: AsyncEngine, s3_server: str, s3: str, tmp_path: Path
) -> None:
    chain = chain_for(settings, engine)
    await write_rows(engine, "alpha", 5)
    await chain.seal_all()
    copied = await copy_rows(engine, "alpha")
    await write_rows(engine, "alpha", 4)
    await chain.seal_all()
    [whole] = await chain.verify("alpha")
    assert whole.ok and whole.head_seq == 9, whole.finding

    client = boto3.client("s3", endpoint_url=s3_server)
    listed = client.list_object_versions(Bucket=BUCKET, Prefix=f"{s3}/alpha/")["Versions"]
    assert [v["Key"].split("/")[-1][:20] for v in sorted(listed, key=lambda v: v["Key"])] == [
        f"{5:020d}",
        f"{9:020d}",
    ]
    newest = max(listed, key=lambda v: v["Key"])
    with pytest.raises(client.exceptions.ClientError, match="AccessDenied"):
        client.delete_object(Bucket=BUCKET, Key=newest["Key"], VersionId=newest["VersionId"])

    bundle = tmp_path / "bundle"
    assert (
        await asyncio.to_thread(
            run_cli, ["audit", "export", "--workspace", "alpha", "--out", str(bundle)], settings
        )
        == 0
    )
    [inside, outside] = [json.loads(line) for line in (bundle / "checkpoints.jsonl").read_text().splitlines()]
    assert (inside["source"], outside["source"], outside["seq"]) == ("database", "external", 9)
    assert verify_main([str(bundle)]) == 0

    await cut_tail_and_put_back(engine, "alpha", copied)
    [report] = await chain.verify("alpha")
    assert report.finding is not None and report.finding.breach is Breach.DELETED, report
    assert "seq 6 to 9 missing" in report.finding.detail and f"s3://{BUCKET}/{s3}" in report.finding.detail


async def test_a_bucket_without_object_lock_is_refused(
    settings: Settings, engine: AsyncEngine, s3_server: str
) -> None:
    boto3.client("s3", endpoint_url=s3_server).create_bucket(Bucket="no-lock")
    unlocked = settings.model_copy(update={"audit_checkpoint_s3_bucket": "no-lock"})
    refused: list[str] = []
    chain = chain_for(unlocked, engine)
    chain.on_refused = lambda workspace, reason: refused.append(reason)
    await write_rows(engine, "beta", 2)
    await chain.seal_all()
    assert refused and "put_object refused" in refused[0], refused
