"""Canary secrets never leak (issue 8 part 3, DESIGN §5): the Feishu app secret, the Telegram bot token,
the LLM API key, the NATS token and the prompt-cache-key salt are unique canaries in the configuration;
the services run as processes and are made to fail where secrets are handled — wrong credentials against
the fakes (Feishu refuses the app secret, the Bot API refuses the token, the provider answers 401 and
echoes the offered key), with request dumps on. Then no canary may appear in any service's log, in any
``/metrics``, in any dump file, or in any reply on the bus.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import aiohttp
from pydantic import SecretStr
from tests.harness.nats import RestartableNats

from larkbot.canonical.actions import SendMessageAction
from larkbot.canonical.codec import encode, headers_for
from larkbot.canonical.llm import LLMRequest, TextPart, UserMessage
from larkbot.canonical.names import SUBJECT_LLM_GENERATE, Platform, actions_subject
from larkbot.ingress_feishu.fake.server import FakeFeishu
from larkbot.ingress_telegram.fake import FakeBotApi
from larkbot.llm_gateway.fake import FakeProvider
from larkbot.runtime.bus import connect
from larkbot.runtime.config import NatsSettings
from larkbot.testkit.stack import SERVICES, Stack, free_port, stack_config, until

APP_SECRET = "canaryFeishuAppSecret7f3a9c"
BOT_TOKEN_SECRET = "CanaryTelegramTokenSecret_b41d9e"
BOT_TOKEN = f"7000000001:{BOT_TOKEN_SECRET}"
LLM_KEY = "sk-canary-llm-key-5e8d2a61"
NATS_TOKEN = "canaryNatsToken0c97e4"
CACHE_SALT = "canaryPromptCacheKeySalt_9d2e71"
CANARIES = (APP_SECRET, BOT_TOKEN, BOT_TOKEN_SECRET, LLM_KEY, NATS_TOKEN, CACHE_SALT)


def leaks(where: str, text: str) -> list[str]:
    return [f"{where} contains {c[:12]}…" for c in CANARIES if c in text]


async def test_canary_secrets_never_leak(tmp_path: Path) -> None:
    nats = RestartableNats(tmp_path / "nats", token=NATS_TOKEN)
    url = await asyncio.to_thread(nats.start_on, free_port())
    feishu = FakeFeishu(app_secret="the-real-feishu-secret")
    telegram = FakeBotApi(token="7000000001:TheRealTokenNotTheCanary_abcdefgh")
    llm = FakeProvider(api_key="sk-the-real-key")
    await feishu.start()
    await telegram.start()
    await llm.start()
    bus = await connect(NatsSettings(token=SecretStr(NATS_TOKEN)), "leak-test", url=url, give_up_after_s=30)
    config = stack_config(
        tmp_path, feishu, telegram, llm.url, {"feishu:oc_leak": {}, "telegram:-1001": {}}, {},
        secrets_={"app_secret": APP_SECRET, "bot_token": BOT_TOKEN, "llm_api_key": LLM_KEY, "dump": "1"},
    )  # fmt: skip
    config["nats"] = {"token": NATS_TOKEN}
    # The salt keys every prompt_cache_key the gateway sends (the primary endpoint asks for one).
    config["llm"]["prompt_cache_key_salt"] = CACHE_SALT
    config["llm"]["endpoints"]["primary"]["supports_prompt_cache_key"] = True
    config["services"] = {name: {"log_level": "DEBUG"} for name in ("llm_gateway", "driver", "pipeline")}
    stack = Stack(tmp_path, url, config)
    stack.add(*SERVICES)
    found: list[str] = []
    exited: list[str] = []
    try:
        stack.write_config()
        for name in SERVICES:
            await stack.start(name)
        await stack.wait_ready("llm-gateway", "pipeline", "driver", "media")

        # Feishu refuses the app secret at start-up; the Bot API refuses the token.
        def refused(name: str) -> bool:
            return not stack.running(name) or '"level": "error"' in stack.log_text(name)

        await until(lambda: refused("ingress-feishu"), "ingress-feishu to fail on the wrong app secret")
        await until(lambda: refused("ingress-telegram"), "ingress-telegram to fail on the wrong bot token")
        assert feishu.routed("auth.token"), "the app secret was offered to (fake) Feishu"
        assert any(r.method == "getMe" for r in telegram.requests) or telegram.requests == []

        # The provider answers 401 with the offered key in its message: the reply on the bus must not echo it.
        request = LLMRequest(
            request_id="leak-1",
            purpose="primary",
            endpoint="primary",
            system="You are a test.",
            messages=(UserMessage(parts=(TextPart(text="hello"),)),),
            deadline_ms=time.time_ns() // 1_000_000 + 20_000,
            chat_key="telegram:-1001",
        )
        reply = await bus.nc.request(
            SUBJECT_LLM_GENERATE, encode(request), timeout=30, headers=headers_for(request)
        )
        assert b'"kind":"error"' in reply.data, reply.data[:300]
        assert b'"category":"config"' in reply.data, reply.data[:300]
        assert llm.calls or b"401" in reply.data
        found += leaks("llm.generate error reply", reply.data.decode("utf-8", "replace"))

        # Actions while the platforms refuse us: error replies on the bus.
        for platform, chat in ((Platform.FEISHU, "oc_leak"), (Platform.TELEGRAM, "-1001")):
            action = SendMessageAction(
                platform=platform, idempotency_key=f"leak-{platform.value}", chat_id=chat, text="x"
            )
            try:
                answer = await bus.nc.request(
                    actions_subject(platform.value), encode(action), timeout=15, headers=headers_for(action)
                )
                found += leaks(f"actions.{platform.value} reply", answer.data.decode("utf-8", "replace"))
            except Exception as exc:
                found += leaks(f"actions.{platform.value} failure", repr(exc))

        for name in SERVICES:
            try:
                found += leaks(f"{name} /metrics", await stack.metrics(name))
                _status, ready = await stack.readyz(name)
                found += leaks(f"{name} /readyz", ready)
            except aiohttp.ClientConnectionError:
                # Only a service that stopped by itself (a refused credential stops an ingress) may not
                # answer; its log is still checked below.
                proc = stack.services[name].proc
                assert proc is not None
                await asyncio.wait_for(proc.wait(), 30)
                exited.append(name)
    finally:
        await stack.down()
        await bus.close(drain_timeout_s=5)
        await llm.stop()
        await telegram.stop()
        await feishu.stop()
        await asyncio.to_thread(nats.stop)
    logs = {name: stack.log_text(name) for name in SERVICES}
    assert any(logs.values())
    for name, text in logs.items():
        found += leaks(f"{name} log", text)
    dumps = sorted((tmp_path / "llm-dumps").glob("*.json"))
    assert dumps, "llm.dump_dir was set: the 401 attempt must have been dumped"
    for dump in dumps:
        found += leaks(f"dump {dump.name}", dump.read_text(encoding="utf-8", errors="replace"))
    config_text = stack.config_path.read_text(encoding="utf-8")
    assert all(
        c in config_text for c in (APP_SECRET, BOT_TOKEN, LLM_KEY, NATS_TOKEN, CACHE_SALT)
    )  # the canaries were live
    for name in exited:
        print(f"{name} exited by itself:\n{stack.tail(name, 3)}")
    assert not found, "\n".join(found)
