"""Every wire model survives encode → decode → encode unchanged, and bad payloads fail safely.

The case table must hold an instance of every concrete model: ``test_every_model_has_a_case`` introspects
the package so a new model without a case fails here.
"""

from __future__ import annotations

import json
from typing import Any, get_args

import pytest
from pydantic import BaseModel, TypeAdapter, ValidationError

import larkbot.canonical as canonical
from larkbot.canonical import (
    ACTION_ADAPTER,
    EVENT_ADAPTER,
    LLM_REPLY_ADAPTER,
    ActionError,
    ActionResult,
    AppendOp,
    AssistantMessage,
    AssistantPart,
    Attachment,
    AttachmentRef,
    AttachmentType,
    BanMemberAction,
    Blockquote,
    Bold,
    BotAdded,
    BotIdentity,
    BotRemoved,
    ChatNotice,
    ChatPhotoChanged,
    ChatRenamed,
    Code,
    Content,
    ContextOp,
    ContextSnapshot,
    ContextUpdate,
    CursorMove,
    CustomEmoji,
    CustomEmojiAction,
    CustomEmojiSticker,
    DecodeError,
    DeleteEvent,
    DeleteMessageAction,
    DownloadAction,
    EditEvent,
    FileExtract,
    ForwardInfo,
    HistoryItem,
    HistoryRequest,
    HistoryResponse,
    ImagePart,
    Inline,
    Italic,
    Link,
    LLMError,
    LLMRequest,
    LLMResponse,
    MediaError,
    MediaJob,
    MediaResult,
    MemberLeft,
    MemberMessage,
    MemberRequest,
    MemberResponse,
    MembersJoined,
    Mention,
    Message,
    MessageDeletion,
    MessageEvent,
    MessagePinned,
    ModerateAction,
    ModeratedMessage,
    ModerationReport,
    Platform,
    Pre,
    QuotedMessage,
    ReactAction,
    ReactionEvent,
    ReadFileRequest,
    ReadFileResponse,
    ReadImageRequest,
    ReadImageResponse,
    ReasoningPart,
    ReplaceOp,
    ResetOp,
    RuntimeEvent,
    SchemaVersionError,
    Segment,
    Sender,
    SendImageAction,
    SendMessageAction,
    ServiceAction,
    ServiceError,
    ServiceEvent,
    SnapshotRequest,
    Spoiler,
    StickerFormat,
    Strikethrough,
    Text,
    TextPart,
    ToolCallPart,
    ToolChoice,
    ToolResultMessage,
    ToolSpec,
    TopicChanged,
    TranscriptionRequest,
    TranscriptionResponse,
    TypingAction,
    TypingSignal,
    Underline,
    Usage,
    UserMessage,
    UserPart,
    WireModel,
    decode,
    decode_as,
    encode,
    headers_for,
    names,
)

# -- realistic ids -------------------------------------------------------------------------------------
FS_CHAT = "oc_a0553eda9014c201e6969b478895c230"
FS_MSG = "om_dc13264520392913993dd051dba21dcf"
FS_MSG_2 = "om_5ce6d572455d361153b7cb51da133945"
FS_ALICE = "ou_7d8a6e6df7621556ce0d21922b676706"
FS_BOB = "ou_84aad35d084aa403a838cf73ee18467f"
FS_BOT = "ou_0c6b5b2f0a1e4d3c9b8a7f6e5d4c3b2a"
FS_IMAGE = "img_v3_02ab_6f1c0d9e-1d1a-4b0f-9a3c-8e0f1a2b3c4g"
TG_CHAT = "-1001234567890"
TG_MSG = "4821"
TG_ALICE = "123456789"
TG_BOT = "7012345678"
TG_STICKER = "CAACAgIAAxkBAAIBZ2YxQm9vAAFk9Xl1AAHpJ8W3yqX8AAI9AAPANk8T-WpfmoJrTXU0BA"
BLOB = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
THUMB = "thumb:sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"

ALICE = Sender(id=FS_ALICE, display_name="Alice Zhang")
BOB_TG = Sender(id=TG_ALICE, display_name="Bob", username="bob_builder")
BOT_TG = Sender(id=TG_BOT, display_name="Lark", username="lark_member_bot", is_bot=True)


def _fs(**fields: Any) -> dict[str, Any]:
    base = {
        "platform": Platform.FEISHU,
        "chat_id": FS_CHAT,
        "chat_type": "group",
        "received_at_ms": 1_760_683_812_345,
        "timestamp_sec": 1_760_683_811.0,
        "utc_offset_min": 480,
    }
    return base | fields


