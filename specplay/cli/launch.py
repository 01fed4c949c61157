"""`launch`: start a preset's two `vllm serve` servers as its serve lines say, then the page on them (remote
mode); Ctrl-C stops the page and both servers."""

from __future__ import annotations

import shlex
import signal
import subprocess
import sys

from specplay.cli.base import EXIT_OK, CLISubcommand, UsageError, gated_preset

EPILOG = ("exit codes: 0 stopped by Ctrl-C or SIGTERM, 1 a server failed to start, 2 a bad preset or bad "
          "arguments")


class LaunchCommand(CLISubcommand):
    name = "launch"
    help = "start the preset's two vllm serve servers, then the page on them"
    epilog = EPILOG

    def add_arguments(self, parser) -> None:
        from specplay.presets.catalog import DEFAULTS_SAID

        parser.add_argument("--preset", default=None, help=f"preset name (default: {DEFAULTS_SAID})")
        parser.add_argument("--no-page", action="store_true", help="only the servers, until Ctrl-C")
        parser.add_argument("--host", default="127.0.0.1", help="the page's address (default: 127.0.0.1)")
        parser.add_argument("--port", type=int, default=7860, help="the page's port (default: 7860)")
        parser.add_argument("--server-ports", default="8000,8001", metavar="B,S",
                            help="the servers' ports when free (default: 8000,8001, as the serve lines)")
        parser.add_argument("--timeout", type=float, default=900.0, help="seconds for both servers to start")
        from specplay.presets.adhoc import add_arguments as add_own_pair_arguments

        add_own_pair_arguments(parser)

    def cmd(self, args, pair=None) -> int:
        from specplay.core.events import BASELINE, SPECULATIVE
        from specplay.presets.adhoc import same_pair_arguments
        from specplay.presets.catalog import default_preset_name
        from specplay.run.launch import launch, quick_tests

        preset, _ = gated_preset(args, default_preset_name)
        same_pair = same_pair_arguments(args, preset)  # the page names the pair the servers run
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # as Ctrl-C: the servers are stopped on the way out
        try:
            ports = dict(zip((BASELINE, SPECULATIVE), (int(p) for p in args.server_ports.split(","))))
        except ValueError:
            raise UsageError("--server-ports must look like 8000,8001") from None
        try:
            servers = launch(preset, ports=ports, timeout_s=args.timeout)
        except (RuntimeError, TimeoutError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        try:
            print("\nquick tests:\n  " + "\n  ".join(quick_tests(servers)))
            urls = ["--baseline-url", servers.urls[BASELINE], "--speculative-url", servers.urls[SPECULATIVE]]
            print("\nthe page on servers started elsewhere:\n  python app.py "
                  f"{shlex.join(same_pair + urls)}\n")
            if args.no_page:
                return _wait(servers)
            else:  # the page in its own process (the CLI and the page are separate layers)
                pids = ",".join(str(servers.processes[r].pid) for r in (BASELINE, SPECULATIVE))
                subprocess.run([sys.executable, "-m", "specplay.page.entry", *same_pair, *urls,
                                "--server-pids", pids, "--host", args.host, "--port", str(args.port)])
        except KeyboardInterrupt:
            pass
        finally:
            print("stopping both servers", file=sys.stderr)
            servers.stop()
        return EXIT_OK


def _wait(servers) -> int:
    """Until Ctrl-C (KeyboardInterrupt in the caller) or a server's exit, which is an error."""
    import time

    while all(p.poll() is None for p in servers.processes.values()):
        time.sleep(1.0)
    dead = [role for role, p in servers.processes.items() if p.poll() is not None]
    print(f"error: the {' and '.join(dead)} server exited; its log: {servers.logs[dead[0]]}", file=sys.stderr)
    return 1


def cmd_init() -> list[CLISubcommand]:
    return [LaunchCommand()]
