"""The ``guardtrace`` command: the parser, assembled from one module per command group,
and the dispatch that turns every expected failure into one line on stderr."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from .. import __version__
from ..schemas import environment_variables as env
from .support import SERVER_EXTRA, CommandError, missing_modules, output_to_devnull

__all__ = ["build_parser", "main"]

# Each has ``register(subparsers)``, which adds its parsers and sets ``func`` (and
# ``needs``: the server-side packages it imports). Imports inside commands stay lazy,
# so `--help` is fast and works without the server extra.
_COMMAND_MODULES: tuple[str, ...] = (
    "guardtrace.cli.pipeline",    # broker, migrate, consume, emit-test
    "guardtrace.cli.scan_command",  # scan
    "guardtrace.cli.query",       # trace, payload, requests, stats
    "guardtrace.cli.up",          # up, dashboard
    "guardtrace.cli.simulate",    # simulate
    "guardtrace.cli.alerts",      # alerts test, alerts run
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="guardtrace",
        description="Observability for LLM-agent hallucinations: guard hooks emit OTLP over "
                    "Kafka, consumers persist it into ClickHouse, you query it here.",
        epilog="Settings resolve from flags, then GUARDTRACE_* environment variables, then "
               "defaults; the README lists every variable.")
    parser.add_argument("--version", action="version", version=f"guardtrace {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module_name in _COMMAND_MODULES:
        importlib.import_module(module_name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = logging.DEBUG if args.verbose else env.read_str(env.LOG_LEVEL).upper()
    logging.basicConfig(level=level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kafka").setLevel(logging.WARNING if not args.verbose else logging.INFO)
    from ..store.connection import StoreError
    from ..transport.broker import BrokerError
    from ..transport.topics import KafkaUnreachable

    try:
        missing = missing_modules(getattr(args, "needs", ()))
        if missing:
            raise CommandError(f"this command needs the server side, and "
                               f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} "
                               f"not installed: {SERVER_EXTRA}")
        return int(args.func(args) or 0)
    except (CommandError, env.ConfigError, StoreError, BrokerError, KafkaUnreachable) as exc:
        print(f"guardtrace {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `guardtrace payload ID | head`: the reader has what it wanted. End quietly, as
        # a process killed by SIGPIPE would (128 + 13), not with a traceback.
        output_to_devnull(sys.stdout)
        return 141


if __name__ == "__main__":
    sys.exit(main())
