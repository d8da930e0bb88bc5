"""Feishu reaction ``emoji_type`` names and the Unicode emoji they stand for.

Inbound, a known ``emoji_type`` becomes its Unicode emoji (what the model reads and what Telegram uses);
an unknown one keeps Feishu's name. Outbound accepts either a Unicode emoji from the table or a Feishu
name from :data:`FEISHU_EMOJI_TYPES`; anything else raises :class:`UnsupportedEmoji` rather than guess.
The names are case-sensitive on Feishu (``THUMBSUP`` but ``ThumbsDown``), copied from the emoji list of
the reaction API documentation.
"""

from __future__ import annotations

from typing import Final

from .errors import UnsupportedEmoji

#: emoji_type → Unicode, for the types with an unambiguous standard emoji.
TO_UNICODE: Final[dict[str, str]] = {
    "THUMBSUP": "👍",
    "ThumbsDown": "👎",
    "OK": "👌",
    "HEART": "❤️",
    "HEARTBROKEN": "💔",
    "SMILE": "😊",
    "LAUGH": "😄",
    "LOL": "😂",
    "WINK": "😉",
    "BLUSH": "😳",
    "THINKING": "🤔",
    "CRY": "😢",
    "SOB": "😭",
    "ANGRY": "😠",
    "SHOCKED": "😱",
    "WOW": "😮",
    "FACEPALM": "🤦",
    "APPLAUSE": "👏",
    "CLAP": "👏",
    "MUSCLE": "💪",
    "FISTBUMP": "👊",
    "WAVE": "👋",
    "HUG": "🤗",
    "KISS": "😘",
    "SKULL": "💀",
    "SWEAT": "😓",
    "SLEEP": "😴",
    "SICK": "🤒",
    "PUKE": "🤮",
    "SHHH": "🤫",
    "ROSE": "🌹",
    "PARTY": "🎉",
    "BEER": "🍺",
    "CAKE": "🎂",
    "GIFT": "🎁",
    "Coffee": "☕",
    "Fire": "🔥",
    "Trophy": "🏆",
    "BOMB": "💣",
    "POOP": "💩",
    "Hundred": "💯",
    "CheckMark": "✅",
    "CrossMark": "❌",
    "Pin": "📌",
    "Alarm": "⏰",
    "Loudspeaker": "📢",
    "Music": "🎵",
    "HIGHFIVE": "🙌",
    "SALUTE": "🫡",
    "DONE": "✔️",
    "EYESCLOSED": "😌",
    "TONGUE": "😛",
    "SMIRK": "😏",
    "DIZZY": "😵",
    "YAWN": "🥱",
    "MONEY": "🤑",
}

#: Every emoji_type the reaction API accepts that we let the model use by name.
FEISHU_EMOJI_TYPES: Final[frozenset[str]] = frozenset(TO_UNICODE) | frozenset(
    {
        "THANKS", "FINGERHEART", "JIAYI", "SMART", "PROUD", "WITTY", "SCOWL", "ERROR", "NOSEPICK",
        "HAUGHTY", "SLAP", "SPITBLOOD", "TOASTED", "GLANCE", "DULL", "INNOCENTSMILE", "JOYFUL", "TRICK",
        "YEAH", "ENOUGH", "TEARS", "EMBARRASSED", "SMOOCH", "DROOL", "OBSESSED", "TEASE", "SHOWOFF",
        "COMFORT", "PRAISE", "STRIVE", "XBLUSH", "SILENT", "WHAT", "FROWN", "SHY", "LOOKDOWN", "CHUCKLE",
        "WAIL", "CRAZY", "WHIMPER", "BLUBBER", "WRONGED", "HUSKY", "SMUG", "HAMMER", "TERROR",
        "PETRIFIED", "SPEECHLESS", "DROWSY", "BETRAYED", "HEADSET", "EatingFood", "MeMeMe", "Sigh",
        "Typing", "Lemon", "Get", "LGTM", "OnIt", "OneSecond", "VRHeadset", "YouAreTheBest", "SHAKE",
        "UPPERLEFT", "SLIGHT", "RoarForYou", "CALF", "BEAR", "BULL", "RAINBOWPUKE", "LIPS", "CUCUMBER",
        "Drumstick", "Pepper", "CANDIEDHAWS", "BubbleTea", "Yes", "No", "OKR", "MinusOne", "AWESOMEN",
        "XmasTree", "Snowman", "XmasHat", "FIREWORKS", "REDPACKET", "FORTUNE", "LUCK", "FIRECRACKER",
        "StickyRiceBalls", "CLEAVER", "Soccer", "Basketball",
    }
)  # fmt: skip

_VARIATION = "\ufe0f"
#: Unicode → emoji_type; the first table entry wins where two types share an emoji (APPLAUSE over CLAP).
FROM_UNICODE: Final[dict[str, str]] = {}
for _name, _char in TO_UNICODE.items():
    FROM_UNICODE.setdefault(_char.replace(_VARIATION, ""), _name)


def to_canonical(emoji_type: str) -> str:
    """The canonical emoji of a Feishu reaction: Unicode when known, else Feishu's own name."""
    return TO_UNICODE.get(emoji_type, emoji_type)


def to_feishu(emoji: str) -> str:
    """The ``emoji_type`` for an outbound reaction given as Unicode or as a Feishu name."""
    if emoji in FEISHU_EMOJI_TYPES:
        return emoji
    found = FROM_UNICODE.get(emoji.strip().replace(_VARIATION, ""))
    if found is None:
        raise UnsupportedEmoji("this emoji has no Feishu reaction type; use a common emoji or a Feishu name")
    return found