def _tg(**fields: Any) -> dict[str, Any]:
    base = {
        "platform": Platform.TELEGRAM,
        "chat_id": TG_CHAT,
        "chat_type": "supergroup",
        "received_at_ms": 1_760_683_900_001,
        "timestamp_sec": 1_760_683_899.0,
        "utc_offset_min": -300,
    }
    return base | fields


RICH = Content(
    nodes=(
        Mention(user_id=FS_BOT, text="@Lark"),
        Text(text=" look at "),
        Bold(children=(Italic(children=(Text(text="this"),)),)),
        Text(text=":\n"),
        Link(url="https://example.com/a?b=1", children=(Underline(children=(Text(text="the doc"),)),)),
        Text(text=" "),
        Strikethrough(children=(Text(text="old"),)),
        Spoiler(children=(Text(text="ending"),)),
        Code(text="x = 1"),
        Pre(text="print('hi')\n", lang="python"),
        Blockquote(children=(Text(text="quoted "), Mention(text="@all"))),
        CustomEmoji(alt="🙂", emoji_id="5368324170671202286", pack="DuckEmoji"),
    )
)
PHOTO = Attachment(
    type=AttachmentType.PHOTO,
    file_id=FS_IMAGE,
    mime="image/jpeg",
    width=4000,
    height=3000,
    size_bytes=2_345_678,
    content_hash=BLOB,
    thumbnail_key=THUMB,
)
STICKER = Attachment(
    type=AttachmentType.STICKER,
    file_id=TG_STICKER,
    mime="application/x-tgsticker",
    width=512,
    height=512,
    duration_s=2.5,
    size_bytes=18_211,
    sticker_pack="HotCherry",
    sticker_emoji="😂",
    sticker_format=StickerFormat.ANIMATED,
)
PHOTO_REF = AttachmentRef(
    index=0, type=AttachmentType.PHOTO, file_id=FS_IMAGE, blob_key=BLOB, mime="image/jpeg"
)
SEGMENT = Segment(
    segment_id=f"msg:{FS_MSG}",
    node_type="message",
    event_seq=1042,
    xml=(
        f'<message id="m0a1b2c3d4" sender="Alice Zhang" uid="{FS_ALICE}" t="10-17 14:50:11">'
        '<mention>@Lark</mention> see\n<image type="photo" mime="image/jpeg" size="4000x3000" '
        'file-id="m0a1b2c3d4:0"/></message>'
    ),
    image_parts=(ImagePart(blob_key=THUMB, mime="image/webp", detail="low"),),
    received_at_ms=1_760_683_812_345,
    timestamp_sec=1_760_683_811.0,
    sender_id=FS_ALICE,
    message_id=FS_MSG,
    mentions_me=True,
    attachments=(PHOTO_REF,),
)
REACTION_SEGMENT = Segment(
    segment_id="evt:1043",
    node_type="event",
    event_seq=1043,
    xml='<event type="reaction" t="10-17 14:51:02" emoji="THUMBSUP" actor="Bob" message_id="m0a1b2c3d4"/>',
    received_at_ms=1_760_683_862_000,
    timestamp_sec=1_760_683_862.0,
    sender_id=FS_BOB,
)
TOOL_CALL = ToolCallPart(
    id="toolu_01A09q90qw90lq917835lq9", name="send_message", arguments_json='{"text":"hi","reply_to":"m0a1"}'
)
ASSISTANT = AssistantMessage(
    parts=(
        ReasoningPart(
            text="They asked me directly.",
            signature="EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds",
            format="anthropic-messages",
            model_identity="anthropic/claude-sonnet-4-5",
        ),
        TextPart(text="On it."),
        TOOL_CALL,
    ),
    model_identity="anthropic/claude-sonnet-4-5",
)
SEND_TOOL = ToolSpec.of(
    "send_message",
    "Send a message to the chat.",
    {
        "type": "object",
        "properties": {"text": {"type": "string"}, "reply_to": {"type": "string"}},
        "required": ["text"],
    },
)
USAGE = Usage(
    input_tokens=52_311,
    output_tokens=412,
    cache_read_tokens=48_000,
    cache_write_tokens=3_900,
    reasoning_tokens=96,
)
HISTORY_ITEM = HistoryItem(
    message_id=FS_MSG,
    alias="m0a1b2c3d4",
    xml=SEGMENT.xml,
    image_parts=SEGMENT.image_parts,
    attachments=SEGMENT.attachments,
    sender_id=FS_ALICE,
    is_forwarded=True,
    reply_to_message_id=FS_MSG_2,
)
#: Fields added after the first release; a payload without them (an older producer's) still decodes.
ADDED_FIELDS: dict[type[BaseModel], tuple[str, ...]] = {
    Segment: ("attachments", "is_forwarded", "reply_to_message_id"),
    HistoryItem: (
        "attachments",
        "sender_id",
        "is_myself",
        "is_self_sent",
        "is_bot",
        "is_deleted",
        "is_forwarded",
        "reply_to_message_id",
    ),
}
MEDIA_ERROR = MediaError(code="too_large", message="file exceeds 20 MB", retryable=False)

