"""The final report in S3, against moto in server mode over real HTTP (as the operator reaches
S3: botocore, the default credential chain, AWS_ENDPOINT_URL_S3 pointing at the server)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from botocore.session import Session
from moto.server import ThreadedMotoServer

from acceltrial.api.report import Report, VariantFigures, Variants
from acceltrial.api.spec import S3Destination
from acceltrial.engine.candidate import TrialRef
from acceltrial.providers.reports.s3 import ReportUploadError, S3Reports

TRIAL = TrialRef("llama3-8b-inf2", "serving", "uid-1")
REPORT = Report(
    trial=TRIAL.name,
    namespace=TRIAL.namespace,
    generated_at=datetime(2026, 12, 3, 10, 0, tzinfo=UTC),
    phase="Promoted",
    variants=Variants(
        baseline=VariantFigures(instance_type="g5.xlarge", latency_p99=2.8),
        candidate=VariantFigures(instance_type="inf2.8xlarge", latency_p99=2.7),
    ),
)


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    for name, value in {
        "AWS_ENDPOINT_URL_S3": f"http://{host}:{port}",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    client = Session().create_client("s3", region_name="us-east-1")
    client.create_bucket(Bucket="trial-reports")
    yield client
    server.stop()


def test_the_report_lands_under_the_prefix_namespace_and_trial(s3: object) -> None:
    destination = S3Destination(bucket="trial-reports", prefix="acceltrial/")
    url = S3Reports().upload(destination, TRIAL, REPORT)
    assert url == "s3://trial-reports/acceltrial/serving/llama3-8b-inf2/report.json"
    stored = s3.get_object(  # type: ignore[attr-defined]
        Bucket="trial-reports", Key="acceltrial/serving/llama3-8b-inf2/report.json"
    )
    assert stored["ContentType"] == "application/json"
    assert Report.model_validate(json.loads(stored["Body"].read())) == REPORT


def test_a_missing_bucket_is_a_clear_error(s3: object) -> None:
    with pytest.raises(ReportUploadError, match=r"s3://no-such-bucket/serving/.*NoSuchBucket"):
        S3Reports().upload(S3Destination(bucket="no-such-bucket"), TRIAL, REPORT)
