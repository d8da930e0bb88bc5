"""Audio for speech-to-text calls: bytes from the JetStream object store by content key.

The media workers store the audio they converted (16 kHz mono WAV) and name it in the request; the
size is checked on the object's metadata before any chunk is read. Audio is not cached: each key is
transcribed once (the workers cache transcripts by content), and a retry within the call reuses the
bytes already read.
"""

from __future__ import annotations

from typing import Final

import nats
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError, ObjectNotFoundError

from larkbot.canonical.names import OBJECT_STORE_BLOBS

from ..errors import AudioUnavailable, call_failed

#: Larger than any audio the workers send (30 min of 16 kHz mono WAV is ~58 MB).
MAX_AUDIO_BYTES: Final = 64 * 1024 * 1024


class ObjectStoreAudio:
    def __init__(self, js: JetStreamContext, *, bucket: str = OBJECT_STORE_BLOBS) -> None:
        self._js = js
        self._bucket = bucket

    async def read(self, key: str) -> bytes:
        try:
            store = await self._js.object_store(self._bucket)
            info = await store.get_info(key)
            if (info.size or 0) > MAX_AUDIO_BYTES:
                raise AudioUnavailable(f"audio {key} has {info.size} bytes; the limit is {MAX_AUDIO_BYTES}")
            result = await store.get(key)
        except (ObjectNotFoundError, NotFoundError):
            raise AudioUnavailable(f"audio {key} is not in the {self._bucket} store") from None
        except (nats.errors.Error, TimeoutError) as exc:
            # The store may answer on the next attempt: the caller's retry schedule applies.
            raise call_failed("transient", f"audio {key} could not be read: {type(exc).__name__}") from None
        return bytes(result.data or b"")
