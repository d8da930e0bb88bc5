"""The exception tree of the media workers: every way a job can end without output.

::

    LarkbotError
    └── MediaFailure           a job that ends in a typed failure result (``MediaError``)
        ├── TooLarge           ``too_large``: over 20 MB, or more pixels than we decode (never retried)
        ├── Unsupported        ``unsupported``: a format or transform this build cannot do (never retried)
        ├── Unreadable         ``unreadable``: bytes no decoder accepts (never retried)
        ├── DownloadFailed     ``download``: the ingress could not fetch the file (retryable or not)
        ├── VisionFailed       ``vision``: the vision model did not describe it (retryable or not)
        └── StoreFailed        ``store``: the object store or the alt-text bucket did not answer (retryable)

Anything else that escapes a job is answered as ``internal`` (retryable) and logged with its traceback.

The worker maps a :class:`MediaFailure` to ``MediaResult(ok=False, error=…)`` and acknowledges the job in
exactly one place (``adapters.worker``): the pipeline decides whether to retry, from ``retryable``.
"""

from __future__ import annotations

from larkbot.canonical.errors import LarkbotError
from larkbot.canonical.media import MediaError


class MediaFailure(LarkbotError):
    code = "internal"
    retryable = True

    def __init__(self, message: str, *, retryable: bool | None = None) -> None:
        super().__init__(message)
        self.message = message
        if retryable is not None:
            self.retryable = retryable

    def as_error(self) -> MediaError:
        return MediaError(code=self.code, message=self.message, retryable=self.retryable)


class TooLarge(MediaFailure):
    code = "too_large"
    retryable = False


class Unsupported(MediaFailure):
    code = "unsupported"
    retryable = False


class Unreadable(MediaFailure):
    code = "unreadable"
    retryable = False


class DownloadFailed(MediaFailure):
    code = "download"


class VisionFailed(MediaFailure):
    code = "vision"


class StoreFailed(MediaFailure):
    code = "store"
