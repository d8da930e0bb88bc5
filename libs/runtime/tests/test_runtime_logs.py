"""Structured logs: JSON lines with correlation ids, secrets masked everywhere."""

from __future__ import annotations

import io
import json
import logging

from larkbot.runtime.logs import log_context, mask, register_secrets, setup_logging


def test_json_lines_with_context_and_masking() -> None:
    out = io.StringIO()
    setup_logging("pipeline", stream=out)
    register_secrets(["canary-5e3f9a1b"])
    log = logging.getLogger("larkbot.test")
    log.setLevel(logging.INFO)  # independent of levels other tests left on parent loggers
    with log_context(chat="feishu:oc_1", turn="t-1"):
        log.info("calling with key %s", "canary-5e3f9a1b", extra={"endpoint": "main"})
    try:
        raise RuntimeError("token=canary-5e3f9a1b rejected")
    except RuntimeError:
        log.exception("failed")
    # Only this test's records: tasks of earlier tests may still log through the root handler.
    lines = [r for r in map(json.loads, out.getvalue().splitlines()) if r["logger"] == "larkbot.test"]
    assert lines[0]["service"] == "pipeline"
    assert lines[0]["chat"] == "feishu:oc_1"
    assert lines[0]["turn"] == "t-1"
    assert lines[0]["endpoint"] == "main"
    assert lines[0]["msg"] == "calling with key ***"
    assert "canary-5e3f9a1b" not in out.getvalue()
    assert "RuntimeError" in lines[1]["exc"]
    assert "chat" not in lines[1]


def test_credential_shapes_are_masked_without_registration() -> None:
    text = (
        "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.abc app_secret=Zq8shD3kL2 "
        "https://api.telegram.org/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/getMe "
        "api_key: sk-proj-abcdefghijklmnop tenant t-g1044ghJKLMNOPQRSTUVWXYZ12345"
    )
    masked = mask(text)
    for secret in (
        "eyJhbGciOiJIUzI1NiJ9",
        "Zq8shD3kL2",
        "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw",
        "sk-proj",
        "t-g1044gh",
    ):
        assert secret not in masked, secret
