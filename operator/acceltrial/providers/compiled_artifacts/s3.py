"""``candidate.compiledArtifacts: s3://bucket/prefix/`` checked to exist, with botocore and the
default credential chain (IRSA on EKS: ``s3:ListBucket`` on the bucket for the prefix, or
``s3:GetObject`` for a single object, which HeadObject needs). ``AWS_ENDPOINT_URL_S3`` points it
elsewhere (an S3-compatible store, or a test server).

A URI ending in ``/`` is a prefix and must hold at least one object; otherwise it names an object,
or a prefix written without its trailing slash. A path inside the image is not checked here (the
pod sees it, the operator does not)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from botocore.session import Session


def _client(region: str | None) -> Any:
    return Session().create_client("s3", region_name=region)


def split_s3_uri(uri: str) -> tuple[str, str]:
    """(bucket, key or prefix) of an s3:// URI."""
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bucket, key


class S3Artifacts:
    """Says why compiled artifacts cannot be found in S3, or nothing when they are there."""

    def __init__(self, client_for: Callable[[str | None], Any] = _client) -> None:
        self._client_for = client_for

    def problem(self, uri: str, region: str | None = None) -> str | None:
        if not uri.startswith("s3://"):
            return None
        bucket, key = split_s3_uri(uri)
        try:
            found = self._found(self._client_for(region), bucket, key)
        except (BotoCoreError, ClientError) as error:
            return (
                f"compiledArtifacts {uri} cannot be checked: {error}; the operator's role "
                "needs s3:ListBucket on the bucket and s3:GetObject on the prefix"
            )
        if found:
            return None
        return (
            f"compiledArtifacts {uri} holds no objects: compile the model (candidate.compile "
            "does it before the trial) or fix the URI"
        )

    @staticmethod
    def _found(client: Any, bucket: str, key: str) -> bool:
        if key and not key.endswith("/"):
            try:
                client.head_object(Bucket=bucket, Key=key)
                return True
            except ClientError as error:
                if error.response.get("Error", {}).get("Code") not in ("404", "NoSuchKey"):
                    raise
        reply = client.list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1)
        return bool(reply.get("KeyCount") or reply.get("Contents"))
