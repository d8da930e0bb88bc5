"""The fake LLM provider (tests, benchmarks, the local playground): ``larkbot fake-llm``."""

from .script import Action, Drop, Fail, FakeCall, Reply, Script, Sequence, echo
from .server import FakeProvider, blob_key_of, load_script, main, serve_fake

__all__ = [
    "Action",
    "Drop",
    "Fail",
    "FakeCall",
    "FakeProvider",
    "Reply",
    "Script",
    "Sequence",
    "blob_key_of",
    "echo",
    "load_script",
    "main",
    "serve_fake",
]
