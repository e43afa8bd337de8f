"""The external checkpoint log in an S3-compatible bucket with object lock: a witness off the host.

Each signed checkpoint is one object, `PREFIX/WORKSPACE/SEQ-SIGNED_AT.json` (the seq zero-padded so
the names sort in chain order), written with a retention in `COMPLIANCE` mode: until it expires
nobody, the bucket's owner included, deletes or overwrites that version. An insider with the
database and the service's host can put back an older `audit_checkpoints` row; they cannot take the
newer objects out of the bucket, and `verify` names the rows missing against the newest one.

The bucket must have object lock enabled (it is set when the bucket is made); a put to a bucket
without it is refused, and the sealer logs `audit.checkpoint_refused`. Credentials and region come
from the usual AWS settings (`AWS_ACCESS_KEY_ID`, a profile, an instance role). `boto3` is imported
only when a bucket is configured (`pip install 'sursis[s3]'`).
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from sursis.domain.audit.audit_checkpoint import Checkpoint, CheckpointLogUnusable
from sursis.domain.identity.keys import WORKSPACE
from sursis.infra.checkpoint_log import checkpoint_record, parse_checkpoint


class S3CheckpointLog:
    """The `CheckpointLog` port over an object-locked bucket."""

    def __init__(
        self, bucket: str, *, prefix: str = "", endpoint_url: str | None = None, retention_days: int = 365
    ) -> None:
        try:
            import boto3
        except ImportError:
            raise CheckpointLogUnusable(
                "an S3 checkpoint log needs boto3: pip install 'sursis[s3]'"
            ) from None
        self._client: Any = boto3.client("s3", endpoint_url=endpoint_url)
        self.bucket, self.prefix = bucket, prefix.strip("/")
        self.retention = timedelta(days=retention_days)

    @property
    def where(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"

    def _folder(self, workspace: str) -> str:
        if not WORKSPACE.match(workspace):
            raise CheckpointLogUnusable(f"not a workspace name: {workspace!r}")
        return f"{self.prefix}/{workspace}/" if self.prefix else f"{workspace}/"

    async def append(self, checkpoint: Checkpoint) -> None:
        await asyncio.to_thread(self._append, checkpoint)

    async def newest(self, workspace: str) -> Checkpoint | None:
        return await asyncio.to_thread(self._newest, workspace)

    def _append(self, checkpoint: Checkpoint) -> None:
        stamp = checkpoint.signed_at.astimezone(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        key = f"{self._folder(checkpoint.workspace)}{checkpoint.seq:020d}-{stamp}.json"
        body = json.dumps(checkpoint_record(checkpoint), sort_keys=True).encode()
        self._call(
            "put_object",
            Bucket=self.bucket,
            Key=key,
            Body=body,
            ContentType="application/json",
            ChecksumAlgorithm="SHA256",
            ObjectLockMode="COMPLIANCE",
            ObjectLockRetainUntilDate=datetime.now(UTC) + self.retention,
        )

    def _newest(self, workspace: str) -> Checkpoint | None:
        """The object whose name sorts last under the workspace's folder (the highest seq; the
        latest signing of it), read and parsed."""
        folder, newest, token = self._folder(workspace), None, None
        while True:
            page = self._call(
                "list_objects_v2",
                Bucket=self.bucket,
                Prefix=folder,
                **({"ContinuationToken": token} if token else {}),
            )
            for item in page.get("Contents", ()):
                if newest is None or item["Key"] > newest:
                    newest = item["Key"]
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or token is None:
                break
        if newest is None:
            return None
        body = self._call("get_object", Bucket=self.bucket, Key=newest)["Body"].read()
        found = parse_checkpoint(body)
        if found is None or found.workspace != workspace:
            raise CheckpointLogUnusable(f"{self.where}/{newest} is not a checkpoint of {workspace!r}")
        return found

    def _call(self, operation: str, **params: Any) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return getattr(self._client, operation)(**params)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "error")
            raise CheckpointLogUnusable(f"{self.where}: {operation} refused ({code})") from None
        except BotoCoreError as exc:
            raise CheckpointLogUnusable(f"{self.where}: {operation} failed ({type(exc).__name__})") from None
