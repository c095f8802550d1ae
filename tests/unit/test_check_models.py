"""`acceltrial check`'s model-server part (spec.quality): one prompt to each variant's Service,
against a local server answering with the recorded vLLM and TGI JSON (tests/fixtures/openai),
stage by stage: the endpoint, the API, log-probabilities, prompt log-probabilities (echo); what
it asks offline and what it reads of the cluster; where it reaches the Services."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, cast

import pytest

from acceltrial.cli.model_check import (
    FIXED_PROMPT,
    NOT_DEPLOYED,
    REPROMPTS,
    ModelPlan,
    Said,
    check_models,
    cluster_plan,
    model_url,
    offline_plan,
    probe,
)
from acceltrial.engine.candidate import TrialRef
from acceltrial.engine.quality.prompts import parse_prompts
from acceltrial.handlers.config import MODEL_URL, ConfigError, config_from_env
from acceltrial.kube.gateway import Kube
from tests.conftest import REPO
from tests.unit.test_lifecycle import make_spec

FIXTURES = REPO / "tests" / "fixtures" / "openai"
TRIAL = TrialRef("llama3", "ml", "")
SPEC = make_spec(quality={
    "prompts": {"configMapRef": {"name": "prompts", "key": "set.jsonl"}},
    "criteria": [{"name": "agreement", "metric": "token_agreement", "absolute": {"min": 0.98}}],
})  # fmt: skip
(COMPLETION, CHAT) = parse_prompts(
    '{"prompt": "The capital of France is"}\n'
    '{"messages": [{"role": "user", "content": "What is 12 x 7?"}]}'
)


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def without_logprobs() -> bytes:
    body = json.loads(fixture("completion-logprobs.json"))
    body["choices"][0]["logprobs"] = None
    return json.dumps(body).encode()


VLLM = {
    "GET /v1/models": (200, b'{"object": "list", "data": [{"id": "llama3"}]}'),
    "POST /v1/completions": (200, fixture("completion-logprobs.json")),
    "POST /v1/completions echo": (200, fixture("completion-echo.json")),
    "POST /v1/chat/completions": (200, fixture("chat-logprobs.json")),
}
SERVERS: dict[str, dict[str, tuple[int, bytes]]] = {
    "vllm": VLLM,
    # TGI's OpenAI-compatible route ignores echo; it serves no /v1/models here.
    "tgi": {k: v for k, v in VLLM.items() if not k.startswith("GET")}
    | {"POST /v1/completions echo": (200, fixture("completion-no-echo.json"))},
    "no-logprobs": VLLM | {"POST /v1/completions": (200, without_logprobs())},
    "no-chat": VLLM | {"POST /v1/chat/completions": (
        400, b'{"object": "error", "message": "this model has no chat template"}')},
    "echo-refused": VLLM | {"POST /v1/completions echo": (
        400, b'{"object": "error", "message": "echo is not supported"}')},
    "overloaded": VLLM | {"POST /v1/completions": (503, b'{"error": {"message": "overloaded"}}')},
}  # fmt: skip


class _Servers(BaseHTTPRequestHandler):
    """Model servers by the first segment of the path (a key of :data:`SERVERS`): a template
    ``http://host/<server>/{service}`` reaches server ``<server>`` for every Service."""

    seen: ClassVar[list[tuple[str, str, dict[str, Any]]]] = []

    def do_GET(self) -> None:
        self._answer("GET", {})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self._answer("POST", json.loads(self.rfile.read(length)))

    def _answer(self, method: str, payload: dict[str, Any]) -> None:
        # /<server>[/anything a template adds]/v1/...
        _, server, rest = self.path.split("/", 2)
        path = "/v1/" + rest.rpartition("v1/")[2]
        self.seen.append((server, f"{method} {path}", payload))
        asked = f"{method} {path}" + (" echo" if payload.get("echo") else "")
        status, body = SERVERS.get(server, {}).get(asked, (404, b'{"message": "Not Found"}'))
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: Any) -> None:
        pass


@contextlib.contextmanager
def model_servers() -> Iterator[str]:
    """The servers' address; a Service's URL is it followed by ``/<server>``."""
    _Servers.seen = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Servers)
    # A short poll: shutdown() waits for it.
    thread = threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def servers() -> Iterator[str]:
    with model_servers() as url:
        yield url


def lines(said: list[Said]) -> list[tuple[str, str]]:
    return [(s.mark, s.said) for s in said]


