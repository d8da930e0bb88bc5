"""`larkbot replay`: raw platform payloads through the ingress adapters and the pipeline, offline."""

from __future__ import annotations

import io
import itertools
import json
from pathlib import Path

import pytest

from larkbot.cli.main import main
from larkbot.cli.replay import replay
from larkbot.runtime.config import LarkbotConfig

ROOT = Path(__file__).resolve().parents[1]
FEISHU = ROOT / "services/ingress-feishu/src/larkbot/ingress_feishu/fake/payloads"
TELEGRAM = ROOT / "services/ingress-telegram/tests/fixtures/updates"
FEISHU_BOT = "ou_b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0"
FEISHU_GROUP = "oc_5ce6d572455d361153b7xx51da133945"


def _jsonl(path: Path, names: list[str], directory: Path, start_ms: int = 1_767_225_600_000) -> Path:
    lines = []
    for n, name in enumerate(names):
        payload = json.loads((directory / f"{name}.json").read_text(encoding="utf-8"))
        lines.append(json.dumps({"received_at_ms": start_ms + n * 1000, "payload": payload}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


FEISHU_LINES = [
    "message_text",
    "message_private",  # a private chat: dropped, never projected
    "message_text_reply",
    "reaction_created",
    "message_post",
    "message_recalled",
    "message_text",  # a re-push of the first event: applied once
]


def _run(**kwargs: object) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = replay(out=out, err=err, config=LarkbotConfig(), utc_offset_min=480, **kwargs)  # type: ignore[arg-type]
    return status, out.getvalue(), err.getvalue()


def test_feishu_replay_renders_group_chats_only(tmp_path: Path) -> None:
    raw = _jsonl(tmp_path / "feishu.jsonl", FEISHU_LINES, FEISHU)
    with raw.open(encoding="utf-8") as stream:
        status, out, err = _run(platform="feishu", stream=stream, bot_id=FEISHU_BOT, chats=[], every=False)
    assert status == 0, err
    headers = [line for line in out.splitlines() if line.startswith("<!-- chat: ")]
    assert headers == [f"<!-- chat: {FEISHU_GROUP} -->"]
    assert out.count("<message ") >= 3  # text, reply, post (the recall marks one deleted in place)
    assert 'deleted="true"' in out
    assert "<in-reply-to " in out
    assert '<event type="reaction"' in out
    body = out.split("\n", 1)[1]
    assert body.count("<message ") == len(
        {line for line in body.splitlines() if line.startswith("<message ")}
    )


def test_every_mode_prints_one_json_line_per_projected_input_line(tmp_path: Path) -> None:
    raw = _jsonl(tmp_path / "feishu.jsonl", FEISHU_LINES, FEISHU)
    with raw.open(encoding="utf-8") as stream:
        status, out, _ = _run(platform="feishu", stream=stream, bot_id=FEISHU_BOT, chats=[], every=True)
    assert status == 0
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["line"] for r in records] == [
        0,
        2,
        3,
        4,
        5,
    ]  # the private chat (1) and the re-push (6) add nothing
    assert {r["chat"] for r in records} == {FEISHU_GROUP}
    for before, after in itertools.pairwise(records):
        assert after["rc"] != before["rc"]
    assert records[0]["rc"] in records[1]["rc"]  # an append keeps what was rendered before


def test_telegram_replay_through_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    names = [
        "message_text_plain",
        "edited_message",
        "message_reaction",
        "message_private",
        "service_new_chat_title",
    ]
    raw = _jsonl(tmp_path / "telegram.jsonl", names, TELEGRAM)
    with raw.open("a", encoding="utf-8") as f:
        f.write(json.dumps({"received_at_ms": 1, "payload": {"update_id": 1, "poll": {"id": "x"}}}) + "\n")
    status = main(["replay", "--platform", "telegram", "--input", str(raw), "--bot-id", "999999999"])
    captured = capsys.readouterr()
    assert status == 0
    assert "<!-- chat: -1001234567890 -->" in captured.out
    assert "<!-- chat: 111111111 -->" not in captured.out  # private chats are not groups
    assert "edited=" in captured.out
    assert "line 5: refused" in captured.err  # an unsupported update is reported, the replay goes on


def test_chat_filter_and_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = _jsonl(tmp_path / "feishu.jsonl", FEISHU_LINES, FEISHU)
    assert (
        main(
            ["replay", "--platform", "feishu", "--input", str(raw), "--bot-id", FEISHU_BOT, "--chat", "oc_x"]
        )
        == 0
    )
    assert capsys.readouterr().out == ""
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"received_at_ms": "soon", "payload": {}}\n', encoding="utf-8")
    assert main(["replay", "--platform", "feishu", "--input", str(broken), "--bot-id", FEISHU_BOT]) == 2
    assert "line 0: expected received_at_ms" in capsys.readouterr().err


def test_the_whole_corpus_of_both_platforms_replays_refusing_only_what_means_nothing_to_a_group(
    tmp_path: Path,
) -> None:
    """Every shipped real-shaped payload — every kind of Telegram's Message object and of Feishu's
    message and event types — through the replay: refused are only payloads built to be refused
    (malformed, a kind newer than the adapter) and Feishu's read receipts; what a member sees renders."""
    telegram_names = sorted(p.stem for p in TELEGRAM.glob("*.json"))
    feishu_names = sorted(p.stem for p in FEISHU.glob("*.json"))
    out: dict[str, str] = {}
    for platform, names, directory, bot in (
        ("telegram", telegram_names, TELEGRAM, "7000000001"),
        ("feishu", feishu_names, FEISHU, FEISHU_BOT),
    ):
        raw = _jsonl(tmp_path / f"{platform}.jsonl", names, directory)
        with raw.open(encoding="utf-8") as stream:
            status, rendered, err = _run(platform=platform, stream=stream, bot_id=bot, chats=[], every=False)
        assert status == 0
        refused = [
            names[int(line.split()[1].rstrip(":"))] for line in err.splitlines() if ": refused:" in line
        ]
        expected = ("malformed_", "unsupported_") if platform == "telegram" else ("message_read",)
        assert refused
        assert all(name.startswith(expected) for name in refused), refused
        out[platform] = rendered
    telegram, feishu = out["telegram"], out["feishu"]
    for snippet in (
        'topic="Ideas"',  # a forum topic, named from the creation message the update embeds
        '<event type="topic_created"',
        '<event type="migrated_to_supergroup"',
        '<event type="video_chat_ended"',
        'forwarded_from="News Channel (Editor)"',
        "[poll: Where do we eat? — Noodles / Rice / Skip lunch]",
        "[dice 🎲 4]",
        '<in-reply-to id="480" sender="Carol">the venue map</in-reply-to>',  # embedded: not in the window
        # What was pinned, as the context held it: the corpus replays in file order, so the edit of 501
        # comes first and stands for the message (its later original repeats the id and changes nothing).
        'message_id="501" sender="Alice Liddell">hello everyone (edited) 🎉 now bold</event>',
        '<message id="501" sender="Alice Liddell" uid="111111111" t="01-01 08:00:00" edited="01-01 08:02:00"',
    ):
        assert snippet in telegram, snippet
    # The bot's own join arrives as my_chat_member and as a service message listing it: one bot_added.
    assert telegram.count('<event type="bot_added"') == 1
    for snippet in (
        '<event type="system"',
        "Alice Wang invited Bob Li, Carol Zhang to the group.",
        '<event type="settings_changed"',
        'add_member_permission="only_owner"',
        "[card: Deploy finished]",
        "[merged and forwarded messages]",
    ):
        assert snippet in feishu, snippet
