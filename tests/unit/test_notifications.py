"""Notifications: the events a trial's ticks make, in order (through the state machine, as the
handlers see its transitions), the JSON and the Slack text they carry, and their delivery:
in order per receiver, retried while a receiver fails for now, never holding another receiver
or a tick, a Secret read only when it opted in."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator, Mapping
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from botocore.session import Session
from moto import mock_aws

from acceltrial.api.spec import TrialSpec
from acceltrial.api.spec.common import SecretKeyRef
from acceltrial.api.status import TrialStatus
from acceltrial.engine.candidate import TrialRef
from acceltrial.engine.notifications import Transition, events_between, payload, slack_text
from acceltrial.handlers.metrics import NOTIFICATIONS
from acceltrial.handlers.notify import Deliveries, notify, readable_secret
from acceltrial.providers.notifications.port import DeliveryError
from acceltrial.providers.notifications.sns import SnsTopic
from acceltrial.providers.notifications.webhook import Webhook, slack
from tests.unit.test_lifecycle import T0, Driver, make_spec

TRIAL = TrialRef("llama3-inf2", "serving", "uid-1")


def events_of(driver: Driver) -> list[str]:
    """Every event the driver's ticks made, in order."""
    seen, before = [], TrialStatus()
    for result in driver.history:
        seen += events_between(before, result.status)
        before = result.status
    return seen


def test_a_promoted_trial_tells_its_start_each_step_and_its_end() -> None:
    driver = Driver(make_spec())
    driver.run_until("Promoted")
    assert events_of(driver) == [
        "Started", "StepCompleted", "StepCompleted", "StepCompleted", "Promoted"
    ]  # fmt: skip


def test_a_rollback_tells_the_steps_passed_then_the_rollback() -> None:
    driver = Driver(make_spec())
    driver.run_until("Progressing")
    driver.tick()
    driver.tick(advance=timedelta(minutes=2))
    driver.tick()
    driver.run_until("RolledBack", outcome="Fail")
    assert events_of(driver) == ["Started", "StepCompleted", "RolledBack"]


def test_manual_promotion_tells_the_last_step_then_that_it_awaits_approval() -> None:
    driver = Driver(make_spec(promotion={"mode": "manual", "bakeTime": "2m"}))
    driver.run_until("Paused")
    driver.tick(action="approve")
    driver.run_until("Promoted")
    assert events_of(driver) == [
        "Started", "StepCompleted", "StepCompleted", "StepCompleted", "AwaitingApproval",
        "Promoted",
    ]  # fmt: skip


def test_a_pause_by_a_person_is_told_once() -> None:
    driver = Driver(make_spec())
    driver.run_until("Progressing")
    driver.tick()
    driver.tick(action="pause")
    driver.tick()
    driver.tick()
    assert events_of(driver).count("Paused") == 1


def test_the_payload_holds_the_documented_keys_and_the_ending_its_economics() -> None:
    driver = Driver(make_spec())
    driver.run_until("Promoted")
    before, after = driver.history[-2].status, driver.history[-1].status
    body = payload("Promoted", TRIAL, make_spec(), Transition(before, after, T0))
    assert {"schema", "trial", "namespace", "event", "phase", "reasonCode", "message", "step",
            "steps", "weight", "at", "report", "decision", "economics"} <= body.keys()  # fmt: skip
    assert (body["trial"], body["namespace"], body["event"], body["phase"]) == (
        "llama3-inf2", "serving", "Promoted", "Promoted",
    )  # fmt: skip
    assert body["reasonCode"] == "Promoted"
    assert body["decision"]["verdict"] == "promote"
    assert body["report"]["configMap"] == "llama3-inf2-report"
    json.dumps(body)  # plain JSON


def test_a_step_completed_names_the_step_that_passed() -> None:
    driver = Driver(make_spec())
    driver.run_until("Progressing")
    driver.tick()
    driver.tick(advance=timedelta(minutes=2))
    driver.tick()
    moved = next(
        (a, b) for a, b in zip([TrialStatus(), *[r.status for r in driver.history]],
                               [r.status for r in driver.history], strict=False)
        if "StepCompleted" in events_between(a, b)
    )  # fmt: skip
    body = payload("StepCompleted", TRIAL, make_spec(), Transition(*moved, T0))
    assert (body["step"], body["steps"]) == (1, 3)


def test_slack_gets_the_same_facts_in_words() -> None:
    body = {"event": "RolledBack", "trial": "t", "namespace": "n", "phase": "RolledBack",
            "reasonCode": "CriterionFailed", "message": "rolling back: errors 0.03 > 0.01",
            "step": 2, "steps": 3, "weight": 25, "economics": {"currentMonthlySavings": 1234.5},
            "report": {"command": "kubectl acceltrial report t -n n"}}  # fmt: skip
    text = slack_text(body)
    assert text.splitlines()[0] == "*RolledBack*: AcceleratorTrial `n/t`"
    assert "phase RolledBack, step 2/3 at 25%" in text
    assert "reason code CriterionFailed" in text
    assert "$1,234 per month" in text


