"""The ``prompt_cache_key`` sent to a provider: a keyed hash, so no chat id ever reaches it.

The caller's key (the driver sends ``<chat key>``, ``<chat key>:probe``, ``<chat key>:compaction``) or, when
it names none, the request's ``chat_key`` is the scope; the request's purpose is mixed in too. Both go
through HMAC-SHA256 under the deployment's ``llm.prompt_cache_key_salt``:

- a plain digest would not do: Telegram chat ids are a few billion numbers, so a provider could hash them
  all and read the chat back from an unkeyed digest;
- the salt comes from the configuration, so every gateway replica of a deployment sends the same key for
  the same chat and purpose, and so does a restarted one (a provider's cache routing depends on that);
- 32 hex digits (128 bits) after ``larkbot-``: short enough for every provider's length limit, far beyond
  any collision between the chats of one deployment.
"""

from __future__ import annotations

import hashlib
import hmac

#: Separates this use of the salt from any later one.
_DOMAIN = b"larkbot prompt_cache_key v1\x00"


def prompt_cache_key(salt: bytes, purpose: str, scope: str) -> str:
    """The key for ``scope`` (the caller's key, else the chat key) and ``purpose`` under ``salt``."""
    message = _DOMAIN + purpose.encode() + b"\x00" + scope.encode()
    return "larkbot-" + hmac.new(salt, message, hashlib.sha256).hexdigest()[:32]
