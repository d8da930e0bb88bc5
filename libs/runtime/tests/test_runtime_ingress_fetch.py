"""``fetch.<platform>`` against a real server: the read-only actions reach the ingress's handler, anything
else is refused while it is decoded and the handler never sees it."""

from __future__ import annotations

import secrets

from larkbot.canonical.actions import (
    ActionRequest,
    ActionResult,
    CustomEmojiAction,
    DownloadAction,
)
from larkbot.canonical.codec import decode
from larkbot.canonical.content import AttachmentType
from larkbot.canonical.names import Platform, fetch_subject
from larkbot.runtime.bus import Bus
from larkbot.runtime.ingress import fetch_endpoint
from larkbot.testkit.actions import acting_actions, refused_as_not_read_only

WAIT = 30.0


async def test_only_read_only_actions_reach_the_handler(bus: Bus) -> None:
    platform = f"probe-{secrets.token_hex(3)}"
    handled: list[ActionRequest] = []

    async def handler(action: ActionRequest) -> ActionResult:
        handled.append(action)
        return ActionResult(idempotency_key=action.idempotency_key, ok=True, outcome="done")

    common = {"platform": Platform.TELEGRAM, "chat_id": "-100123"}
    download = DownloadAction(
        idempotency_key="d1", file_id="f1", attachment_type=AttachmentType.PHOTO, max_bytes=1024, **common
    )
    emoji = CustomEmojiAction(idempotency_key="e1", emoji_ids=("1",), **common)
    acting = acting_actions(Platform.TELEGRAM, "-100123", message_id="5", user_id="7", blob_key="sha256:00")
    endpoint = fetch_endpoint(bus, platform, handler)
    await endpoint.start()
    try:
        subject = fetch_subject(platform)
        served = [await bus.request(subject, a, ActionResult, timeout_s=WAIT) for a in (download, emoji)]
        refused = [await bus.request(subject, a, ActionResult, timeout_s=WAIT) for a in acting]
        bad = decode((await bus.nc.request(subject, b'{"kind":"download"}', timeout=WAIT)).data, ActionResult)
    finally:
        await endpoint.stop()
    assert handled == [download, emoji]
    assert [r.outcome for r in served] == ["done", "done"]
    assert refused_as_not_read_only(acting, refused) == []
    assert bad.error is not None
    assert (bad.outcome, bad.error.code) == ("failed", "bad_request")
