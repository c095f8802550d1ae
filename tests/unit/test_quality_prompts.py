"""A quality prompt set as users write it (JSON Lines): what loads, and what is refused with
the line and the fix (engine/quality/prompts.py)."""

from __future__ import annotations

import json

import pytest

from acceltrial.engine.quality.prompts import MAX_PROMPTS, PromptsError, parse_prompts


def test_completions_and_chat_prompts_with_task_checks_load() -> None:
    text = "\n".join([
        "# GSM8K-style checks, written for acceltrial's tests",
        json.dumps({"prompt": "2 + 2 =", "expected": "4"}),
        "",
        json.dumps({"messages": [{"role": "system", "content": "Be brief."},
                                 {"role": "user", "content": "Capital of France?"}],
                    "expected": {"regex": "(?i)paris"}}),
        json.dumps({"prompt": "Once upon a time"}),
    ])  # fmt: skip

    prompts = parse_prompts(text)

    assert [p.line for p in prompts] == [2, 4, 5]
    first, chat, plain = prompts
    assert (first.text, first.chat) == ("2 + 2 =", False)
    assert first.expected is not None
    assert first.expected.met_by("2 + 2 = 4")
    assert chat.chat
    assert chat.messages == (("system", "Be brief."), ("user", "Capital of France?"))
    assert chat.expected is not None
    assert chat.expected.met_by("It is Paris.")
    assert not chat.expected.met_by("It is Lyon.")
    assert plain.expected is None


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("{not json", "line 1: not JSON"),
        ("[1, 2]", "line 1: write a JSON object, not list"),
        ('{"prompt": "a", "messages": []}', "give exactly one of prompt (completions) or messages"),
        ('{"promt": "a"}', "unknown key 'promt'"),
        ('{"prompt": ""}', "prompt must be a non-empty string"),
        ('{"messages": [{"role": "robot", "content": "x"}]}', "messages[0].role must be one of"),
        ('{"messages": [{"role": "user"}]}', "messages[0].content must be a string"),
        ('{"prompt": "a", "expected": {"regex": "("}}', "expected.regex does not compile"),
        ('{"prompt": "a", "expected": 4}', "expected must be a non-empty string or"),
    ],
)
def test_a_line_that_cannot_be_used_is_refused_by_its_number(line: str, said: str) -> None:
    with pytest.raises(PromptsError, match=r"line 1") as refused:
        parse_prompts(line)
    assert said in str(refused.value)


def test_an_empty_set_is_refused_with_what_to_write() -> None:
    with pytest.raises(PromptsError, match=r"holds no prompt: write one JSON object a line"):
        parse_prompts("# only a comment\n\n")


def test_the_limits_are_refused_with_the_limit() -> None:
    one = json.dumps({"prompt": "x"})
    parse_prompts("\n".join([one] * MAX_PROMPTS))
    with pytest.raises(PromptsError, match=rf"line {MAX_PROMPTS + 1}: .* keep at most 2000"):
        parse_prompts("\n".join([one] * (MAX_PROMPTS + 1)))
    with pytest.raises(PromptsError, match=r"1,048,590 bytes; at most 1,048,576 \(1 MiB\) fit"):
        parse_prompts(json.dumps({"prompt": "x" * (1024 * 1024)}))
