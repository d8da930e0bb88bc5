"""Which actions are read-only, and so may be asked on ``fetch.<platform>`` by a service that must not act
on the platform (the media workers)."""

from __future__ import annotations

import pytest

from larkbot.canonical import names
from larkbot.canonical.actions import READ_ONLY_ACTIONS
from larkbot.testkit.actions import acting_kinds


def test_every_action_kind_is_decided_read_only_or_not() -> None:
    """A new action kind fails here until it is decided: listing it read-only lets a media worker ask
    it, so only a kind that changes nothing anyone sees belongs there."""
    assert {model.model_fields["kind"].default for model in READ_ONLY_ACTIONS} == {"download", "custom_emoji"}
    assert acting_kinds() == {
        "send_message",
        "react",
        "typing",
        "send_image",
        "delete_message",
        "ban_member",
        "moderate",
    }


@pytest.mark.parametrize("platform", list(names.Platform))
def test_the_fetch_subject_is_apart_from_the_actions_and_no_stream_stores_it(
    platform: names.Platform,
) -> None:
    # A user allowed ``fetch.>`` is allowed no action subject, and a request there is core NATS only.
    subject = names.fetch_subject(platform)
    assert subject == f"fetch.{platform.value}"
    assert all(not s.startswith(("fetch.", ">")) for stream in names.STREAMS for s in stream.subjects)
