"""The exception tree of the media workers: every way a job can end without output.

Whether the pipeline may resubmit a job is the failure's TYPE — a :class:`RetryableError` or a
:class:`PermanentError` — never a flag; :meth:`MediaFailure.as_error` writes it on the wire as
``MediaError.retryable`` (the contract)::

    LarkbotError
    └── MediaFailure                  a job that ends in a typed failure result (``MediaError``, ``code``)
        ├── TooLarge                  ``too_large``: over 20 MB (or the chat's limit), or more pixels than
        │   │                         we decode                                                 (permanent)
        │   └── TooLong               ``too_long``: audio longer than the chat's limit          (permanent)
        ├── Unsupported               ``unsupported``: a format or transform this build cannot do (permanent)
        ├── Unreadable                ``unreadable``: bytes no decoder accepts                  (permanent)
        ├── DownloadFailed            ``download``: the ingress did not fetch the file
        │   ├── DownloadUnavailable   no or a bad answer, or the platform may answer later      (retryable)
        │   └── DownloadRefused       the platform refused the file for good                    (permanent)
        ├── VisionFailed              ``vision``: the vision model did not describe it
        │   ├── VisionUnavailable     no or a bad answer, a transient or deadline error         (retryable)
        │   └── VisionRefused         the model refused, answered without text, or cannot      (permanent)
        ├── TranscriptionFailed       ``transcription``: the speech-to-text model did not transcribe it
        │   ├── TranscriptionUnavailable   no or a bad answer, a transient or deadline error    (retryable)
        │   └── TranscriptionRefused  the endpoint refused the audio, or cannot                 (permanent)
        └── StoreFailed               ``store``: the object store or the alt-text bucket did not answer
                                                                                                (retryable)

(each leaf also derives from :class:`RetryableError` or :class:`PermanentError` of
:mod:`larkbot.canonical.errors`, as marked). Anything else that escapes a job is answered as ``internal``
(retryable) and logged with its traceback.

The worker maps a :class:`MediaFailure` to ``MediaResult(ok=False, error=…)`` and acknowledges the job in
exactly one place (``adapters.worker``): the pipeline decides whether to retry, from ``retryable``.
"""

from __future__ import annotations

from larkbot.canonical.errors import LarkbotError, PermanentError, RetryableError
from larkbot.canonical.media import MediaError


class MediaFailure(LarkbotError):
    """A job's typed failure; every one raised is also a :class:`RetryableError` or a
    :class:`PermanentError`."""

    code = "internal"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def as_error(self) -> MediaError:
        return MediaError(code=self.code, message=self.message, retryable=isinstance(self, RetryableError))


class TooLarge(MediaFailure, PermanentError):
    code = "too_large"


class TooLong(TooLarge):
    code = "too_long"


class Unsupported(MediaFailure, PermanentError):
    code = "unsupported"


class Unreadable(MediaFailure, PermanentError):
    code = "unreadable"


class DownloadFailed(MediaFailure):
    code = "download"


class DownloadUnavailable(DownloadFailed, RetryableError):
    pass


class DownloadRefused(DownloadFailed, PermanentError):
    pass


class VisionFailed(MediaFailure):
    code = "vision"


class VisionUnavailable(VisionFailed, RetryableError):
    pass


class VisionRefused(VisionFailed, PermanentError):
    pass


class TranscriptionFailed(MediaFailure):
    code = "transcription"


class TranscriptionUnavailable(TranscriptionFailed, RetryableError):
    pass


class TranscriptionRefused(TranscriptionFailed, PermanentError):
    pass


class StoreFailed(MediaFailure, RetryableError):
    code = "store"
