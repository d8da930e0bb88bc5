"""Markdown (what the model writes) → Telegram HTML (``parse_mode=HTML``), split to the length limit.

The text is parsed into a small tree first and serialized from it, so the output can never hold an
unbalanced or unknown tag: user text is escaped (``& < >``, and ``"`` in attributes), and a delimiter
without its closing partner stays literal text.

Mapping: headings → bold lines; ``-``/``*``/``+`` list items → ``• `` lines, numbered items kept as they
are (Telegram has no lists); fenced code → ``<pre><code class="language-x">``; ```code``` → ``<code>``;
``**b**``/``__b__`` → ``<b>``; ``*i*``/``_i_`` → ``<i>`` (not inside words, so ``snake_case`` and
``2*3*4`` stay); ``***x***`` → ``<b><i>``;
``~~s~~`` → ``<s>``; ``||x||`` → ``<tg-spoiler>``; ``[t](url)`` → ``<a href>`` (http, https, tg and
mailto only); ``>`` lines → ``<blockquote>``; ``<mention uid="ID">@name</mention>`` (the model's
vocabulary) → a ``tg://user?id=ID`` link; rules → ``———``; tables stay as text.

Splitting: Telegram refuses more than 4096 characters after entity parsing (counted here in UTF-16 code
units, the unit of its entities, which is never fewer than characters). A long message is cut on the tree
at the last paragraph break, else line break, else space, else hard, before the limit; a cut inside a
formatted span closes it in one part and reopens it in the next.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

MAX_MESSAGE_UTF16: Final = 4096

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)\s*$")
_HEADING = re.compile(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_RULE = re.compile(r"^ {0,3}([-*_])(\s*\1){2,}\s*$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(.*)$")
_NUMBERED = re.compile(r"^(\s*)(\d{1,9}[.)])\s+(.*)$")
_QUOTE = re.compile(r"^ {0,3}>\s?(.*)$")
_MENTION = re.compile(r'<mention uid="([^"<>]+)">([^<]*)</mention>')
_PUNCT: Final = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_SCHEMES: Final = ("http://", "https://", "tg://", "mailto:")
_DELIMS: Final = (
    ("***", "b i"),
    ("**", "b"),
    ("__", "b"),
    ("~~", "s"),
    ("||", "tg-spoiler"),
    ("*", "i"),
    ("_", "i"),
)


@dataclass(frozen=True, slots=True)
class T:
    text: str


@dataclass(frozen=True, slots=True)
class E:
    tag: str
    children: tuple[Node, ...]
    attrs: tuple[tuple[str, str], ...] = field(default=())


Node = T | E


# -- block level -----------------------------------------------------------------------------------------
def parse(markdown: str) -> tuple[Node, ...]:
    lines = markdown.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    out: list[Node] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if out:
            out.append(T("\n"))
        fence = _FENCE.match(line)
        if fence:
            marker, lang = fence.group(1), fence.group(2)
            body: list[str] = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith(marker[:3]):
                body.append(lines[i])
                i += 1
            i += 1  # the closing fence (or the end of the text)
            code = E("code", (T("\n".join(body)),), (("class", f"language-{lang}"),) if lang else ())
            out.append(E("pre", (code,)))
            continue
        quoted: list[str] = []
        while i < len(lines) and (m := _QUOTE.match(lines[i])):
            quoted.append(m.group(1))
            i += 1
        if quoted:
            out.append(E("blockquote", _inline("\n".join(quoted))))
            continue
        out.extend(_line(line))
        i += 1
    return _normalize(out)


def _line(line: str) -> tuple[Node, ...]:
    if m := _HEADING.match(line):
        return (E("b", _inline(m.group(1))),)
    if _RULE.match(line):
        return (T("———"),)
    if m := _BULLET.match(line):
        return (T(m.group(1) + "• "), *_inline(m.group(2)))
    if m := _NUMBERED.match(line):
        return (T(f"{m.group(1)}{m.group(2)} "), *_inline(m.group(3)))
    return _inline(line)


# -- inline level ----------------------------------------------------------------------------------------
def _inline(s: str) -> tuple[Node, ...]:
    out: list[Node] = []
    buf: list[str] = []
    i = 0

    def flush() -> None:
        if buf:
            out.append(T("".join(buf)))
            buf.clear()

    while i < len(s):
        ch = s[i]
        if ch == "\\" and i + 1 < len(s) and s[i + 1] in _PUNCT:
            buf.append(s[i + 1])
            i += 2
            continue
        found = _code_span(s, i) or _mention(s, i) or _link(s, i) or _emphasis(s, i)
        if found is None:
            buf.append(ch)
            i += 1
            continue
        node, i = found
        flush()
        out.append(node)
    flush()
    return tuple(out)


def _code_span(s: str, i: int) -> tuple[Node, int] | None:
    if s[i] != "`":
        return None
    run = len(s[i:]) - len(s[i:].lstrip("`"))
    ticks = "`" * run
    close = s.find(ticks, i + run)
    while close != -1 and close + run < len(s) and s[close + run] == "`":
        close = s.find(ticks, close + run + 1)
    if close == -1 or close == i + run:
        return None
    body = s[i + run : close]
    if len(body) > 2 and body[0] == " " and body[-1] == " ":
        body = body[1:-1]
    return E("code", (T(body),)), close + run


def _mention(s: str, i: int) -> tuple[Node, int] | None:
    if s[i] != "<":
        return None
    m = _MENTION.match(s, i)
    if m is None or not m.group(2):
        return None
    return E("a", (T(m.group(2)),), (("href", f"tg://user?id={m.group(1)}"),)), m.end()


def _link(s: str, i: int) -> tuple[Node, int] | None:
    if s[i] != "[":
        return None
    depth, j = 0, i
    while j < len(s):
        if s[j] == "[":
            depth += 1
        elif s[j] == "]":
            depth -= 1
            if depth == 0:
                break
        j += 1
    if j >= len(s) - 1 or s[j + 1] != "(":
        return None
    close = s.find(")", j + 2)
    if close == -1:
        return None
    url = s[j + 2 : close].strip()
    label = s[i + 1 : j]
    if not label or not url or " " in url or not url.lower().startswith(_SCHEMES):
        return None
    return E("a", _inline(label), (("href", url),)), close + 1


def _emphasis(s: str, i: int) -> tuple[Node, int] | None:
    for delim, tag in _DELIMS:
        if not s.startswith(delim, i):
            continue
        n = len(delim)
        start = i + n
        if start >= len(s) or s[start].isspace():
            continue
        if n == 1 and i > 0 and s[i - 1].isalnum():
            continue
        close = _closing(s, delim, start)
        if close is None:
            continue
        inner = _inline(s[start:close])
        for name in reversed(tag.split()):
            inner = (E(name, inner),)
        return inner[0], close + n
    return None


def _closing(s: str, delim: str, start: int) -> int | None:
    n = len(delim)
    j = s.find(delim, start + 1)
    while j != -1:
        after = j + n
        single_in_double = n == 1 and (s.startswith(delim, after) or s[j - 1] == delim)
        intraword = (n == 1 or delim[0] == "_") and after < len(s) and s[after].isalnum()
        if not s[j - 1].isspace() and not single_in_double and not intraword:
            return j
        j = s.find(delim, j + 1)
    return None


def _normalize(nodes: list[Node] | tuple[Node, ...]) -> tuple[Node, ...]:
    out: list[Node] = []
    for node in nodes:
        if isinstance(node, E):
            node = E(node.tag, _normalize(node.children), node.attrs)
            if not node.children:
                continue
        if isinstance(node, T) and out and isinstance(out[-1], T):
            out[-1] = T(out[-1].text + node.text)
        elif not (isinstance(node, T) and not node.text):
            out.append(node)
    return tuple(out)


# -- serialization ---------------------------------------------------------------------------------------
def escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def render(nodes: tuple[Node, ...]) -> str:
    parts: list[str] = []
    for node in nodes:
        if isinstance(node, T):
            parts.append(escape(node.text))
        else:
            attrs = "".join(f' {k}="{escape(v).replace(chr(34), "&quot;")}"' for k, v in node.attrs)
            parts.append(f"<{node.tag}{attrs}>{render(node.children)}</{node.tag}>")
    return "".join(parts)


def plain(nodes: tuple[Node, ...]) -> str:
    return "".join(n.text if isinstance(n, T) else plain(n.children) for n in nodes)


# -- splitting -------------------------------------------------------------------------------------------
def split_at(nodes: tuple[Node, ...], k: int) -> tuple[tuple[Node, ...], tuple[Node, ...]]:
    """Cut the tree after ``k`` visible characters; open elements are closed left and reopened right."""
    left: list[Node] = []
    right: list[Node] = []
    for node in nodes:
        size = len(plain((node,)))
        if k <= 0:
            right.append(node)
        elif size <= k:
            left.append(node)
        elif isinstance(node, T):
            left.append(T(node.text[:k]))
            right.append(T(node.text[k:]))
        else:
            a, b = split_at(node.children, k)
            left.append(E(node.tag, a, node.attrs))
            right.append(E(node.tag, b, node.attrs))
        k -= size
    return _normalize(_drop_empty(left)), _normalize(_drop_empty(right))


def _drop_empty(nodes: list[Node]) -> list[Node]:
    return [n for n in nodes if plain((n,))]


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _cut_point(text: str, limit: int) -> int:
    """The largest prefix (in characters) that fits, moved back to the best break before it."""
    fit, units = 0, 0
    for ch in text:
        units += 2 if ord(ch) > 0xFFFF else 1
        if units > limit:
            break
        fit += 1
    head = text[:fit]
    for sep in ("\n\n", "\n", " "):
        at = head.rfind(sep)
        if at > 0:
            return at + len(sep)
    return fit


def _strip(nodes: tuple[Node, ...]) -> tuple[Node, ...]:
    text = plain(nodes)
    lead = len(text) - len(text.lstrip())
    nodes = split_at(nodes, lead)[1] if lead else nodes
    text = plain(nodes)
    trail = len(text.rstrip())
    return split_at(nodes, trail)[0] if trail < len(text) else nodes


def to_telegram_html(markdown: str, limit: int = MAX_MESSAGE_UTF16) -> list[str]:
    """Render ``markdown`` as one or more Telegram HTML messages, each within ``limit`` UTF-16 units of
    visible text; whitespace-only parts are dropped (Telegram refuses empty messages)."""
    rest = _strip(parse(markdown))
    chunks: list[str] = []
    while rest:
        text = plain(rest)
        if _utf16(text) <= limit:
            chunks.append(render(rest))
            break
        head, rest = split_at(rest, _cut_point(text, limit))
        head, rest = _strip(head), _strip(rest)
        if head:
            chunks.append(render(head))
    return chunks
