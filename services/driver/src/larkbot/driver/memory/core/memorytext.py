"""Search terms of memories, computed in Python so that one index works on both databases.

The store keeps each memory's terms as one space-separated string; SQLite indexes it with FTS5's
``unicode61`` tokenizer (``remove_diacritics 0``) and PostgreSQL with ``to_tsvector('simple', …)``. Both
only split on the spaces put here and lowercase what is already lowercase, so the two dialects see the
same terms.

- Text is NFKC-normalized and case-folded (``Coffee`` and ``ｃｏｆｆｅｅ`` both become ``coffee``; case
  folding also maps ``ß`` to ``ss``). Diacritics stay (``café`` is not ``cafe``): neither database strips
  them in the configuration used, and removing them is wrong for many languages.
- A *word* is a run of letters and digits outside the CJK scripts, with the combining marks that follow
  them; everything else separates words. Words longer than :data:`MAX_TERM_CHARS` are cut (PostgreSQL
  refuses words over 2 KB).
- A run of Han, Hiragana, Katakana or Hangul characters has no spaces to split on. It is indexed as its
  overlapping character **bigrams and** its single characters: ``我喜欢喝咖啡`` → ``我喜 喜欢 欢喝 喝咖 咖啡``
  plus ``我 喜 欢 喝 咖 啡``. In a query, a run of two or more characters becomes its bigrams only, a run of
  one character its unigram. So a two-character word (``咖啡``, ``寿司``) is one precise bigram, a longer
  phrase matches documents sharing most of its bigrams, and a one-character name or word (``明``, ``猫``)
  still matches wherever the character occurs, which bigrams alone would miss for characters at a run's
  end. The price is an index about twice as large for CJK text; ranking (bm25, ts_rank) keeps frequent
  single characters from dominating.

A query is the OR of its terms (at most :data:`MAX_QUERY_TERMS`, first occurrences kept), each quoted for
the database's query syntax; no character of the user's text is ever read as query syntax.

On SQLite the FTS5 row of a memory also carries *visibility keys* (:func:`memory_keys`): opaque tokens for
where it may be used and whose it is, none while it is disabled. A search ANDs the terms with the keys the
current chat admits (:func:`visibility_keys`), so FTS5 ranks only memories the chat may see instead of every
memory sharing a common word (at 100,000 memories, 3-4 times faster for queries with common words). The
keys are a filter in front of the exact check, never instead of it: the store still applies
``Visibility.admits`` to what it loads.
"""

from __future__ import annotations

import hashlib
import unicodedata
from functools import lru_cache

from .memory import Visibility

#: Terms longer than this are cut, in documents and queries alike.
MAX_TERM_CHARS = 64
#: A query keeps its first this many distinct terms.
MAX_QUERY_TERMS = 32
#: Only the first this many characters of a query are read.
MAX_QUERY_CHARS = 1_000

_CJK_RANGES: tuple[tuple[int, int], ...] = (
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x2E80, 0x2FDF),  # CJK radicals, Kangxi radicals
    (0x3005, 0x3007),  # 々 〆 〇
    (0x3021, 0x3029),  # Hangzhou numerals
    (0x3031, 0x3035),  # kana repeat marks
    (0x303B, 0x303C),  # 〻 〼
    (0x3040, 0x30FF),  # Hiragana, Katakana (with ー)
    (0x3130, 0x318F),  # Hangul compatibility Jamo
    (0x31F0, 0x31FF),  # Katakana phonetic extensions
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xA960, 0xA97F),  # Hangul Jamo extended A
    (0xAC00, 0xD7FF),  # Hangul syllables, Jamo extended B
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0x20000, 0x3FFFF),  # CJK extensions B and later
)

_WORD, _CJK, _OTHER, _MARK = 0, 1, 2, 3


@lru_cache(maxsize=1 << 16)
def _kind(ch: str) -> int:
    code = ord(ch)
    for low, high in _CJK_RANGES:
        if low <= code <= high:
            return _CJK
    category = unicodedata.category(ch)[0]
    if category in "LN":
        return _WORD
    return _MARK if category == "M" else _OTHER


def _runs(text: str) -> list[tuple[int, str]]:
    """Maximal runs of word or CJK characters, in order. A combining mark continues a word and is a
    separator anywhere else."""
    runs: list[tuple[int, str]] = []
    kind, start = _OTHER, 0
    for i, ch in enumerate(text):
        k = _kind(ch)
        if k == _MARK:
            k = _WORD if kind == _WORD else _OTHER
        if k != kind:
            if kind != _OTHER:
                runs.append((kind, text[start:i]))
            kind, start = k, i
    if kind != _OTHER:
        runs.append((kind, text[start:]))
    return runs


def normalize(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def document_terms(text: str) -> list[str]:
    """Every term of a memory's text, in order, repeats kept (they count in ranking)."""
    terms: list[str] = []
    for kind, run in _runs(normalize(text)):
        if kind == _WORD:
            terms.append(run[:MAX_TERM_CHARS])
            continue
        terms.extend(run[i : i + 2] for i in range(len(run) - 1))
        terms.extend(run)
    return terms


def query_terms(text: str) -> list[str]:
    """The distinct terms of a query, first occurrences first, at most :data:`MAX_QUERY_TERMS`."""
    seen: dict[str, None] = {}
    for kind, run in _runs(normalize(text[:MAX_QUERY_CHARS])):
        if kind == _WORD:
            found = [run[:MAX_TERM_CHARS]]
        elif len(run) == 1:
            found = [run]
        else:
            found = [run[i : i + 2] for i in range(len(run) - 1)]
        for term in found:
            seen.setdefault(term, None)
            if len(seen) == MAX_QUERY_TERMS:
                return list(seen)
    return list(seen)


def indexed_text(text: str) -> str:
    """What the store indexes for ``text``: its terms joined by spaces."""
    return " ".join(document_terms(text))


def fts5_query(terms: list[str]) -> str:
    """An FTS5 expression: each term a quoted string, OR-ed. Empty for no terms."""
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


def tsquery(terms: list[str]) -> str:
    """A PostgreSQL ``to_tsquery('simple', …)`` expression: each term a quoted lexeme, OR-ed."""
    return " | ".join("'" + term.replace("\\", "\\\\").replace("'", "''") + "'" for term in terms)


def _key(*parts: str) -> str:
    # One alphanumeric token whatever the ids contain (unicode61 would split on "_" or "-").
    return "k" + hashlib.blake2b("\x1f".join(parts).encode(), digest_size=8).hexdigest()


def memory_keys(*, platform: str, person_id: str, chat_id: str, scope: str, enabled: bool) -> str:
    """The visibility keys of a memory's FTS row: where it may be used, and whose it is."""
    if not enabled:
        return ""
    if scope == "group":
        where = _key(platform, "group", chat_id)
    elif scope == "private":
        where = _key(platform, "private", person_id)
    else:
        where = _key(platform, "global")
    return f"{where} {_key(platform, 'person', person_id)}"


def visibility_keys(visibility: Visibility, person_id: str | None) -> str:
    """The FTS5 condition on the keys column: what the chat (and the person asked about) admits."""
    v = visibility
    admitted = [_key(v.platform, "group", v.chat_id)]
    if v.direct_with is not None:
        admitted.append(_key(v.platform, "private", v.direct_with))
    if v.global_allowed:
        admitted.append(_key(v.platform, "global"))
    condition = "keys : (" + " OR ".join(admitted) + ")"
    if person_id is not None:
        condition += f" AND keys : {_key(v.platform, 'person', person_id)}"
    return condition