def test_a_server_doing_everything_answers_at_every_stage(servers: str) -> None:
    said = probe("candidate", f"{servers}/vllm", COMPLETION, "llama3")

    assert lines(said) == [
        ("ok", f"the endpoint answers at {servers}/vllm (GET /v1/models: HTTP 200)"),
        ("ok", 'the completions API answers: " Paris.\\n"'),
        ("ok", "log-probabilities come back (3 tokens)"),
        ("ok", "prompt log-probabilities (echo) come back: the check teacher-forces by them"),
    ]
    asked = [(path, payload) for _, path, payload in _Servers.seen if path.startswith("POST")]
    (_, answer), (_, echo) = asked
    assert answer["model"] == "llama3"
    assert answer["prompt"] == "The capital of France is"
    assert echo["echo"] is True
    assert echo["prompt"] == "The capital of France is Paris.\n", "its own answer, teacher-forced"


def test_without_echo_the_candidate_will_be_re_prompted_and_the_baseline_needs_none(
    servers: str,
) -> None:
    candidate = probe("candidate", f"{servers}/tgi", COMPLETION, None)
    baseline = probe("baseline", f"{servers}/tgi", COMPLETION, None)

    assert candidate[0].said.endswith("(GET /v1/models: HTTP 404)"), "any answer will do"
    assert lines(candidate)[-1] == (
        "--", f"prompt log-probabilities (echo) do not come back: {REPROMPTS}"
    )  # fmt: skip
    assert lines(baseline)[-1] == (
        "--",
        "prompt log-probabilities (echo) do not come back: the check needs them of the "
        "candidate only",
    )
    assert "NO" not in {s.mark for s in candidate + baseline}


def test_an_echo_the_server_refuses_fails_the_candidate_only(servers: str) -> None:
    candidate = probe("candidate", f"{servers}/echo-refused", COMPLETION, None)
    baseline = probe("baseline", f"{servers}/echo-refused", COMPLETION, None)

    assert candidate[-1].mark == "NO"
    assert "refused (400): echo is not supported" in candidate[-1].said
    assert baseline[-1].mark == "--"


def test_a_chat_prompt_goes_to_the_chat_api_and_asks_no_echo(servers: str) -> None:
    said = probe("candidate", f"{servers}/vllm", CHAT, None)

    assert lines(said)[1:] == [
        ("ok", 'the chat API answers: "84"'),
        ("ok", "log-probabilities come back (1 tokens)"),
        ("--", f"prompt log-probabilities (echo) not asked of a chat prompt: {REPROMPTS}"),
    ]


def test_an_api_that_refuses_the_prompt_is_named_with_the_servers_words(servers: str) -> None:
    said = probe("baseline", f"{servers}/no-chat", CHAT, None)

    assert [s.mark for s in said] == ["ok", "NO"]
    assert said[1].said == (
        "the chat API refuses the prompt: /v1/chat/completions refused (400): this model has "
        "no chat template"
    )


def test_an_answer_without_log_probabilities_is_told_apart_from_no_answer(servers: str) -> None:
    missing = probe("baseline", f"{servers}/no-logprobs", COMPLETION, None)
    failing = probe("baseline", f"{servers}/overloaded", COMPLETION, None)

    assert lines(missing)[1:] == [
        ("ok", "the completions API answers"),
        ("NO", "log-probabilities do not come back: the completion holds no token "
               "log-probabilities (logprobs)"),
    ]  # fmt: skip
    assert lines(failing)[1:] == [
        ("NO", "the completions API does not answer: /v1/completions failed (503): overloaded")
    ]


def test_an_endpoint_nobody_answers_at_stops_there() -> None:
    said = probe("baseline", "http://127.0.0.1:9", COMPLETION, None, timeout=2)

    assert [s.mark for s in said] == ["NO"]
    assert said[0].said.startswith("the endpoint does not answer at http://127.0.0.1:9: ")


def test_offline_the_fixed_prompt_goes_to_the_services_the_operator_would_reach() -> None:
    template = "http://{service}.{namespace}.svc:{port}"
    before = offline_plan(SPEC, TRIAL, template, candidate_deployed=False)
    named = offline_plan(SPEC, TRIAL, template, candidate_deployed=True)

    assert before.prompt == FIXED_PROMPT
    assert before.prompt.text == "The capital of France is"
    assert before.urls == {"baseline": "http://llama3-gpu.ml.svc:80"}
    assert lines(before.known) == [("--", NOT_DEPLOYED)]
    assert named.urls["candidate"] == "http://llama3-candidate.ml.svc:80"
    assert named.known == []


