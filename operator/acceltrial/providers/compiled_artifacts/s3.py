"""``candidate.compiledArtifacts: s3://bucket/prefix/`` checked to exist, with botocore and the
default credential chain (IRSA on EKS: ``s3:ListBucket`` on the bucket for the prefix, or
``s3:GetObject`` for a single object, which HeadObject needs). ``AWS_ENDPOINT_URL_S3`` points it
elsewhere (an S3-compatible store, or a test server).

A URI ending in ``/`` is a prefix and must hold at least one object; otherwise it names an object,
or a prefix written without its trailing slash. A path inside the image is not checked here (the
pod sees it, the operator does not).

What S3 answers for good (no such bucket, nothing under the prefix) is a problem that ends the
trial; what a person or a retry can fix (no credentials yet, access denied, S3 unreachable) is
waited for, within the trial's progressDeadline."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from botocore.session import Session


def _client(region: str | None) -> Any:
    return Session().create_client("s3", region_name=region)


def _quick_client(region: str | None) -> Any:
    """A client that gives up within seconds: a check that cannot be made is only a note."""
    quick = Config(connect_timeout=3, read_timeout=5, retries={"total_max_attempts": 2})
    return Session().create_client("s3", region_name=region, config=quick)


def split_s3_uri(uri: str) -> tuple[str, str]:
    """(bucket, key or prefix) of an s3:// URI."""
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bucket, key


_MISSING = frozenset({"NoSuchBucket", "404", "NoSuchKey"})


@dataclass(frozen=True)
class ArtifactCheck:
    """A problem that ends the trial, or what it waits for; neither when the artifacts are
    there (or not in S3)."""

    problem: str | None = None
    wait: str | None = None


class S3Artifacts:
    """Checks that compiled artifacts are in S3."""

    def __init__(self, client_for: Callable[[str | None], Any] = _client) -> None:
        self._client_for = client_for

    def check(self, uri: str, region: str | None = None) -> ArtifactCheck:
        if not uri.startswith("s3://"):
            return ArtifactCheck()
        bucket, key = split_s3_uri(uri)
        try:
            found = self._found(self._client_for(region), bucket, key)
        except ClientError as error:
            code = str(error.response.get("Error", {}).get("Code"))
            if code in _MISSING:
                return ArtifactCheck(problem=f"compiledArtifacts {uri}: {error}")
            return ArtifactCheck(wait=self._cannot(uri, error))
        except BotoCoreError as error:
            return ArtifactCheck(wait=self._cannot(uri, error))
        if found:
            return ArtifactCheck()
        return ArtifactCheck(
            problem=f"compiledArtifacts {uri} holds no objects: compile the model "
            "(candidate.compile does it before the trial) or fix the URI"
        )

    @staticmethod
    def _cannot(uri: str, error: Exception) -> str:
        return (
            f"compiledArtifacts {uri} cannot be checked: {error}; the operator's role needs "
            "s3:ListBucket on the bucket and s3:GetObject on the prefix"
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


def compile_cache_check(
    uri: str, region: str | None = None, client_for: Callable[[str | None], Any] = _quick_client
) -> ArtifactCheck:
    """A TrainingTrial's ``compileCache.url``: its bucket must exist (the cache may be empty:
    a precompile or the first run fills it). No such bucket is a problem; anything else that
    keeps the operator from looking (no credentials, access denied, S3 unreachable) is a
    ``wait`` that the caller records as a note and lets pass, since the Neuron pods read
    and write the cache with their own role, not the operator's."""
    if not uri.startswith("s3://"):
        return ArtifactCheck()
    bucket, _ = split_s3_uri(uri)
    try:
        client_for(region).head_bucket(Bucket=bucket)
    except ClientError as error:
        code = str(error.response.get("Error", {}).get("Code"))
        if code in _MISSING:
            return ArtifactCheck(
                problem=f"compileCache.url {uri}: no bucket {bucket} in S3; create it, or "
                "fix the URL (the cache itself may start empty)"
            )
        return ArtifactCheck(wait=f"compileCache.url {uri} was not checked: {error}")
    except BotoCoreError as error:
        return ArtifactCheck(wait=f"compileCache.url {uri} was not checked: {error}")
    return ArtifactCheck()
