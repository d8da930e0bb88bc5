"""``larkbot say``: post in the playground group and report what the bot did, as soon as it is known.

The playground sees every answer of the fake model (see ``playground``), so the bot's decision is known
the moment it is made: a reply or a reaction is printed when it arrives; a probe's ``no_action`` is
reported at once as silence, with the model's reason. When no decision comes within ``--wait`` seconds
the stack is not working: ``say`` says so and names the services that are not ready, instead of calling
it silence. A message the playground refuses (longer than Telegram's 4,096 characters, a name over 64) is
reported with the playground's reason.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from larkbot.canonical.errors import ConfigError
from larkbot.runtime.config import load_config

from .stack import page_token_headers, playground_port

POLL_S = 0.1


def say(args: Any) -> int:
    base = f"http://127.0.0.1:{playground_port(args.control_port)}"
    try:
        headers = page_token_headers(load_config())
    except ConfigError as exc:
        print(f"larkbot say: {exc.report()}", file=sys.stderr)
        return 2
    try:
        before = _not_ready(base, headers)
        if before:
            print(f"warning: {'; '.join(before)} — the bot may not answer", file=sys.stderr)
        try:
            posted = _request(f"{base}/say", headers, {"text": args.text, "user": args.user})
        except Refused as exc:
            print(f"larkbot say: the playground refused the message: {exc.reason}", file=sys.stderr)
            return 2
        return _outcome(base, headers, posted["cursor"], args.wait)
    except Refused as exc:
        said = f"the playground refused {exc.path} (HTTP {exc.status}): {exc.reason}"
        print(f"larkbot say: {said}", file=sys.stderr)
        return 1
    except (urllib.error.URLError, OSError) as exc:
        print(f"the playground does not answer on {base} ({exc}); is `make up` running?", file=sys.stderr)
        return 1


def _outcome(base: str, headers: dict[str, str], cursor: dict[str, int], wait: float) -> int:
    deadline = time.monotonic() + wait
    verdict: dict[str, Any] | None = None
    seen = cursor["decisions"]
    while True:
        now = _request(f"{base}/transcript", headers)
        replies = now["bot"][cursor["bot"] :]
        reactions = now["reactions"][cursor["reactions"] :]
        for reply in replies:
            print(f"bot: {reply['text']}")
        for reaction in reactions:
            emoji = " ".join(
                r.get("emoji") or r.get("custom_emoji_id", "?") for r in reaction["reaction"] or []
            )
            print(f"bot reacted: {emoji or '(removed its reaction)'}")
        if replies or reactions:
            return 0
        for decided in now["decisions"][seen:]:
            if decided["kind"] == "probe":
                verdict = decided
                if decided["decision"] not in ("send_message", "react_only"):
                    print(f"(the bot chose silence — reason: {decided['reason']})")
                    return 0
            elif verdict is not None and decided["tool"] in (None, "end_turn"):
                why = verdict["reason"]
                print(f"(the bot chose to act — reason: {why} — but ended its turn without a word)")
                return 0
        seen = len(now["decisions"])
        if time.monotonic() >= deadline:
            break
        time.sleep(POLL_S)
    problems = _not_ready(base, headers)
    where = "; ".join(problems) if problems else "every service says it is ready; see <data_dir>/logs/"
    if verdict is None:
        print(f"no decision within {wait:g} s — the stack may be broken ({where})", file=sys.stderr)
    else:
        print(
            f"the bot chose {verdict['decision']} (reason: {verdict['reason']}) but nothing arrived within "
            f"{wait:g} s — the stack may be broken ({where})",
            file=sys.stderr,
        )
    return 1


def _not_ready(base: str, headers: dict[str, str]) -> list[str]:
    services: dict[str, dict[str, str]] = _request(f"{base}/stack", headers)["services"]
    found = []
    for name, status in services.items():
        if status["state"] == "not answering":
            found.append(f"{name} does not answer on {status['url']}")
        elif status["state"] != "ready":
            found.append(f"{name} is not ready ({status['detail']})")
    return found


class Refused(Exception):
    """The playground answered, with an error status: ``reason`` is what it said."""

    def __init__(self, path: str, status: int, reason: str) -> None:
        super().__init__(f"{path}: HTTP {status}: {reason}")
        self.path = path
        self.status = status
        self.reason = reason


def _request(url: str, headers: dict[str, str], body: dict[str, Any] | None = None) -> dict[str, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=5) as resp:
            answer: dict[str, Any] = json.load(resp)
            return answer
    except urllib.error.HTTPError as exc:
        # An answer, not a connection failure (HTTPError is a URLError too): the playground's own words.
        try:
            reason = _reason(exc)
        finally:
            exc.close()
        raise Refused(urllib.parse.urlsplit(url).path, exc.code, reason) from None


def _reason(answer: urllib.error.HTTPError) -> str:
    """The control API's ``{"error": ...}``, else the text of the answer (the web guard answers in text)."""
    said = answer.read(64 * 1024).decode("utf-8", "replace").strip()
    try:
        found = json.loads(said)
    except ValueError:
        return said or str(answer.reason)
    if isinstance(found, dict) and isinstance(found.get("error"), str):
        return str(found["error"])
    return said