# -- delivery ------------------------------------------------------------------------------------


class Receiver:
    """A local HTTP receiver recording each POST's path and JSON body; a path may answer with
    a status, or hang for a while."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, Any]] = []
        self.status: dict[str, list[int]] = {}
        self.hang: dict[str, float] = {}
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                time.sleep(receiver.hang.get(self.path, 0))
                statuses = receiver.status.get(self.path) or [200]
                status = statuses.pop(0) if len(statuses) > 1 else statuses[0]
                receiver.posts.append((self.path, body))
                self.send_response(status)
                self.end_headers()

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    served = Receiver()
    yield served
    served.server.shutdown()


def test_a_webhook_gets_the_json_and_slack_a_text(receiver: Receiver) -> None:
    Webhook(receiver.url + "/hook").deliver({"event": "Started", "trial": "t"})
    slack(receiver.url + "/slack").deliver({
        "event": "Started", "trial": "t", "namespace": "n", "phase": "Progressing",
        "report": {"command": "kubectl acceltrial report t -n n"},
    })  # fmt: skip
    assert receiver.posts[0] == ("/hook", {"event": "Started", "trial": "t"})
    assert receiver.posts[1][0] == "/slack"
    assert receiver.posts[1][1]["text"].startswith("*Started*: AcceleratorTrial `n/t`")


def test_errors_name_the_host_never_the_url_and_say_whether_to_retry(receiver: Receiver) -> None:
    receiver.status["/T0K3N/500"] = [500]
    receiver.status["/T0K3N/403"] = [403]
    with pytest.raises(DeliveryError) as failed:
        Webhook(receiver.url + "/T0K3N/500").deliver({})
    assert failed.value.temporary
    assert "T0K3N" not in str(failed.value)
    assert str(failed.value) == "http://127.0.0.1 answered 500"
    with pytest.raises(DeliveryError) as refused:
        Webhook(receiver.url + "/T0K3N/403").deliver({})
    assert not refused.value.temporary


def deliveries_of(spec: TrialSpec, deliveries: Deliveries, *events: TrialStatus) -> int:
    queued, before = 0, TrialStatus()
    for after in events:
        moved = Transition(before, after, T0)
        queued += notify(None, TRIAL, spec, moved, deliveries)  # type: ignore[arg-type]
        before = after
    return queued


def hooks(*paths: str, url: str, events: list[str] | None = None) -> TrialSpec:
    notifications = [{"name": p.strip("/").replace("/", "-") or "root",
                      "webhook": {"url": url + p}, **({"events": events} if events else {})}
                     for p in paths]  # fmt: skip
    return make_spec(notifications=notifications)


def test_each_receiver_gets_its_events_in_order_and_a_failing_one_holds_no_other(
    receiver: Receiver,
) -> None:
    receiver.status["/down"] = [500]
    slept: list[float] = []
    deliveries = Deliveries(sleep=slept.append)
    spec = hooks("/up", "/down", url=receiver.url)
    queued = deliveries_of(
        spec, deliveries,
        TrialStatus(phase="Preflight"), TrialStatus(phase="Progressing", step=0),
        TrialStatus(phase="Progressing", step=1), TrialStatus(phase="Progressing", step=2),
        TrialStatus(phase="RolledBack", step=2),
    )  # fmt: skip
    assert deliveries.flush(10)
    assert queued == 6
    up = [body["event"] for path, body in receiver.posts if path == "/up"]
    assert up == ["Started", "StepCompleted", "RolledBack"]
    down = [body["event"] for path, body in receiver.posts if path == "/down"]
    assert down == ["Started"] * 4 + ["StepCompleted"] * 4 + ["RolledBack"] * 4
    assert slept == [1.0, 2.0, 4.0] * 3, "backing off, bounded, in the delivery thread"


def test_a_receiver_that_hangs_delays_no_tick_and_no_other_receiver(receiver: Receiver) -> None:
    receiver.hang["/slow"] = 2.0
    deliveries = Deliveries(sleep=lambda _: None)
    spec = hooks("/slow", "/fast", url=receiver.url)
    started = time.monotonic()
    deliveries_of(spec, deliveries, TrialStatus(phase="Preflight"),
                  TrialStatus(phase="Progressing", step=0))  # fmt: skip
    assert time.monotonic() - started < 0.5, "a tick only queues"
    deadline = time.monotonic() + 1.5
    while not any(path == "/fast" for path, _ in receiver.posts) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert [path for path, _ in receiver.posts] == ["/fast"], "the fast one is not held"
    assert deliveries.flush(10)


def test_events_a_receiver_did_not_ask_for_are_not_sent(receiver: Receiver) -> None:
    deliveries = Deliveries(sleep=lambda _: None)
    spec = hooks("/ends", url=receiver.url, events=["Promoted", "RolledBack"])
    started = (TrialStatus(phase="Preflight"), TrialStatus(phase="Progressing", step=0))
    deliveries_of(spec, deliveries, *started, TrialStatus(phase="Promoted"))
    assert deliveries.flush(10)
    assert [body["event"] for _, body in receiver.posts] == ["Promoted"]


def test_deliveries_are_counted_by_provider_and_result(receiver: Receiver) -> None:
    receiver.status["/gone"] = [404]

    def count(result: str) -> float:
        return NOTIFICATIONS.labels("webhook", result)._value.get()  # type: ignore[no-any-return]

    delivered, refused = count("delivered"), count("refused")
    deliveries = Deliveries(sleep=lambda _: None)
    started = (TrialStatus(phase="Preflight"), TrialStatus(phase="Progressing", step=0))
    deliveries_of(hooks("/ok", "/gone", url=receiver.url), deliveries, *started)
    assert deliveries.flush(10)
    assert (count("delivered") - delivered, count("refused") - refused) == (1, 1)


class Secrets:
    """The kube gateway's Secret read, from a dict."""

    def __init__(self, secrets: Mapping[str, dict[str, Any]]) -> None:
        self.secrets = secrets

    def secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.secrets.get(name)