CASES: dict[str, BaseModel] = {
    # content
    "text": Text(text="你好 world\n"),
    "bold": RICH.nodes[2],
    "italic": Italic(children=(Text(text="x"),)),
    "underline": Underline(children=(Text(text="u"),)),
    "strikethrough": Strikethrough(children=(Text(text="s"),)),
    "spoiler": Spoiler(children=(Bold(children=(Text(text="twist"),)),)),
    "code": Code(text="uv run"),
    "pre": Pre(text="SELECT 1;", lang=None),
    "link": Link(url="https://t.me/c/1234567890/4821", children=(Text(text="this"),)),
    "mention": Mention(user_id=FS_ALICE, text="@Alice Zhang"),
    "blockquote": Blockquote(children=(Text(text="> nested"),)),
    "custom_emoji": CustomEmoji(alt="[Smile]"),
    "content": RICH,
    "attachment-photo": PHOTO,
    "attachment-sticker": STICKER,
    # events
    "sender": BOT_TG,
    "quoted_message": QuotedMessage(sender=BOB_TG, content=Content.from_text("see above")),
    "forward_info": ForwardInfo(from_name="Hidden User", date_sec=1_760_600_000.0),
    "message-feishu": MessageEvent(
        **_fs(dedup_key=FS_MSG, event_id="5e3702a84e847582be8db7fb73283c02"),
        message_id=FS_MSG,
        sender=ALICE,
        content=RICH,
        attachments=(PHOTO,),
        reply_to_message_id=FS_MSG_2,
    ),
    "message-telegram": MessageEvent(
        **_tg(dedup_key=f"msg:{TG_MSG}", event_id="918273645"),
        message_id=TG_MSG,
        sender=BOB_TG,
        content=Content.from_text("lol"),
        attachments=(STICKER,),
        reply_to_message_id="4820",
        reply_quote=Content(nodes=(Italic(children=(Text(text="part of it"),)),)),
        forward_info=ForwardInfo(
            from_name="Carol", from_id="555", from_chat_id="-100987", date_sec=1_760_600_000.0
        ),
    ),
    "message-topic-reply": MessageEvent(
        **_tg(dedup_key="msg:4823"),
        message_id="4823",
        sender=BOB_TG,
        content=Content.from_text("agreed"),
        reply_to_message_id="17",
        reply_target=QuotedMessage(
            sender=ALICE, content=Content.from_text("ship it?"), attachments=(AttachmentType.PHOTO,)
        ),
        thread_id="9",
        thread_name="Releases",
    ),
    "message-self-sent": MessageEvent(
        **_tg(dedup_key="msg:4822"),
        message_id="4822",
        sender=BOT_TG,
        content=Content.from_text("hi"),
        is_self_sent=True,
    ),
    "edit": EditEvent(
        **_tg(dedup_key=f"edit:{TG_MSG}:1760683950"),
        message_id=TG_MSG,
        sender=BOB_TG,
        content=Content.from_text("lol, fixed"),
        edited_at_sec=1_760_683_950.0,
        sent_at_sec=1_760_683_900.0,
    ),
    "delete": DeleteEvent(**_fs(dedup_key=f"recall:{FS_MSG}"), message_ids=(FS_MSG,), actor_id=FS_ALICE),
    "reaction": ReactionEvent(
        **_fs(dedup_key=f"reaction:{FS_MSG}:THUMBSUP:{FS_BOB}:deleted", chat_type=None),
        message_id=FS_MSG,
        actor=Sender(id=FS_BOB, display_name="Bob Li"),
        emoji="THUMBSUP",
        removed=True,
    ),
    "members_joined": MembersJoined(actor=ALICE, members=(Sender(id=FS_BOB, display_name="Bob Li"),)),
    "member_left": MemberLeft(members=(BOB_TG,)),
    "chat_renamed": ChatRenamed(actor=ALICE, from_title="Old", to_title="周末爬山"),
    "chat_photo_changed": ChatPhotoChanged(actor=BOB_TG),
    "message_pinned": MessagePinned(actor=ALICE, message_id=FS_MSG),
    "message_pinned-quoted": MessagePinned(
        actor=BOB_TG, message_id="17", pinned=QuotedMessage(sender=ALICE, content=Content.from_text("rules"))
    ),
    "topic_changed": TopicChanged(change="edited", actor=BOB_TG, thread_id="9", name="Releases 2"),
    "chat_notice": ChatNotice(
        type="video_chat_ended",
        actor=BOB_TG,
        members=(ALICE,),
        attributes=(("duration", "1h 2m"),),
        text="Alice invited Bob",
    ),
    "bot_added": BotAdded(actor=ALICE),
    "bot_removed": BotRemoved(),
    "service": ServiceEvent(
        **_fs(dedup_key="chat_updated:7f1e"), action=ChatRenamed(from_title="Old", to_title="New")
    ),
    "runtime": RuntimeEvent(
        **_tg(dedup_key="runtime:task:17:done", chat_type=None),
        type="task_completed",
        attributes=(("task_id", "17"), ("exit_code", "0")),
        text="build finished",
    ),
    "bot_identity": BotIdentity(
        platform=Platform.FEISHU, bot_id=FS_BOT, name="Lark", app_id="cli_a1b2c3d4e5f6a7b8", updated_at_ms=1
    ),
    "typing_signal": TypingSignal(
        platform=Platform.TELEGRAM, chat_id=TG_CHAT, user_id=TG_ALICE, at_ms=1_760_683_901_000
    ),
    # context
    "attachment_ref": PHOTO_REF,
    "attachment_ref-unseen": AttachmentRef(index=3, type=AttachmentType.STICKER, file_id=TG_STICKER),
    "segment": SEGMENT,
    "segment-forwarded-reply": SEGMENT.model_copy(
        update={"is_forwarded": True, "reply_to_message_id": FS_MSG_2, "is_bot": True}
    ),
    "append_op": AppendOp(segments=(SEGMENT, REACTION_SEGMENT)),
    "replace_op": ReplaceOp(segment=SEGMENT.model_copy(update={"is_deleted": True, "xml": "<message/>"})),
    "reset_op": ResetOp(segments=()),
    "context_update": ContextUpdate(
        platform=Platform.FEISHU,
        chat_id=FS_CHAT,
        seq=1043,
        base_seq=1042,
        cursor=900,
        ops=(AppendOp(segments=(REACTION_SEGMENT,)), ReplaceOp(segment=SEGMENT)),
        title="周末爬山",
    ),
    "context_snapshot": ContextSnapshot(
        platform=Platform.FEISHU, chat_id=FS_CHAT, seq=1043, cursor=900, segments=(SEGMENT, REACTION_SEGMENT)
    ),
    "snapshot_request": SnapshotRequest(platform=Platform.TELEGRAM, chat_id=TG_CHAT),
    "history_request": HistoryRequest(
        platform=Platform.FEISHU, chat_id=FS_CHAT, message_ids=("m0a1b2c3d4", FS_MSG_2)
    ),
    "history_item": HistoryItem(message_id=FS_MSG, alias="m0a1b2c3d4", xml="<message/>"),
    "history_response": HistoryResponse(
        found=(HISTORY_ITEM,),
        missing=(FS_MSG_2,),
    ),
    "member_request": MemberRequest(platform=Platform.TELEGRAM, chat_id=TG_CHAT, user_id="6660000001"),
    "member_message": MemberMessage(message_id=FS_MSG, alias="m0a1b2c3d4", timestamp_sec=1_760_683_820.5),
    "member_response": MemberResponse(
        user_id=FS_ALICE,
        message_count=3,
        messages=(MemberMessage(message_id=FS_MSG_2, timestamp_sec=1_760_683_825.0),),
    ),
    "cursor_move": CursorMove(platform=Platform.FEISHU, chat_id=FS_CHAT, cursor=900, reason="compaction"),
    # actions
    "send_message": SendMessageAction(
        platform=Platform.FEISHU,
        idempotency_key="turn:8812:step:1:call:0",
        deadline_ms=1_760_683_830_000,
        chat_id=FS_CHAT,
        text=f'<mention uid="{FS_ALICE}">@Alice Zhang</mention> **sure**',
        reply_to_message_id=FS_MSG,
        mentions=(FS_ALICE,),
    ),
    "react": ReactAction(
        platform=Platform.TELEGRAM, idempotency_key="k-react", chat_id=TG_CHAT, message_id=TG_MSG, emoji="👍"
    ),
    "typing": TypingAction(platform=Platform.TELEGRAM, idempotency_key="typing:1", chat_id=TG_CHAT),
    "download": DownloadAction(
        platform=Platform.FEISHU,
        idempotency_key=f"download:{FS_IMAGE}",
        chat_id=FS_CHAT,
        message_id=FS_MSG,
        file_id=FS_IMAGE,
        attachment_type=AttachmentType.PHOTO,
        max_bytes=20 * 1024 * 1024,
    ),
    "custom_emoji_action": CustomEmojiAction(
        platform=Platform.TELEGRAM,
        idempotency_key="media-emoji:5368324170671202286",
        chat_id=TG_CHAT,
        emoji_ids=("5368324170671202286",),
    ),
    "custom_emoji_sticker": CustomEmojiSticker(
        emoji_id="5368324170671202286",
        file_id="CAACAgIAAxkBAAEB",
        set_name="DuckEmoji",
        emoji="🙂",
        format=StickerFormat.ANIMATED,
        width=100,
        height=100,
    ),
    "action_result-custom_emoji": ActionResult(
        idempotency_key="media-emoji:5368324170671202286",
        ok=True,
        outcome="done",
        custom_emoji=(
            CustomEmojiSticker(
                emoji_id="5368324170671202286", file_id="CAACAgIAAxkBAAEB", format=StickerFormat.STATIC
            ),
        ),
    ),
    "send_image": SendImageAction(
        platform=Platform.TELEGRAM, idempotency_key="k-img", chat_id=TG_CHAT, blob_key=BLOB, mime="image/png"
    ),
    "delete_message": DeleteMessageAction(
        platform=Platform.FEISHU, idempotency_key="k-del", chat_id=FS_CHAT, message_ids=(FS_MSG, FS_MSG_2)
    ),
    "ban_member": BanMemberAction(
        platform=Platform.TELEGRAM, idempotency_key="k-ban", chat_id=TG_CHAT, user_id="6660000001"
    ),
    "moderate": ModerateAction(
        platform=Platform.TELEGRAM,
        idempotency_key="k-mod",
        deadline_ms=1_760_683_830_000,
        chat_id=TG_CHAT,
        user_id="6660000001",
        messages=(ModeratedMessage(message_id=TG_MSG, timestamp_sec=1_760_683_820.0),),
    ),
    "moderated_message": ModeratedMessage(message_id=FS_MSG, timestamp_sec=1_760_683_820.0),
    "message_deletion": MessageDeletion(message_id=FS_MSG, outcome="deleted"),
    "moderation_report": ModerationReport(
        banned=False,
        ban_error=ActionError(code="not_member", message="already left", retryable=False),
    ),
    "action_result-moderation": ActionResult(
        idempotency_key="k-mod",
        ok=True,
        outcome="done",
        moderation=ModerationReport(
            banned=True,
            deletions=(
                MessageDeletion(message_id="530", outcome="deleted"),
                MessageDeletion(
                    message_id="12",
                    outcome="skipped",
                    error=ActionError(code="too_old", message="older than 48 h", retryable=False),
                ),
            ),
        ),
    ),
    "action_error": ActionError(
        code="rate_limited", message="429 from platform", retryable=True, retry_after_s=3.0
    ),
    "action_result-ok": ActionResult(idempotency_key="k", ok=True, outcome="done", message_ids=(FS_MSG,)),
    "action_result-unknown": ActionResult(
        idempotency_key="k",
        ok=False,
        outcome="unknown",
        error=ActionError(code="timeout", message="no answer in 10 s", retryable=False),
    ),
    # llm
    "text_part": TextPart(text="hello"),
    "image_part": ImagePart(blob_key=BLOB, mime="image/png", detail="high"),
    "tool_call_part": TOOL_CALL,
    "reasoning_part": ReasoningPart(
        opaque="gAAAAABo...", item_id="rs_68f1", format="responses", model_identity="openai/gpt-5"
    ),
    "user_message": UserMessage(parts=(TextPart(text=SEGMENT.xml), *SEGMENT.image_parts)),
    "assistant_message": ASSISTANT,
    "assistant_message-extra": AssistantMessage(
        parts=(TextPart(text="ok"),),
        model_identity="deepseek/deepseek-reasoner",
        provider_extra='{"reasoning_content":"…"}',
        provider_extra_format="openai-chat",
    ),
    "tool_result_message": ToolResultMessage(
        tool_call_id=TOOL_CALL.id, parts=(TextPart(text='{"sent":"m0a1"}'),), requires_follow_up=False
    ),
    "tool_spec": SEND_TOOL,
    "tool_choice": ToolChoice(mode="tool", name="send_message"),
    "llm_request": LLMRequest(
        request_id="req-8812-1",
        purpose="primary",
        endpoint="claude-main",
        system="You are Lark, a member of this group.",
        messages=(UserMessage(parts=(TextPart(text=SEGMENT.xml),)), ASSISTANT),
        tools=(SEND_TOOL,),
        tool_choice=ToolChoice(mode="any"),
        max_output_tokens=2048,
        temperature=0.7,
        prompt_cache_key=f"feishu:{FS_CHAT}",
        deadline_ms=1_760_683_827_000,
        chat_key=f"feishu:{FS_CHAT}",
    ),
    "usage": USAGE,
    "llm_response": LLMResponse(
        request_id="req-8812-1",
        model_identity="anthropic/claude-sonnet-4-5",
        message=ASSISTANT,
        stop_reason="tool_use",
        usage=USAGE,
        provider_latency_ms=2310,
        gateway_latency_ms=4,
    ),
    "llm_error": LLMError(
        request_id="req-8812-2",
        category="transient",
        message="HTTP 529 overloaded",
        status=529,
        retry_after_s=5.0,
    ),
    "llm_error-context_length": LLMError(
        request_id="req-8812-3",
        category="context_length",
        message="provider answered HTTP 400: prompt is too long: 208310 tokens > 200000 maximum",
        status=400,
    ),
    # media
    "media_job": MediaJob(
        job_id="thumbnail:feishu:om_dc13:0",
        platform=Platform.FEISHU,
        chat_id=FS_CHAT,
        message_id=FS_MSG,
        dedup_key=FS_MSG,
        attachment_index=0,
        transform="thumbnail",
        attachment_type=AttachmentType.PHOTO,
        file_id=FS_IMAGE,
        mime="image/jpeg",
    ),
    "media_job-emoji": MediaJob(
        job_id="custom_emoji:5368324170671202286",
        platform=Platform.TELEGRAM,
        chat_id=TG_CHAT,
        message_id=TG_MSG,
        dedup_key=f"msg:{TG_MSG}",
        attachment_index=None,
        transform="custom_emoji",
        file_id="5368324170671202286",
        max_frames=5,
        vision_endpoint="vision-mini",
    ),
    "media_job-transcript": MediaJob(
        job_id="transcript:telegram:4821:0",
        platform=Platform.TELEGRAM,
        chat_id=TG_CHAT,
        message_id=TG_MSG,
        dedup_key=f"msg:{TG_MSG}",
        attachment_index=0,
        transform="transcript",
        attachment_type=AttachmentType.VOICE,
        file_id="AwACAgIAAxkBAAIB",
        mime="audio/ogg",
        size_bytes=48_213,
        duration_s=7.0,
        max_bytes=10_000_000,
        transcription_endpoint="whisper",
        language="de",
        max_duration_s=300,
    ),
    "media_error": MEDIA_ERROR,
    "media_result": MediaResult(
        job_id="frames:telegram:4821:0",
        platform=Platform.TELEGRAM,
        chat_id=TG_CHAT,
        message_id=TG_MSG,
        dedup_key=f"msg:{TG_MSG}",
        attachment_index=0,
        transform="frames",
        ok=True,
        content_hash=BLOB,
        frame_keys=("frame:a", "frame:b", "frame:c"),
        frame_times_ms=(0, 1500, 3000),
    ),
    "media_result-failed": MediaResult(
        job_id="alt_text:feishu:om_dc13:0",
        platform=Platform.FEISHU,
        chat_id=FS_CHAT,
        message_id=FS_MSG,
        dedup_key=FS_MSG,
        attachment_index=0,
        transform="alt_text",
        ok=False,
        error=MEDIA_ERROR,
    ),
    "media_result-transcript": MediaResult(
        job_id="transcript:telegram:4821:0",
        platform=Platform.TELEGRAM,
        chat_id=TG_CHAT,
        message_id=TG_MSG,
        dedup_key=f"msg:{TG_MSG}",
        attachment_index=0,
        transform="transcript",
        ok=True,
        content_hash=BLOB,
        alt_text="Wir treffen uns um acht am Bahnhof.",
        duration_ms=7040,
    ),
    "transcription_request": TranscriptionRequest(
        request_id="tr-1",
        endpoint="whisper",
        blob_key=BLOB,
        mime="audio/wav",
        filename="voice.wav",
        language="de",
        deadline_ms=1_760_683_827_000,
        chat_key="telegram:-1001",
    ),
    "transcription_response": TranscriptionResponse(
        request_id="tr-1",
        model_identity="openai-transcription:api.openai.com/whisper-1",
        text="Wir treffen uns um acht am Bahnhof.",
        language="german",
        duration_s=7.04,
        provider_latency_ms=812,
        gateway_latency_ms=3,
        fallback_from=("whisper",),
        endpoint="local-whisper",
    ),
    "read_image_request": ReadImageRequest(
        request_id="ri-1",
        platform=Platform.FEISHU,
        chat_id=FS_CHAT,
        message_id=FS_MSG,
        file_id=FS_IMAGE,
        attachment_type=AttachmentType.PHOTO,
        detail="high",
        deadline_ms=1_760_683_827_000,
    ),
    "service_error": ServiceError(
        code="owner_unavailable",
        message="partition 3 is held by replica b, which does not answer",
        retryable=True,
    ),
    "media_result-emoji": MediaResult(
        job_id="custom_emoji:5368324170671202286",
        platform=Platform.TELEGRAM,
        chat_id=TG_CHAT,
        message_id=TG_MSG,
        dedup_key=f"msg:{TG_MSG}",
        attachment_index=None,
        transform="custom_emoji",
        ok=True,
        content_hash=BLOB,
        alt_text="a yellow duck waving",
        pack="DuckEmoji",
    ),
    "read_file_request": ReadFileRequest(
        request_id="rf-1",
        platform=Platform.TELEGRAM,
        chat_id=TG_CHAT,
        message_id=TG_MSG,
        file_id="BQACAgIAAxkBAAEC",
        attachment_type=AttachmentType.DOCUMENT,
        name="report.pdf",
        mime="application/pdf",
        size_bytes=48_213,
        max_chars=12_000,
        max_bytes=20 * 1024 * 1024,
        deadline_ms=1_760_683_827_000,
    ),
    "file_extract": FileExtract(
        name="report.pdf",
        kind="pdf",
        mime="application/pdf",
        size_bytes=48_213,
        text="Quarterly report\nRevenue grew 12 %.",
        total_chars=35,
        truncated=False,
        parts=2,
        parts_read=2,
    ),
    "read_file_response-failed": ReadFileResponse(
        request_id="rf-1",
        ok=False,
        error=MediaError(code="unsupported", message="a legacy .doc file", retryable=False),
    ),
    "read_file_response": ReadFileResponse(
        request_id="rf-1",
        ok=True,
        extract=FileExtract(
            kind="text", mime="text/plain", size_bytes=5, text="hello", total_chars=5, truncated=False
        ),
    ),
    "read_image_response": ReadImageResponse(
        request_id="ri-1",
        ok=True,
        image=ImagePart(blob_key=BLOB, mime="image/png", detail="high"),
        alt_text="a cat",
    ),
}

