"""A replica joining kopf peering gets a distinct priority and a bounded lifetime; a standalone
one is left alone."""

from __future__ import annotations

import kopf

from acceltrial.handlers.config import config_from_env
from acceltrial.handlers.peering import configure_peering


def test_a_peer_draws_a_random_priority_and_peering_is_mandatory() -> None:
    priorities = set()
    for _ in range(5):
        settings = kopf.OperatorSettings()
        configure_peering(settings, lifetime_seconds=7)
        assert settings.peering.mandatory
        assert settings.peering.lifetime == 7
        priorities.add(settings.peering.priority)
    assert len(priorities) == 5, "same priorities would pause every replica"
    assert 0 not in priorities


def test_a_priority_given_on_the_command_line_is_kept() -> None:
    settings = kopf.OperatorSettings()
    settings.peering.priority = 100
    configure_peering(settings, lifetime_seconds=7)
    assert settings.peering.priority == 100


def test_a_standalone_operator_is_left_alone() -> None:
    settings = kopf.OperatorSettings()
    settings.peering.standalone = True
    configure_peering(settings, lifetime_seconds=7)
    assert (settings.peering.priority, settings.peering.mandatory) == (0, False)
    assert settings.peering.lifetime == 60


def test_the_lifetime_is_read_from_the_environment() -> None:
    assert config_from_env({}).peering_lifetime_seconds == 15
    env = {"ACCELTRIAL_PEERING_LIFETIME_SECONDS": "5"}
    assert config_from_env(env).peering_lifetime_seconds == 5
