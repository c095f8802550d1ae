"""What Neuron preflight asks AWS, against moto in server mode over real HTTP (as the operator
reaches AWS: botocore, the default credential chain, AWS_ENDPOINT_URL_* pointing at the server):
compiledArtifacts must exist in S3, and an instance type the bundled catalog lacks is read from
EC2 DescribeInstanceTypes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from botocore.session import Session
from moto.server import ThreadedMotoServer

from acceltrial.providers.compiled_artifacts.s3 import (
    ArtifactCheck,
    S3Artifacts,
    compile_cache_check,
)
from acceltrial.providers.pricing.catalog import parse_catalog
from acceltrial.providers.pricing.shapes import NeuronShapes


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    for name, value in {
        "AWS_ENDPOINT_URL": f"http://{host}:{port}",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    s3 = Session().create_client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="models")
    s3.put_object(Bucket="models", Key="neff/llama3-8b/model.neff", Body=b"NEFF")
    yield s3
    server.stop()


@pytest.mark.parametrize(
    "uri",
    [
        "s3://models/neff/llama3-8b/",
        "s3://models/neff/llama3-8b",
        "s3://models/neff/llama3-8b/model.neff",
    ],
)
def test_compiled_artifacts_that_exist_pass(aws: Any, uri: str) -> None:
    assert S3Artifacts().check(uri) == ArtifactCheck()


def test_an_empty_prefix_is_refused_with_the_fix(aws: Any) -> None:
    assert S3Artifacts().check("s3://models/neff/llama3-70b/").problem == (
        "compiledArtifacts s3://models/neff/llama3-70b/ holds no objects: compile the model "
        "(candidate.compile does it before the trial) or fix the URI"
    )


def test_a_missing_bucket_is_refused(aws: Any) -> None:
    found = S3Artifacts().check("s3://no-such-bucket/neff/")
    assert found.wait is None
    assert found.problem is not None
    assert found.problem.startswith("compiledArtifacts s3://no-such-bucket/neff/: ")
    assert "NoSuchBucket" in found.problem


def test_s3_out_of_reach_is_waited_for_naming_the_permissions(
    aws: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    found = S3Artifacts().check("s3://models/neff/llama3-8b/")
    assert found.problem is None
    assert found.wait is not None
    assert found.wait.startswith("compiledArtifacts s3://models/neff/llama3-8b/ cannot be checked:")
    assert "s3:ListBucket" in found.wait


def test_a_path_inside_the_image_is_not_checked(aws: Any) -> None:
    assert S3Artifacts().check("/models/neff") == ArtifactCheck()


def test_an_instance_the_catalog_lacks_is_read_from_ec2(aws: Any) -> None:
    empty = parse_catalog("instances: []")
    shape = NeuronShapes(catalog=empty).shape("inf2.48xlarge", "us-east-1")
    assert shape is not None
    assert (shape.devices, shape.cores) == (12, 24)
    assert shape.memory_bytes == 384 * 1024**3
    assert shape.source == "EC2 DescribeInstanceTypes in us-east-1"


def test_an_instance_ec2_does_not_know_has_no_shape(aws: Any) -> None:
    empty = parse_catalog("instances: []")
    assert NeuronShapes(catalog=empty).shape("inf9.huge", "us-east-1") is None


def test_a_training_compile_cache_needs_its_bucket_not_its_objects(aws: Any) -> None:
    # The cache may start empty (the precompile fills it): an empty prefix passes.
    assert compile_cache_check("s3://models/neuron-cache/llama/") == ArtifactCheck()
    missing = compile_cache_check("s3://no-such-cache/llama/")
    assert missing.problem == (
        "compileCache.url s3://no-such-cache/llama/: no bucket no-such-cache in S3; create it, "
        "or fix the URL (the cache itself may start empty)"
    )
    assert compile_cache_check("/mnt/neuron-cache") == ArtifactCheck()  # a shared volume


def test_a_compile_cache_the_operator_cannot_reach_is_only_noted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Nothing listens there: the pods' own role may still reach the cache, so this waits no one.
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    found = compile_cache_check("s3://ml-team-neuron-cache/llama/", "us-east-1")
    assert found.problem is None
    assert found.wait.startswith(
        "compileCache.url s3://ml-team-neuron-cache/llama/ was not checked"
    )