UNIONS: tuple[tuple[Any, TypeAdapter[Any]], ...] = (
    (canonical.CanonicalEvent, EVENT_ADAPTER),
    (canonical.ActionRequest, ACTION_ADAPTER),
    (canonical.LLMReply, LLM_REPLY_ADAPTER),
    (canonical.TranscriptionReply, canonical.TRANSCRIPTION_REPLY_ADAPTER),
    (Inline, TypeAdapter(Inline)),
    (ServiceAction, TypeAdapter(ServiceAction)),
    (ContextOp, TypeAdapter(ContextOp)),
    (Message, TypeAdapter(Message)),
    (AssistantPart, TypeAdapter(AssistantPart)),
    (UserPart, TypeAdapter(UserPart)),
)


def _union_members(alias: Any) -> tuple[type, ...]:
    union, _field = get_args(alias)
    return get_args(union)


def _concrete_models() -> set[type[WireModel]]:
    found: set[type[WireModel]] = set()
    stack: list[type[WireModel]] = [WireModel]
    while stack:
        for sub in stack.pop().__subclasses__():
            stack.append(sub)
            if sub.__module__.startswith("larkbot.canonical") and not sub.__name__.startswith("_"):
                found.add(sub)
    return found


def test_every_model_has_a_case() -> None:
    missing = {m.__name__ for m in _concrete_models()} - {type(case).__name__ for case in CASES.values()}
    assert not missing, f"add a round-trip case for: {sorted(missing)}"


