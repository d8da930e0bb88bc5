"""Per-chat behaviour (``chats.default`` and ``chats.<platform>:<chat_id>``)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, model_validator

from ._base import UserIds, _Section
from ._files import ChatFilesSettings
from ._manners import (
    QuietHoursSettings,
    RateLimitSettings,
    ShareOfVoiceSettings,
    TalkLevel,
    with_level_defaults,
)
from ._media import ChatMediaSettings
from ._reminders import ChatRemindersSettings


class ChatSettings(_Section):
    """Per-chat behaviour; every field has a default so ``chats.default`` may be sparse."""

    display_name: str | None = None
    utc_offset_min: int | None = Field(default=None, ge=-840, le=840)
    alias_message_ids: bool = True
    persona_files: tuple[str, ...] = ()
    contact_names: dict[str, str] = Field(default_factory=dict)
    blocked_users: UserIds = ()
    initial_delay_ms: int = Field(default=1000, ge=0)
    typing_extend_ms: int = Field(default=5000, ge=0)
    max_delay_ms: int = Field(default=30000, ge=0)
    probe_enabled: bool = True
    probe_context_est_tokens: int = Field(default=20000, gt=0)
    probe_timeout_s: float = Field(default=15.0, gt=0)
    #: Compaction (SPEC §4.5): when the history after the cursor (rendered context + turn responses)
    #: exceeds ``max_context_est_tokens``, its oldest part is summarized down to
    #: ``working_window_est_tokens``; the summary is capped at ``summary_max_est_tokens``.
    max_context_est_tokens: int = Field(default=60000, gt=0)
    working_window_est_tokens: int = Field(default=30000, gt=0)
    summary_max_est_tokens: int = Field(default=3000, ge=100)
    compaction_enabled: bool = True
    #: A failed compaction waits this long before the next attempt, doubling up to the maximum.
    compaction_retry_initial_s: float = Field(default=300.0, gt=0)
    compaction_retry_max_s: float = Field(default=3600.0, gt=0)
    #: A segment (one message, event or runtime output) larger than this is clipped for the model: its
    #: beginning and end are kept around a ``<clipped omitted-chars="N"/>`` marker.
    max_segment_est_tokens: int = Field(default=4000, ge=200)
    max_tool_rounds: int = Field(default=2, ge=1)
    max_work_tool_calls: int = Field(default=4, ge=0)
    max_send_attempts: int = Field(default=3, ge=0)
    turn_deadline_s: float = Field(default=15.0, gt=0)
    min_model_call_s: float = Field(default=2.0, ge=0)
    #: Delays before the retries of a wake-up that failed transiently; their count is the retry count.
    transient_retry_delays_s: tuple[Annotated[float, Field(gt=0)], ...] = Field(
        default=(5.0, 20.0), max_length=5
    )
    #: Consecutive bot-to-bot messages after which input only from other bots no longer wakes the bot.
    bot_exchange_cap: int = Field(default=4, ge=1)
    #: Cap of the compaction summary shown to the probe (outside its window budget); newest part kept.
    probe_summary_max_est_tokens: int = Field(default=2000, ge=0)
    #: Attempts of a send / reaction whose outcome stays unknown (same idempotency key each time).
    action_attempts: int = Field(default=3, ge=1, le=10)
    maintainer_window_sec: int = Field(default=600, ge=0)
    #: Per-person memory (docs/memory.md): the memory tools and the late-binding ``<memory>`` block.
    memory_enabled: bool = True
    #: The platform user id this chat is a direct (one-to-one) chat with; only there are that person's
    #: ``private`` memories used. Unset: the chat is a group (no private memories at all).
    direct_with: str | None = Field(default=None, min_length=1, max_length=128)
    #: High-importance memories of the people in the window shown in the late-binding message: at most
    #: this many, and at most this many characters in all.
    memory_late_binding_max: int = Field(default=20, ge=0, le=200)
    memory_late_binding_max_chars: int = Field(default=2000, ge=0, le=20000)
    #: ``memory_search`` results: at most this many, and at most this many characters in all.
    memory_search_max_results: int = Field(default=8, ge=1, le=50)
    memory_search_max_chars: int = Field(default=2000, ge=200, le=20000)
    shell_enabled: bool = False
    ban_spammer_enabled: bool = False
    #: Dry run (docs/driver.md "Dry run"): the driver runs and records its wake-ups, and nothing reaches
    #: the platform (sends, reactions, typing, recalls, moderation and the shell become recorded no-ops).
    #: The deployment's top-level ``dry_run`` turns it on for every chat.
    dry_run: bool = False
    #: In a dry run, whether the primary model is called; when not, the turn ends silent unanswered.
    dry_run_call_model: bool = True
    #: Manners (docs/driver.md "Manners"): the probe's guidance and the share-of-voice limits' defaults;
    #: the share of the chat's recent messages the bot may take; the hours it keeps quiet (none: never).
    talk_level: TalkLevel = "normal"
    #: The talk level's limits with the keys given here over them; ``None`` (``share_of_voice: null``):
    #: no limits.
    share_of_voice: ShareOfVoiceSettings | None = None
    quiet_hours: QuietHoursSettings | None = None
    #: How often one person may wake the bot, and how many primary turns it may take here (docs/driver.md
    #: "Rate limits"). ``None``: no limits.
    rate_limit: RateLimitSettings | None = None
    #: Platform budget (docs/budgets.md): the bot's messages per minute in this chat, across ingress
    #: replicas; ``None``: the platform's ``budgets.messages_per_minute``; ``0``: unlimited.
    messages_per_minute: int | None = Field(default=None, ge=0)
    #: Reminders (docs/driver.md "Reminders"): the tools ``set_reminder``, ``cancel_reminder`` and
    #: ``list_reminders``, and the chat's limits.
    reminders: ChatRemindersSettings = ChatRemindersSettings()
    #: Documents read by ``read_file`` (docs/driver.md "read_file"): how much text, how large a file.
    files: ChatFilesSettings = ChatFilesSettings()
    #: Media limits (docs/media.md): frames, file size, transcription language and duration.
    media: ChatMediaSettings = ChatMediaSettings()

    @model_validator(mode="before")
    @classmethod
    def _level_defaults(cls, data: Any) -> Any:
        return with_level_defaults(data)

    @model_validator(mode="after")
    def _windows_consistent(self) -> ChatSettings:
        if self.working_window_est_tokens >= self.max_context_est_tokens:
            raise ValueError(
                f"working_window_est_tokens ({self.working_window_est_tokens}) must be below "
                f"max_context_est_tokens ({self.max_context_est_tokens})"
            )
        if self.compaction_retry_max_s < self.compaction_retry_initial_s:
            raise ValueError("compaction_retry_max_s must be at least compaction_retry_initial_s")
        return self

    @model_validator(mode="after")
    def _segment_fits_windows(self) -> ChatSettings:
        # A clipped segment must fit half of every window it is shown in: the probe window keeps its
        # newest half-budget, and the working window must hold more than one message.
        limit = min(self.probe_context_est_tokens, self.working_window_est_tokens) // 2
        if self.max_segment_est_tokens > limit:
            raise ValueError(
                f"max_segment_est_tokens ({self.max_segment_est_tokens}) must be at most half of "
                f"probe_context_est_tokens and of working_window_est_tokens ({limit})"
            )
        return self
