"""Markdown → Telegram HTML: edge cases render to HTML that Telegram's parser (the fake's) accepts,
with the visible text and entities intended."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from larkbot.ingress_telegram.core import to_telegram_html
from larkbot.ingress_telegram.fake import parse_html


def one(markdown: str) -> str:
    (html,) = to_telegram_html(markdown)
    return html


@pytest.mark.parametrize(
    ("markdown", "html"),
    [
        ("# Title", "<b>Title</b>"),
        ("### Sub ###", "<b>Sub</b>"),
        ("**bold** and __also__", "<b>bold</b> and <b>also</b>"),
        ("*it* _it_", "<i>it</i> <i>it</i>"),
        ("***both***", "<b><i>both</i></b>"),
        ("~~gone~~ ||secret||", "<s>gone</s> <tg-spoiler>secret</tg-spoiler>"),
        ("`a < b && c`", "<code>a &lt; b &amp;&amp; c</code>"),
        ("``code with ` tick``", "<code>code with ` tick</code>"),
        (
            "```python\nif a<b:\n    pass\n```",
            '<pre><code class="language-python">if a&lt;b:\n    pass</code></pre>',
        ),
        ("```\nno lang\n```", "<pre><code>no lang</code></pre>"),
        ("```\nunclosed fence", "<pre><code>unclosed fence</code></pre>"),
        ("- one\n* two\n+ three", "• one\n• two\n• three"),
        ("1. first\n2) second", "1. first\n2) second"),
        ("a\n  - nested", "a\n  • nested"),
        ("> quoted **bold**\n> more", "<blockquote>quoted <b>bold</b>\nmore</blockquote>"),
        ("---", "———"),
        ("[site](https://example.com/a?b=1&c=2)", '<a href="https://example.com/a?b=1&amp;c=2">site</a>'),
        ('[q](https://x.io/"><b>)', '<a href="https://x.io/&quot;&gt;&lt;b&gt;">q</a>'),
        ("[bad](javascript:alert(1))", "[bad](javascript:alert(1))"),
        ('<mention uid="42">@bob</mention> hi', '<a href="tg://user?id=42">@bob</a> hi'),
        ("<b>not a tag</b> & <script>", "&lt;b&gt;not a tag&lt;/b&gt; &amp; &lt;script&gt;"),
        ("**unclosed bold", "**unclosed bold"),
        ("*unclosed italic and **bold**", "*unclosed italic and <b>bold</b>"),
        ("snake_case_name and 2*3*4", "snake_case_name and 2*3*4"),
        ("\\*literal\\* \\_x\\_", "*literal* _x_"),
        ("**bold *nested italic* bold**", "<b>bold <i>nested italic</i> bold</b>"),
        ("| a | b |\n|---|---|\n| 1 | 2 |", "| a | b |\n|---|---|\n| 1 | 2 |"),
        ("👍 **émoji** 𝕏", "👍 <b>émoji</b> 𝕏"),
        ("\n\n  padded  \n\n", "padded"),
    ],
)
def test_rendering(markdown: str, html: str) -> None:
    assert one(markdown) == html
    parse_html(html)  # Telegram accepts it


def test_whitespace_only_gives_no_message() -> None:
    assert to_telegram_html("  \n\n ") == []


def test_long_text_splits_at_paragraphs_within_the_limit() -> None:
    paragraph = "word " * 150  # 750 characters
    chunks = to_telegram_html("\n\n".join([paragraph.strip()] * 12))
    assert len(chunks) == 3
    for chunk in chunks:
        text, _ = parse_html(chunk)
        assert len(text.encode("utf-16-le")) // 2 <= 4096
        assert text == text.strip()


def test_split_inside_formatting_reopens_it() -> None:
    chunks = to_telegram_html("**" + "ab " * 10 + "end**", limit=12)
    assert len(chunks) > 1
    for chunk in chunks:
        text, entities = parse_html(chunk)
        assert entities == [{"offset": 0, "length": len(text), "type": "bold"}]


def test_split_counts_utf16_units() -> None:
    chunks = to_telegram_html("😀" * 10, limit=6)
    assert chunks == ["😀😀😀"] * 3 + ["😀"]


def test_long_code_block_splits_into_balanced_blocks() -> None:
    code = "\n".join(f"line {i}" for i in range(2000))
    chunks = to_telegram_html(f"```\n{code}\n```")
    assert len(chunks) >= 2
    rebuilt = "\n".join(parse_html(c)[0] for c in chunks)
    assert rebuilt == code
    assert all(c.startswith("<pre><code>") and c.endswith("</code></pre>") for c in chunks)


_MARKDOWNISH = st.text(alphabet=st.sampled_from("ab *_~|`[]()<>&#>-\n\\😀"), max_size=80)


@settings(max_examples=400, deadline=None)
@given(_MARKDOWNISH, st.integers(min_value=4, max_value=60))
def test_any_input_renders_valid_html_within_the_limit(markdown: str, limit: int) -> None:
    for chunk in to_telegram_html(markdown, limit=limit):
        text, _ = parse_html(chunk)
        assert text.strip()
        assert len(text.encode("utf-16-le")) // 2 <= limit