def test_every_model_is_exported() -> None:
    assert {m.__name__ for m in _concrete_models()} <= set(canonical.__all__)


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_round_trip(case: BaseModel) -> None:
    data = encode(case)
    decoded = decode(data, type(case), headers_for(case))
    assert decoded == case
    assert encode(decoded) == data
    assert hash(decoded) == hash(case)


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_round_trip_through_unions(case: BaseModel) -> None:
    for alias, adapter in UNIONS:
        if type(case) in _union_members(alias):
            decoded = decode_as(encode(case), adapter, headers_for(case))
            assert decoded == case
            assert type(decoded) is type(case)


def test_models_are_frozen() -> None:
    with pytest.raises(ValidationError, match="frozen"):
        ALICE.display_name = "Mallory"  # type: ignore[misc]
    event = CASES["message-feishu"]
    assert isinstance(event, MessageEvent)
    with pytest.raises(ValidationError, match="frozen"):
        event.chat_id = "oc_other"  # type: ignore[misc]


def test_unknown_field_is_a_decode_error() -> None:
    payload = json.loads(encode(CASES["message-feishu"])) | {"added_in_v2": True}
    with pytest.raises(DecodeError, match="added_in_v2"):
        decode_as(json.dumps(payload).encode(), EVENT_ADAPTER)
    with pytest.raises(DecodeError):
        decode(json.dumps(payload).encode(), MessageEvent)


