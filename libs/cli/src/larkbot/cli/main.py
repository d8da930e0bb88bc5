"""``larkbot``: one command line for every service and tool.

larkbot up                      the whole local stack (embedded NATS unless NATS_URL is set)
larkbot run SERVICE             one service in the foreground (the container entrypoint)
larkbot config check FILE       validate a configuration file
larkbot bootstrap               declare streams, consumers and buckets on NATS (init job)
larkbot nats-users              the nats.conf authorization block: a NATS user per service
larkbot replay                  render raw platform payloads offline
larkbot playground / say        a local group chat with a fake Telegram and a fake model
larkbot fake-llm                the fake LLM provider on its own
larkbot bench [--only PART]     benchmark figures (progress on stderr)
larkbot memory export|forget|stats
                                per-person memories of the driver (export, forget, counts)
larkbot audit show --chat P:C   the driver's per-wake-up audit trail of a chat ([--since T] [--json])
larkbot inspector               the web inspector over the driver's audit trail (loopback:9188)
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import sys
from collections.abc import Sequence

from larkbot.canonical.errors import ConfigError
from larkbot.canonical.names import Platform, Service

from .stack import (
    DEFAULT_PLAYGROUND_PORT,
    PLAYGROUND_LLM_PORT,
    PLAYGROUND_PORT_ENV,
    PLAYGROUND_TELEGRAM_PORT,
)

#: Where each service's ``main() -> int`` lives; imported lazily so one service never loads another's
#: dependencies (lark-oapi and aiogram take seconds to import).
SERVICE_MODULES: dict[str, str] = {
    Service.INGRESS_FEISHU.value: "larkbot.ingress_feishu.app",
    Service.INGRESS_TELEGRAM.value: "larkbot.ingress_telegram.app",
    Service.PIPELINE.value: "larkbot.pipeline.app",
    Service.DRIVER.value: "larkbot.driver.app",
    Service.MEDIA.value: "larkbot.media.app",
    Service.LLM_GATEWAY.value: "larkbot.llm_gateway.app",
}


_PORT_HELP = f"${PLAYGROUND_PORT_ENV}, else {DEFAULT_PLAYGROUND_PORT}"


def _run(args: argparse.Namespace) -> int:
    module = importlib.import_module(SERVICE_MODULES[args.service])
    status: int = module.main()
    return status


def _config_check(args: argparse.Namespace) -> int:
    from larkbot.runtime.config import load_config

    try:
        config = load_config(args.file)
    except ConfigError as exc:
        print(exc.report(), file=sys.stderr)
        return 2
    chats = [key for key in config.chats if key != "default"]
    platforms = [p for p in ("feishu", "telegram") if getattr(config, p) is not None]
    print(
        f"{args.file}: ok ({len(chats)} chat(s), platforms: {', '.join(platforms) or 'none'}, "
        f"{len(config.maintainers)} maintainer(s), {len(config.llm.endpoints)} LLM endpoint(s))"
    )
    return 0


def _nats_users(_args: argparse.Namespace) -> int:
    from larkbot.runtime.permissions import users_conf

    print(users_conf(), end="")
    return 0


def _bootstrap(args: argparse.Namespace) -> int:
    from larkbot.runtime.bootstrap import BootstrapFailed, BootstrapRefused, bootstrap
    from larkbot.runtime.bus import connect
    from larkbot.runtime.config import load_config

    try:
        # The bootstrap needs only NATS: every other service's secrets are withheld.
        config = load_config(args.config, service="bootstrap")
    except ConfigError as exc:
        print(exc.report(), file=sys.stderr)
        return 2

    async def apply() -> None:
        bus = await connect(
            config.nats, "bootstrap", url=os.environ.get("NATS_URL"), give_up_after_s=args.timeout
        )
        try:
            await bootstrap(bus.js, config.jetstream)
        finally:
            await bus.close()

    try:
        asyncio.run(apply())
    except (BootstrapFailed, BootstrapRefused) as exc:
        print(f"bootstrap: {exc}", file=sys.stderr)
        return 1
    print("bootstrap: streams, consumers and buckets declared")
    return 0


def _up(args: argparse.Namespace) -> int:
    from .stack import playground_port
    from .up import up

    return up(
        config_path=args.config,
        data_dir=args.data_dir,
        services=args.service or None,
        playground=args.playground,
        playground_port=playground_port(args.playground_port),
    )


def _replay(args: argparse.Namespace) -> int:
    from .replay import main as replay_main

    return replay_main(args)


def _playground(args: argparse.Namespace) -> int:
    from .playground import main as playground_main

    return playground_main(args)


def _say(args: argparse.Namespace) -> int:
    from .say import say

    return say(args)


def _bench(args: argparse.Namespace) -> int:
    # The benchmarks are the testkit's (libs/testkit), a development dependency that `make install`
    # installs and a deployment image leaves out.
    try:
        from larkbot.testkit.bench.report import main as bench_main
    except ModuleNotFoundError as exc:
        if exc.name not in ("larkbot.testkit", "larkbot.testkit.bench", "larkbot.testkit.bench.report"):
            raise
        print("larkbot bench needs the larkbot-testkit package (make install installs it)", file=sys.stderr)
        return 2
    return bench_main(as_json=args.json, quick=args.quick, only=args.only)


def _memory(args: argparse.Namespace) -> int:
    from .memory import main as memory_main

    return memory_main(args)


def _audit(args: argparse.Namespace) -> int:
    from .audit import main as audit_main

    return audit_main(args)


def _inspector(args: argparse.Namespace) -> int:
    from .inspector import main as inspector_main

    return inspector_main(args)


def _add_inspector(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    inspector = sub.add_parser("inspector", help="the web inspector: why the bot spoke or stayed silent")
    inspector.add_argument("--host", default=None, help="default: inspector.host (127.0.0.1)")
    inspector.add_argument("--port", type=int, default=None, help="default: inspector.port (9188)")
    inspector.add_argument("--config", default=None, help="configuration file (default: $LARKBOT_CONFIG)")
    inspector.set_defaults(func=_inspector)


def _add_audit(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    audit = sub.add_parser("audit", help="print a chat's per-wake-up audit trail (driver database)")
    audit_sub = audit.add_subparsers(dest="audit_command", required=True)
    show = audit_sub.add_parser("show", help="one block per wake-up: path, probe, steps, tokens, outcome")
    show.add_argument("--chat", required=True, help="<platform>:<chat_id>")
    show.add_argument("--since", default=None, help="an ISO time, or a duration back from now: 2h, 30m, 7d")
    show.add_argument("--json", action="store_true", help="print the records as JSON")
    show.add_argument("--config", default=None, help="configuration file (default: $LARKBOT_CONFIG)")
    show.set_defaults(func=_audit)


def _add_memory(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    memory = sub.add_parser("memory", help="export, forget or count per-person memories (driver database)")
    memory_sub = memory.add_subparsers(dest="memory_command", required=True)
    config_help = "configuration file (default: $LARKBOT_CONFIG)"
    for name, help_text in (
        ("export", "print the person's memories with their patches as JSON"),
        ("forget", "delete every memory of the person (needs --yes); the forget is logged"),
    ):
        cmd = memory_sub.add_parser(name, help=help_text)
        cmd.add_argument("--person", required=True, help="the person's platform user id (never a name)")
        cmd.add_argument("--platform", choices=[p.value for p in Platform], help="only this platform")
        cmd.add_argument("--config", default=None, help=config_help)
        if name == "forget":
            cmd.add_argument("--yes", action="store_true", help="really delete (there is no undo)")
        cmd.set_defaults(func=_memory)
    stats = memory_sub.add_parser("stats", help="print memory counts as JSON")
    stats.add_argument("--config", default=None, help=config_help)
    stats.set_defaults(func=_memory)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="larkbot", description="LarkBot: an AI member of group chats.")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run one service in the foreground")
    run.add_argument("service", choices=sorted(SERVICE_MODULES))
    run.set_defaults(func=_run)

    up = sub.add_parser("up", help="run the whole local stack")
    up.add_argument("--config", default=None, help="configuration file (default: $LARKBOT_CONFIG)")
    up.add_argument(
        "--data-dir",
        default=None,
        help="where NATS, SQLite and the logs live (default: data_dir of the file)",
    )
    up.add_argument("--service", action="append", choices=sorted(SERVICE_MODULES), help="only these services")
    up.add_argument(
        "--playground", action="store_true", help="also run the playground (fake Telegram + model)"
    )
    up.add_argument(
        "--playground-port",
        type=int,
        default=None,
        help=f"the playground's control port (default: {_PORT_HELP})",
    )
    up.set_defaults(func=_up)

    config = sub.add_parser("config", help="configuration tools")
    config_sub = config.add_subparsers(dest="config_command", required=True)
    check = config_sub.add_parser("check", help="validate a configuration file")
    check.add_argument("file")
    check.set_defaults(func=_config_check)

    boot = sub.add_parser("bootstrap", help="declare streams, consumers and buckets (idempotent)")
    boot.add_argument("--config", default=None)
    boot.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for NATS")
    boot.set_defaults(func=_bootstrap)
    users = sub.add_parser(
        "nats-users",
        help="print the nats.conf authorization block: one NATS user per service, least privilege",
    )
    users.set_defaults(func=_nats_users)
    replay = sub.add_parser("replay", help="render raw platform payloads offline (same code as the services)")
    replay.add_argument("--platform", required=True, choices=["feishu", "telegram"])
    replay.add_argument("--input", required=True, help="JSON lines: {received_at_ms, payload}")
    replay.add_argument("--bot-id", required=True, help="the bot's own user id (Feishu open_id, Telegram id)")
    replay.add_argument("--chat", action="append", help="only these chats (default: every group chat)")
    replay.add_argument("--config", default=None, help="configuration for per-chat render settings")
    replay.add_argument(
        "--utc-offset-min", type=int, default=None, help="deployment offset (default: 0 / config)"
    )
    replay.add_argument("--every", action="store_true", help="one JSON line after every input line")
    replay.set_defaults(func=_replay)

    play = sub.add_parser("playground", help="fake Telegram group + fake model to talk to the local stack")
    play.add_argument("--host", default="127.0.0.1")
    play.add_argument("--telegram-port", type=int, default=PLAYGROUND_TELEGRAM_PORT)
    play.add_argument("--llm-port", type=int, default=PLAYGROUND_LLM_PORT)
    play.add_argument("--control-port", type=int, default=None, help=f"default: {_PORT_HELP}")
    play.set_defaults(func=_playground)

    say = sub.add_parser("say", help="post in the playground group and print the bot's reply")
    say.add_argument("text")
    say.add_argument("--user", default="You")
    say.add_argument(
        "--wait", type=float, default=30.0, help="seconds to wait for the bot's decision and its reply"
    )
    say.add_argument("--control-port", type=int, default=None, help=f"default: {_PORT_HELP}")
    say.set_defaults(func=_say)

    bench = sub.add_parser("bench", help="measure and print benchmark figures as one JSON object")
    bench.add_argument("--json", action="store_true", help="one line of JSON")
    bench.add_argument("--quick", action="store_true", help="small sizes (seconds, for smoke tests)")
    bench.add_argument(
        "--only",
        action="append",
        metavar="PART",
        help="run only this part (repeatable, or a comma list; an unknown name lists the parts)",
    )
    bench.set_defaults(func=_bench)

    _add_memory(sub)
    _add_audit(sub)
    _add_inspector(sub)

    # Listed for `--help` only: main() hands everything after `fake-llm` to the fake provider's own parser.
    sub.add_parser(
        "fake-llm",
        help="serve the fake LLM provider on its own (`larkbot fake-llm --help` for its options)",
        add_help=False,
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["fake-llm"]:
        from larkbot.llm_gateway.fake import main as fake_llm_main

        status: int = fake_llm_main(argv[1:])
        return status
    args = build_parser().parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