def secret(value: str, labelled: bool = True) -> dict[str, Any]:
    labels = {"acceltrial.dev/trial-readable": "true"} if labelled else {}
    return {"metadata": {"labels": labels},
            "data": {"url": base64.b64encode(value.encode()).decode()}}  # fmt: skip


def test_a_secret_is_read_only_when_it_opted_in() -> None:
    kube = Secrets({"yes": secret("https://hooks.example/T0K3N\n"),
                    "no": secret("https://hooks.example/T0K3N", labelled=False)})  # fmt: skip
    ref = SecretKeyRef(name="yes", key="url")
    assert readable_secret(kube, "serving", ref) == "https://hooks.example/T0K3N"  # type: ignore[arg-type]
    with pytest.raises(DeliveryError) as refused:
        readable_secret(kube, "serving", SecretKeyRef(name="no", key="url"))  # type: ignore[arg-type]
    assert str(refused.value) == (
        'Secret serving/no is not labelled acceltrial.dev/trial-readable: "true"; label it to '
        "let trials name it"
    )
    assert not refused.value.temporary
    with pytest.raises(DeliveryError, match="Secret serving/gone not found"):
        readable_secret(kube, "serving", SecretKeyRef(name="gone", key="url"))  # type: ignore[arg-type]


def test_sns_publishes_the_json_with_the_event_as_an_attribute(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Against moto's SNS and SQS: a queue subscribed to the topic receives the event's JSON."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        sns = Session().create_client("sns", region_name="eu-west-1")
        sqs = Session().create_client("sqs", region_name="eu-west-1")
        topic = sns.create_topic(Name="acceltrial")["TopicArn"]
        queue = sqs.create_queue(QueueName="events")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])
        sns.subscribe(TopicArn=topic, Protocol="sqs",
                      Endpoint=arn["Attributes"]["QueueArn"])  # fmt: skip
        SnsTopic(topic).deliver({"event": "Promoted", "trial": "t", "namespace": "n"})
        message = sqs.receive_message(QueueUrl=queue)["Messages"][0]
    envelope = json.loads(message["Body"])
    assert json.loads(envelope["Message"]) == {"event": "Promoted", "trial": "t", "namespace": "n"}
    assert envelope["Subject"] == "acceltrial Promoted: n/t"
    assert envelope["MessageAttributes"]["event"]["Value"] == "Promoted"


def test_sns_refusing_the_topic_is_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws(), pytest.raises(DeliveryError) as refused:
        SnsTopic("arn:aws:sns:eu-west-1:123456789012:missing").deliver({"event": "Failed"})
    assert not refused.value.temporary


def test_a_receivers_thread_ends_when_idle_and_comes_back_for_the_next_event(
    receiver: Receiver,
) -> None:
    deliveries = Deliveries(sleep=lambda _: None, idle=0.1)
    spec = hooks("/idle", url=receiver.url)
    started = (TrialStatus(phase="Preflight"), TrialStatus(phase="Progressing", step=0))
    deliveries_of(spec, deliveries, *started)
    assert deliveries.flush(10)
    deadline = time.monotonic() + 5
    while deliveries._queues and time.monotonic() < deadline:
        time.sleep(0.02)
    assert deliveries._queues == {}, "an ended trial's receiver holds no thread"
    deliveries_of(spec, deliveries, TrialStatus(phase="Progressing", step=1),
                  TrialStatus(phase="Promoted", step=1))  # fmt: skip
    assert deliveries.flush(10)
    assert [body["event"] for _, body in receiver.posts] == ["Started", "Promoted"]