class _Cluster:
    """What the check reads of a cluster, as kube/gateway.py's Kube answers."""

    def __init__(self, objects: dict[tuple[str, str], dict[str, Any]]) -> None:
        self.objects = objects

    def config_map(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get(("ConfigMap", f"{namespace}/{name}"))

    def service(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get(("Service", f"{namespace}/{name}"))

    def deployment(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get(("Deployment", f"{namespace}/{name}"))


PROMPT_SET = {"data": {"set.jsonl": '# from our traffic\n{"prompt": "Tea is made by"}\n'}}
SERVICE = {"spec": {"ports": [{"name": "http", "port": 8000}]}}
AVAILABLE = {"status": {"conditions": [{"type": "Available", "status": "True"}]}}


def in_cluster(**objects: dict[str, Any]) -> Kube:
    keys = {"prompts": ("ConfigMap", "ml/prompts"), "baseline": ("Service", "ml/llama3-gpu"),
            "candidate": ("Deployment", "ml/llama3-candidate")}  # fmt: skip
    return cast(Kube, _Cluster({keys[k]: v for k, v in objects.items()}))


def test_in_the_cluster_the_first_prompt_of_the_set_goes_to_the_services_port() -> None:
    cluster = in_cluster(prompts=PROMPT_SET, baseline=SERVICE, candidate=AVAILABLE)
    plan = cluster_plan(SPEC, TRIAL, cluster, "http://{service}:{port}")

    assert plan.prompt.text == "Tea is made by"
    assert plan.source == "the first prompt of ConfigMap ml/prompts, key set.jsonl (line 2)"
    assert plan.urls == {"baseline": "http://llama3-gpu:8000",
                         "candidate": "http://llama3-candidate:8000"}  # fmt: skip
    assert plan.known == []


def test_a_candidate_not_available_yet_is_said_so_not_failed() -> None:
    rolling = {"status": {"conditions": [{"type": "Available", "status": "False"}]}}
    for candidate in ({}, {"candidate": rolling}):
        cluster = in_cluster(prompts=PROMPT_SET, baseline=SERVICE, **candidate)
        plan = cluster_plan(SPEC, TRIAL, cluster, "http://{service}")
        assert list(plan.urls) == ["baseline"]
        assert lines(plan.known) == [("--", NOT_DEPLOYED)]


def test_a_prompt_set_that_cannot_be_used_fails_and_the_fixed_prompt_is_asked() -> None:
    plan = cluster_plan(SPEC, TRIAL, in_cluster(baseline=SERVICE), "http://{service}")

    assert plan.prompt == FIXED_PROMPT
    assert lines(plan.known)[0] == (
        "NO",
        "quality.prompts.configMapRef: ConfigMap ml/prompts not found; create it with the "
        "prompt set under key set.jsonl",
    )


def test_a_missing_baseline_service_fails_without_asking_anyone() -> None:
    plan = cluster_plan(SPEC, TRIAL, in_cluster(prompts=PROMPT_SET), "http://{service}")

    assert plan.urls == {}
    assert lines(plan.known) == [("NO", "Service ml/llama3-gpu not found")]


def test_the_lines_come_prompts_first_then_each_variant(servers: str) -> None:
    plan = ModelPlan(
        COMPLETION, "a test", {"candidate": f"{servers}/tgi", "baseline": f"{servers}/vllm"},
        [Said("--", "candidate", "not yet"), Said("NO", "prompts", "unreadable")],
    )  # fmt: skip
    said = check_models(plan, None)

    assert [s.who for s in said] == ["prompts"] + ["baseline"] * 4 + ["candidate"] * 5


def test_the_services_are_reached_through_the_flag_else_the_operators_variable() -> None:
    ours = "http://127.0.0.1:8001/api/v1/namespaces/{namespace}/services/{service}:{port}/proxy"
    env = {"ACCELTRIAL_MODEL_URL": "http://{service}.example:{port}"}

    assert model_url(None, {}) == "http://{service}.{namespace}.svc:{port}"
    assert model_url(None, env) == "http://{service}.example:{port}"
    assert model_url(ours, env) == ours
    with pytest.raises(ValueError, match=r"--model-url 'http://models:8000': give an http\(s\)"):
        model_url("http://models:8000", {})
    with pytest.raises(ValueError, match=r"only \{service\}, \{namespace\} and \{port\}"):
        model_url("http://{service}/{model}", {})


@pytest.mark.parametrize(
    "template",
    ["http://{service}.{namespace}.svc:{port}", "https://{service}", "http://models:8000",
     "{service}", "http://{service}/{model}", "http://{service}/{0}"],
)  # fmt: skip
def test_the_check_accepts_the_templates_the_operator_accepts(template: str) -> None:
    """The CLI reads ACCELTRIAL_MODEL_URL as handlers/config.py does, without importing the
    handlers (which registers kopf's)."""
    assert model_url(None, {}) == MODEL_URL
    try:
        config_from_env({"ACCELTRIAL_MODEL_URL": template})
    except ConfigError:
        operator = False
    else:
        operator = True
    try:
        model_url(template, {})
    except ValueError:
        check = False
    else:
        check = True
    assert check == operator
