"""Message aliases: the function is persisted (``events.message_alias``) and computed by two services, so
its values are pinned."""

from __future__ import annotations

import pytest

from larkbot.canonical.aliases import alias_for, aliases_enabled, looks_like_alias
from larkbot.canonical.names import Platform


def test_alias_values_are_pinned() -> None:
    assert alias_for("oc_chat", "om_1") == "mrgdttvgl0"
    assert alias_for("oc_chat", "om_2") == "m7mcw2r4mg"
    assert looks_like_alias(alias_for("oc_other", "om_1"))
    assert alias_for("oc_other", "om_1") != alias_for("oc_chat", "om_1")  # per chat
    assert not looks_like_alias("om_1")


@pytest.mark.parametrize(
    ("platform", "configured", "enabled"),
    [(Platform.FEISHU, True, True), ("feishu", False, False), (Platform.TELEGRAM, True, False)],
)
def test_aliases_apply_to_feishu_chats_that_keep_them_on(
    platform: Platform | str, configured: bool, enabled: bool
) -> None:
    assert aliases_enabled(platform, configured) is enabled
