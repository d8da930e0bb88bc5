"""What resident chats share instead of copying: senders by value, and the fields sets of the decoded
models their nodes keep — without changing a model's value, equality or wire form; and what they keep
in a compact form: a plain text as its text, a reaction as a note, the XML as UTF-8 where it is smaller."""

from __future__ import annotations

from larkbot.canonical.codec import encode
from larkbot.canonical.content import Bold, Content, Mention, Text
from larkbot.canonical.names import Platform
from larkbot.pipeline.adapters.writes import decode_event
from larkbot.pipeline.core import MessageNode, Projection, RenderParams, SystemNode
from larkbot.pipeline.core.model import ReactionNote, body_of, content_of
from larkbot.pipeline.core.segments import kept_chars, kept_xml, stored
from larkbot.pipeline.core.shared import share_fields_sets
from larkbot.testkit.pipeline import synthetic as s


def _decoded(*events: object) -> list[object]:
    out = []
    for event in events:
        data = encode(event)  # type: ignore[arg-type]
        out.append(decode_event(data.decode() if isinstance(data, bytes) else data))
    return out


def test_nodes_share_their_sender_and_the_fields_sets_of_what_they_keep() -> None:
    alice = s.person("ou_alice", "Alice")
    first, second = _decoded(
        s.message("om_1", "hello", sender=alice), s.message("om_2", "again", sender=alice, at=s.BASE_SEC + 1)
    )
    assert first.sender is not second.sender  # type: ignore[attr-defined]
    projection = Projection(RenderParams(platform=Platform.FEISHU, chat_id="oc_chat"))
    projection.apply(first, 1)  # type: ignore[arg-type]
    projection.apply(second, 2)  # type: ignore[arg-type]
    a, b = (node for node in projection.ic.nodes if isinstance(node, MessageNode))
    assert a.sender is b.sender
    assert a.content.__pydantic_fields_set__ is b.content.__pydantic_fields_set__
    assert a.content.nodes[0].__pydantic_fields_set__ is b.content.nodes[0].__pydantic_fields_set__
    assert a.content == Content.from_text("hello")
    # A copy with an update gets a set of its own; the shared one is untouched.
    shared = set(a.content.__pydantic_fields_set__)
    copied = a.content.model_copy(update={"nodes": (Text(text="changed"),)})
    assert copied.__pydantic_fields_set__ is not a.content.__pydantic_fields_set__
    assert a.content.__pydantic_fields_set__ == shared


def test_sharing_changes_no_value_and_no_wire_form() -> None:
    (event,) = _decoded(s.message("om_1", "hello <world>", sender=s.person("ou_bob", "Bob")))
    before = encode(event)  # type: ignore[arg-type]
    twin = event.model_copy(deep=True)  # type: ignore[attr-defined]
    share_fields_sets(event)  # type: ignore[arg-type]
    share_fields_sets(twin)
    assert event.content.__pydantic_fields_set__ is twin.content.__pydantic_fields_set__  # type: ignore[attr-defined]
    assert encode(event) == before  # type: ignore[arg-type]
    assert event == twin


def test_a_plain_text_is_kept_as_its_text_and_every_content_comes_back_equal() -> None:
    plain, empty = Content.from_text("hello <world>"), Content()
    rich = (
        Content(nodes=(Text(text=""),)),
        Content(nodes=(Text(text="a"), Text(text="b"))),
        Content(nodes=(Bold(children=(Text(text="x"),)),)),
        Content(nodes=(Mention(user_id="ou_a", text="@A"),)),
    )
    assert body_of(plain) == "hello <world>"
    assert body_of(empty) == ""
    for content in (plain, empty, *rich):
        assert content_of(body_of(content)) == content
    assert all(body_of(content) is content for content in rich)
    projection = Projection(RenderParams(platform=Platform.FEISHU, chat_id="oc_chat"))
    projection.apply(s.message("om_1", "hello <world>"), 1)
    (node,) = projection.ic.nodes
    assert isinstance(node, MessageNode)
    assert node.body == "hello <world>"
    assert node.content == plain
    assert projection.segments[0].xml.endswith(">hello &lt;world&gt;</message>")


def test_a_reaction_keeps_a_note_naming_the_shared_sender_and_message_id() -> None:
    alice, bob = s.person("ou_alice", "Alice"), s.person("ou_bob", "Bob")
    message, reaction = _decoded(
        s.message("om_1", "hi", sender=bob), s.reaction("om_1", "👍", actor=alice, at=s.BASE_SEC + 2)
    )
    later = _decoded(s.message("om_2", "yo", sender=alice, at=s.BASE_SEC + 3))[0]
    projection = Projection(RenderParams(platform=Platform.FEISHU, chat_id="oc_chat"))
    for seq, event in enumerate((message, reaction, later), start=1):
        projection.apply(event, seq)  # type: ignore[arg-type]
    first, note, last = projection.ic.nodes
    assert isinstance(first, MessageNode)
    assert isinstance(last, MessageNode)
    assert isinstance(note, SystemNode)
    assert isinstance(note.payload, ReactionNote)
    assert note.payload == ReactionNote("om_1", alice, "👍", False)
    assert note.payload.message_id is first.message_id
    assert note.payload.actor is last.sender


def test_the_xml_is_kept_in_its_smaller_form_and_comes_back_as_rendered() -> None:
    cjk = '<message id="m1">' + "你好" * 40 + "</message>"
    for xml in ("<message/>", cjk, '<event emoji="👍"/>', "\ud800 kept as it is"):
        kept = stored(xml)
        assert kept_xml(kept) == xml
        assert kept_chars(kept) == len(xml)
    assert isinstance(stored('<event emoji="👍"/>'), bytes)  # 4 bytes a character as a str
    assert isinstance(stored(cjk), str)  # 2 bytes a character as a str, 3 in UTF-8
    projection = Projection(RenderParams(platform=Platform.FEISHU, chat_id="oc_chat"))
    ops = projection.apply(s.message("om_1", "👍 " + "你好" * 40), 1)
    ops += projection.apply(s.reaction("om_1", "🎉"), 2)
    published = [segment for op in ops for segment in op.segments]  # type: ignore[union-attr]
    assert list(projection.segments) == published
    assert projection.xml() == "\n".join(segment.xml for segment in published)
    assert projection.xml_chars == sum(len(segment.xml) for segment in published)