@pytest.mark.parametrize("case", [SEGMENT, HISTORY_ITEM], ids=["segment", "history_item"])
def test_payloads_of_older_producers_still_decode(case: Segment | HistoryItem) -> None:
    added = ADDED_FIELDS[type(case)]
    payload = json.loads(encode(case))
    for name in added:
        del payload[name]
    decoded = decode(json.dumps(payload).encode(), type(case))
    defaults = {name: type(case).model_fields[name].default for name in added}
    assert decoded == case.model_copy(update=defaults)
    assert (decoded.is_forwarded, decoded.reply_to_message_id) == (False, None)


@pytest.mark.parametrize("case", [SEGMENT, HISTORY_ITEM], ids=["segment", "history_item"])
def test_payloads_of_newer_producers_fail_in_an_older_consumer(case: Segment | HistoryItem) -> None:
    # Why docs/deployment.md upgrades the consumer (the driver) before the producer (the pipeline).
    payload = json.loads(encode(case))
    payload["added_in_a_later_release"] = True
    with pytest.raises(DecodeError, match="added_in_a_later_release"):
        decode(json.dumps(payload).encode(), type(case))


@pytest.mark.parametrize("found", [None, "0", "2", "v1"])
def test_schema_version_mismatch(found: str | None) -> None:
    case = CASES["usage"]
    headers = {names.HEADER_TYPE: "Usage"} | ({} if found is None else {names.HEADER_SCHEMA: found})
    with pytest.raises(SchemaVersionError) as info:
        decode(encode(case), Usage, headers)
    assert info.value.found == found
    with pytest.raises(SchemaVersionError):
        decode_as(encode(CASES["delete"]), EVENT_ADAPTER, headers)


