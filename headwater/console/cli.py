"""``headwater console``: serve the operator console (docs/console.md)."""

from __future__ import annotations

import contextlib
import ipaddress
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import click

from headwater.admin.options import command_config_option
from headwater.admin.security import SecurityConfigError, load_command_config
from headwater.console.csrf import CsrfGuard
from headwater.console.plan import DEFAULT_SPARK_MASTER
from headwater.console.reader import CLIENT_ID, Poller


def _listen(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit():
        raise click.BadParameter(f"{value!r}: expected HOST:PORT", param_hint="--listen")
    return host, int(port)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--bootstrap-server", required=True, metavar="HOST:PORT[,...]", help="Brokers to bootstrap from.")
@command_config_option
@click.option("--listen", default="127.0.0.1:8080", show_default=True, metavar="HOST:PORT",
              help="Where to serve the console. Anything but loopback lets others on the network use it.")
@click.option("--read-only", is_flag=True, help="Refuse every write (cancel, throttle, plan execution, self-healing on/off) and hide their buttons.")
@click.option("--metrics", "metrics_urls", multiple=True, metavar="URL",
              help="A broker's Prometheus endpoint (http://host:port/metrics) for copy rates, ETAs, the throttle in "
                   "force and (the controller's) self-healing; repeatable.")
@click.option("--interval", default=1.0, show_default=True, help="Seconds between two reads of the cluster.")
@click.option("--kafka-timeout", default=5.0, show_default=True,
              help="Seconds to wait for any one broker's answer before showing it as slow or down.")
@click.option("--spark-master", default=DEFAULT_SPARK_MASTER, show_default=True, metavar="URL",
              help="Spark master for the Plan page's Spark engine (started by the first Spark plan).")
def console(bootstrap_server: str, command_config: Path | None, listen: str, read_only: bool,
            metrics_urls: tuple[str, ...], interval: float, kafka_timeout: float, spark_master: str) -> None:
    """Serve the operator console: cluster, topics and live reassignments in the browser."""
    import uvicorn

    from headwater.console.app import create_app

    host, port = _listen(listen)
    try:
        security, props = load_command_config(command_config)
    except SecurityConfigError as exc:
        click.echo(f"error: --command-config {command_config}: {exc}", err=True)
        sys.exit(2)
    poller = Poller(bootstrap_server, security, props.get("client.id", CLIENT_ID), metrics_urls,
                    timeout_s=kafka_timeout, interval_s=interval, read_only=read_only, spark_master=spark_master)

    @contextlib.asynccontextmanager
    async def lifespan(_app: object) -> AsyncIterator[None]:
        poller.start()
        try:
            yield
        finally:
            poller.stop()

    # On loopback only loopback names are accepted in Host, which stops DNS rebinding from making
    # another site same-origin with the console (and so able to read its CSRF token).
    allowed = ["127.0.0.1", "localhost", "::1", "[::1]"] if _loopback(host) else None
    app = create_app(poller, CsrfGuard(), allowed_hosts=allowed, lifespan=lifespan)
    shown = f"[{host}]" if ":" in host else host
    click.echo(f"headwater console on http://{shown}:{port}/ for {bootstrap_server}"
               f"{' (read-only)' if read_only else ''}", err=True)
    # An open event stream would hold a graceful shutdown forever: give it a second.
    uvicorn.run(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=1)
