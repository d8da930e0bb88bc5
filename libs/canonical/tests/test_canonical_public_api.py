"""The public API of ``larkbot.canonical`` is a decision: changing it must change this list too.

Every public module's ``__all__`` is pinned the httpx way as well — checked against the module's namespace
(``vars()``), never against a copied list (:mod:`larkbot.testkit.exports` states the rules).
"""

from __future__ import annotations

from types import ModuleType

import pytest

import larkbot.canonical as canonical
from larkbot.testkit.exports import export_problems, public_modules

EXPECTED = [
    "ACTION_ADAPTER",
    "EVENT_ADAPTER",
    "LLM_REPLY_ADAPTER",
    "SCHEMA_VERSION",
    "TRANSCRIPTION_REPLY_ADAPTER",
    "ActionError",
    "ActionRequest",
    "ActionResult",
    "AppendOp",
    "AssistantMessage",
    "AssistantPart",
    "Attachment",
    "AttachmentRef",
    "AttachmentType",
    "BanMemberAction",
    "Blockquote",
    "Bold",
    "BotAdded",
    "BotIdentity",
    "BotRemoved",
    "CanonicalEvent",
    "ChatNotice",
    "ChatPhotoChanged",
    "ChatRenamed",
    "ChatType",
    "Code",
    "ConfigError",
    "Content",
    "ContextOp",
    "ContextSnapshot",
    "ContextUpdate",
    "ContractError",
    "CursorMove",
    "CustomEmoji",
    "CustomEmojiAction",
    "CustomEmojiSticker",
    "DecodeError",
    "DeleteEvent",
    "DeleteMessageAction",
    "DownloadAction",
    "EditEvent",
    "FileExtract",
    "ForwardInfo",
    "HistoryItem",
    "HistoryRequest",
    "HistoryResponse",
    "ImagePart",
    "Inline",
    "Italic",
    "LLMError",
    "LLMReply",
    "LLMRequest",
    "LLMResponse",
    "LarkbotError",
    "Link",
    "MediaError",
    "MediaJob",
    "MediaResult",
    "MemberLeft",
    "MemberMessage",
    "MemberRequest",
    "MemberResponse",
    "MembersJoined",
    "Mention",
    "Message",
    "MessageDeletion",
    "MessageEvent",
    "MessagePinned",
    "ModerateAction",
    "ModeratedMessage",
    "ModerationReport",
    "PermanentError",
    "Platform",
    "Pre",
    "Purpose",
    "QuotedMessage",
    "ReactAction",
    "ReactionEvent",
    "ReadFileRequest",
    "ReadFileResponse",
    "ReadImageRequest",
    "ReadImageResponse",
    "ReasoningPart",
    "ReplaceOp",
    "ResetOp",
    "RetryableError",
    "RuntimeEvent",
    "SchemaVersionError",
    "Segment",
    "SendImageAction",
    "SendMessageAction",
    "Sender",
    "Service",
    "ServiceAction",
    "ServiceError",
    "ServiceEvent",
    "SnapshotRequest",
    "Spoiler",
    "StickerFormat",
    "StopReason",
    "Strikethrough",
    "Text",
    "TextPart",
    "ToolCallPart",
    "ToolChoice",
    "ToolResultMessage",
    "ToolSpec",
    "TopicChanged",
    "TranscriptionReply",
    "TranscriptionRequest",
    "TranscriptionResponse",
    "Transform",
    "TypingAction",
    "TypingSignal",
    "Underline",
    "Usage",
    "UserMessage",
    "UserPart",
    "WireFormat",
    "WireModel",
    "actions_subject",
    "canonical_json",
    "check_version",
    "context_subject",
    "decode",
    "decode_as",
    "encode",
    "events_subject",
    "fetch_subject",
    "headers_for",
    "msg_id",
    "names",
    "split_chat_subject",
    "subject_token",
    "typing_subject",
    "unescape_subject_token",
]


def test_all_is_pinned() -> None:
    assert canonical.__all__ == EXPECTED


def test_all_is_sorted_and_resolvable() -> None:
    # isort-style order (constants, classes, functions), as ruff's RUF022 keeps it.
    def key(name: str) -> tuple[int, str]:
        return (0 if name.isupper() else 1 if name[:1].isupper() else 2, name)

    assert sorted(EXPECTED, key=key) == EXPECTED
    for name in EXPECTED:
        assert getattr(canonical, name) is not None


@pytest.mark.parametrize("module", public_modules(canonical), ids=lambda module: module.__name__)
def test_all_is_what_the_module_defines(module: ModuleType) -> None:
    problems = export_problems(module)
    assert not problems, "\n".join(problems)


def test_every_public_module_is_checked() -> None:
    names = {module.__name__ for module in public_modules(canonical)}
    assert {"larkbot.canonical", "larkbot.canonical.events", "larkbot.canonical.names"} <= names
    assert "larkbot.canonical._base" not in names