def test_type_header_mismatch() -> None:
    with pytest.raises(DecodeError, match="expected LLMRequest"):
        decode(encode(CASES["usage"]), LLMRequest, headers_for(CASES["usage"]))


def test_wrong_discriminator_is_a_decode_error() -> None:
    payload = json.loads(encode(CASES["delete"])) | {"kind": "sk-live-Zx81Qw0secret"}
    with pytest.raises(DecodeError, match="discriminator") as info:
        decode_as(json.dumps(payload).encode(), EVENT_ADAPTER)
    assert "sk-live-Zx81Qw0secret" not in str(info.value)


SECRET = "sk-proj-Qm9vYmFyYmF6cXV4c2VjcmV0"


@pytest.mark.parametrize(
    "mutate",
    [
        pytest.param(lambda p: p | {"received_at_ms": SECRET}, id="bad-int"),
        pytest.param(lambda p: p | {"utc_offset_min": SECRET}, id="bad-offset"),
        pytest.param(lambda p: p | {"platform": SECRET}, id="bad-enum"),
        pytest.param(lambda p: p | {"chat_type": SECRET}, id="bad-literal"),
        pytest.param(lambda p: p | {"sender": SECRET}, id="bad-model"),
        pytest.param(lambda p: p | {"attachments": [{"type": SECRET, "file_id": SECRET}]}, id="nested"),
        pytest.param(
            lambda p: p | {"content": {"nodes": [{"kind": SECRET, "text": SECRET}]}}, id="nested-tag"
        ),
    ],
)
def test_decode_error_never_echoes_input(mutate: Any) -> None:
    payload = mutate(json.loads(encode(CASES["message-feishu"])))
    with pytest.raises(DecodeError) as info:
        decode_as(json.dumps(payload).encode(), EVENT_ADAPTER)
    assert SECRET not in str(info.value)
    assert SECRET not in repr(info.value)
    assert info.value.__cause__ is None


def test_invalid_json_is_a_decode_error() -> None:
    with pytest.raises(DecodeError, match="Invalid JSON"):
        decode(b'{"text": "' + SECRET.encode(), TextPart)


def test_plain_text_flattens_the_tree() -> None:
    assert RICH.plain_text() == ("@Lark look at this:\nthe doc oldendingx = 1print('hi')\nquoted @all🙂")
    assert Content(nodes=(Link(url="https://a.example", children=()),)).plain_text() == "https://a.example"
    assert Content.from_text("") == Content()
