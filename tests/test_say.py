"""`larkbot say` reports what the bot decided as soon as the model decides it, tells a stack that
decides nothing apart from a bot that chose silence, and a message the playground refuses apart from a
playground that does not answer."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest

from larkbot.canonical.names import SERVICE_PORTS
from larkbot.cli.main import main
from larkbot.cli.playground import Playground
from larkbot.runtime.config import parse_config
from larkbot.testkit.stack import free_port


async def test_no_decision_is_reported_as_a_broken_stack_naming_what_is_down(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Nothing listens on the services' ports: the playground answers, nothing behind it does.
    ports = {service.value: free_port() for service in SERVICE_PORTS}
    config = parse_config({"services": {s.replace("-", "_"): {"http_port": p} for s, p in ports.items()}}, {})
    playground = Playground(config)
    await playground.start(0, 0, 0)
    try:
        control = playground.control_url.rsplit(":", 1)[1]
        argv = ["say", "hello @LarkBot?", "--control-port", control, "--wait", "1"]
        status = await asyncio.to_thread(main, argv)
    finally:
        await playground.stop()
    out, err = capsys.readouterr()
    assert status == 1
    assert "silence" not in out + err
    assert "no decision within 1 s — the stack may be broken" in err
    for service, port in ports.items():
        assert f"{service} does not answer on http://127.0.0.1:{port}" in err
    assert playground.transcript[0]["text"] == "hello @LarkBot?"


async def test_silence_is_reported_with_the_models_reason_as_soon_as_it_decides(
    capsys: pytest.CaptureFixture[str],
) -> None:
    playground = Playground(parse_config({}, {}))
    await playground.start(0, 0, 0)
    try:
        control = playground.control_url.rsplit(":", 1)[1]
        argv = ["say", "just chatting", "--control-port", control, "--wait", "120"]
        said = asyncio.create_task(asyncio.to_thread(main, argv))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while not playground.transcript:
            assert loop.time() < deadline, "say did not post"
            await asyncio.sleep(0.01)
        # The driver's probe as the gateway sends it to the provider: the rendered context, one forced tool.
        decide = {
            "type": "object",
            "properties": {"should_act": {"type": "string"}, "reason": {"type": "string"}},
        }
        probe = {
            "model": "playground",
            "messages": [
                {"role": "system", "content": "Decide whether to act."},
                {
                    "role": "user",
                    "content": '<message id="m1" sender="You" uid="100000" t="01-01 00:00:00">'
                    "just chatting</message>",
                },
            ],
            "tools": [{"type": "function", "function": {"name": "decide", "parameters": decide}}],
            "tool_choice": {"type": "function", "function": {"name": "decide"}},
        }
        assert playground.llm is not None
        async with (
            aiohttp.ClientSession() as http,
            http.post(f"{playground.llm.url}/chat/completions", json=probe) as resp,
        ):
            answer = await resp.json()
        assert (
            json.loads(answer["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"])[
                "should_act"
            ]
            == "no_action"
        )
        # Well before --wait runs out.
        status = await asyncio.wait_for(said, 30)
    finally:
        await playground.stop()
    out, _ = capsys.readouterr()
    assert status == 0
    assert "(the bot chose silence — reason: not mentioned and not asked a question)" in out


async def test_a_refused_message_is_reported_with_the_playgrounds_reason(
    capsys: pytest.CaptureFixture[str],
) -> None:
    ports = {service.value: free_port() for service in SERVICE_PORTS}
    config = parse_config({"services": {s.replace("-", "_"): {"http_port": p} for s, p in ports.items()}}, {})
    playground = Playground(config)
    await playground.start(0, 0, 0)
    try:
        control = playground.control_url.rsplit(":", 1)[1]
        argv = ["say", "x" * 4097, "--control-port", control, "--wait", "1"]
        status = await asyncio.to_thread(main, argv)
    finally:
        await playground.stop()
    _, err = capsys.readouterr()
    assert status == 2
    assert "larkbot say: the playground refused the message: longer than Telegram's 4096 characters" in err
    assert "the playground does not answer" not in err
    assert playground.transcript == []
