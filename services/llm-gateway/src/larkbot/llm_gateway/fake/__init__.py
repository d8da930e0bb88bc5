"""The fake LLM provider (tests, benchmarks, the local playground): ``larkbot fake-llm``."""

from .script import Action, ContextOverflow, Drop, Fail, FakeCall, Reply, Script, Sequence, echo
from .server import FakeProvider, blob_key_of, estimate_tokens, load_script, main, serve_fake
from .speech import TranscriptionCall, TranscriptionScript, fake_transcript, wav_seconds

__all__ = [
    "Action",
    "ContextOverflow",
    "Drop",
    "Fail",
    "FakeCall",
    "FakeProvider",
    "Reply",
    "Script",
    "Sequence",
    "TranscriptionCall",
    "TranscriptionScript",
    "blob_key_of",
    "echo",
    "estimate_tokens",
    "fake_transcript",
    "load_script",
    "main",
    "serve_fake",
    "wav_seconds",
]
