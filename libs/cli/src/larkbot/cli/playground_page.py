"""The playground page's server-rendered shell; ``static/playground.js`` fills the timeline from
``GET /messages`` and acts through the control API. Every name and text goes through :mod:`.web.markup`,
so it is escaped here, and the script writes text only through ``textContent``.

Stable hooks for browser tests: ``#model-banner`` (the demo script answers) or ``#model-info`` (a model
does), ``#member``, ``#new-member``, ``#add-member``, ``#composer``, ``#mention-bot``, ``#upload``,
``#voice-upload``, ``#send``, ``#context-bar`` (replying to / editing), ``#cancel-context``, ``#status``,
``#timeline``.
"""

from __future__ import annotations

from typing import Any, Final

from .web import el, page

DEMO_NOTE: Final = (
    "Replies come from the playground's demo script, not a model: it answers when the bot is mentioned or "
    "asked a question, quoting what it read. To talk to a real model, add an OpenAI-compatible endpoint "
    "(Ollama, vLLM or a provider) under llm.endpoints (format: openai-chat, base_url, model, api_key) and "
    "name it as llm.primary; see the README, “Playground”."
)


def _banner(model: dict[str, Any]) -> object:
    if model["fake"]:
        return el("div", {"id": "model-banner", "class": "banner demo", "role": "note"}, DEMO_NOTE)
    said = f"Replies come from the model {model['model']} (endpoint {model['endpoint']})."
    return el("div", {"id": "model-info", "class": "banner real", "role": "note"}, said)


def _composer(bot: dict[str, Any], members: list[str]) -> object:
    choose = el(
        "select",
        {"id": "member", "aria-label": "post as"},
        [el("option", {"value": name}, name) for name in members],
    )
    photo = el("input", {"id": "upload", "type": "file", "accept": "image/png,image/jpeg,image/webp"})
    recording = el("input", {"id": "voice-upload", "type": "file", "accept": "audio/*,.ogg,.oga,.opus"})
    return el(
        "form",
        {"id": "compose-form", "autocomplete": "off"},
        el(
            "div",
            {"id": "context-bar", "hidden": True},
            el("span", {"id": "context-text"}),
            el("button", {"id": "cancel-context", "type": "button", "aria-label": "cancel"}, "×"),
        ),
        el(
            "div",
            {"class": "row members"},
            el("label", {"class": "as", "for": "member"}, "Posting as"),
            choose,
            el("input", {"id": "new-member", "placeholder": "add a member…", "maxlength": 64}),
            el("button", {"id": "add-member", "type": "button", "class": "secondary"}, "Add"),
        ),
        el(
            "div",
            {"class": "row write"},
            el("textarea", {"id": "composer", "rows": 2, "placeholder": "Write a message… (Enter sends)"}),
            el(
                "div",
                {"class": "tools"},
                el(
                    "button",
                    {
                        "id": "mention-bot",
                        "type": "button",
                        "class": "secondary",
                        "data-username": bot["username"],
                        "title": "mention the bot",
                    },
                    "@",
                    bot["username"],
                ),
                el(
                    "label",
                    {"id": "upload-label", "class": "button secondary", "title": "send a photo"},
                    "Photo",
                    photo,
                ),
                el(
                    "label",
                    {
                        "id": "voice-upload-label",
                        "class": "button secondary",
                        "title": "send a voice message (OGG/Opus) or an audio file",
                    },
                    "Voice",
                    recording,
                ),
                el("button", {"id": "send", "type": "submit"}, "Send"),
            ),
        ),
        el("p", {"id": "status", "role": "status"}),
    )


def render_page(
    chat: dict[str, Any],
    bot: dict[str, Any],
    members: list[str],
    model: dict[str, Any],
    inspector: str,
) -> str:
    title = str(chat.get("title") or "playground")
    header = el(
        "header",
        {"id": "top"},
        el(
            "div",
            {"class": "title"},
            el("h1", None, title),
            el("span", {"class": "subtitle"}, bot["first_name"], " (@", bot["username"], ") and the members"),
        ),
        el(
            "a",
            {"id": "inspector-link", "href": inspector, "rel": "noreferrer", "target": "_blank"},
            "Inspector",
        ),
    )
    timeline = el(
        "main",
        {"id": "app", "data-chat-id": chat["id"], "data-bot-username": bot["username"]},
        el(
            "p",
            {"id": "empty", "class": "empty"},
            "No messages yet. Say hello, and mention the bot to wake it.",
        ),
        el("ol", {"id": "timeline", "aria-live": "polite"}),
        el("p", {"id": "typing", "class": "typing", "hidden": True}, bot["first_name"], " is typing…"),
    )
    shell = el("div", {"id": "shell"}, header, _banner(model), timeline, _composer(bot, members))
    return page([title, " — LarkBot"], shell, scripts=["playground.js"], styles=["playground.css"])
