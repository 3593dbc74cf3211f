"""The ``headwater`` command line."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import click

from headwater.admin.acls import acls
from headwater.admin.cluster import cluster
from headwater.admin.configs import configs
from headwater.admin.groups import groups
from headwater.admin.leader_election import leader_election
from headwater.admin.options import key_values
from headwater.admin.reassign import reassign
from headwater.admin.topics import topics
from headwater.admin.transactions import transactions
from headwater.server.config import ConfigError, load_config


class _Commands(click.Group):
    """The CLI's commands, with ``plan`` and ``console`` loaded only when they are asked for.

    The planner brings pandas and numpy (0.6 s of imports here, more on a busy machine), which every
    ``headwater broker`` process would otherwise pay at start-up (the console brings Starlette and
    uvicorn). A missing optional extra leaves that command out and the rest of the CLI working.
    """

    LAZY = {"plan": ("headwater.planner.cli", "plan"), "console": ("headwater.console.cli", "console")}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self.LAZY))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.LAZY and cmd_name not in self.commands:
            module_name, attr = self.LAZY[cmd_name]
            try:
                module = importlib.import_module(module_name)
            except ImportError:
                return None
            command = getattr(module, attr)
            assert isinstance(command, click.Command)
            return command
        return super().get_command(ctx, cmd_name)


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """headwater: a Kafka-protocol broker cluster with live partition reassignment."""


@main.command()
@click.option("--config", "config_path", required=True, type=click.Path(path_type=Path), help="Kafka-style .properties file.")
@click.option("--override", multiple=True, metavar="KEY=VALUE", help="Override a property (repeatable).")
def broker(config_path: Path, override: tuple[str, ...]) -> None:
    """Run one broker until SIGTERM or SIGINT."""
    from headwater.server.broker import run_broker

    overrides = key_values(override, "--override")
    try:
        config = load_config(config_path, overrides)
    except ConfigError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    try:
        run_broker(config)
    except ConfigError as exc:  # settings only checked when the broker builds its parts (TLS files, SASL)
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)


@main.command()
@click.option("--data-dir", type=click.Path(path_type=Path), default=None, help="Where the demo keeps its data (a fresh temp dir by default).")
@click.option("--console", "keep_console", is_flag=True, help="Keep the cluster and the console up at the end, until Ctrl-C.")
@click.option("--listen", default=None, metavar="HOST:PORT", help="Where the console listens (a free port on 127.0.0.1 by default).")
def demo(data_dir: Path | None, keep_console: bool, listen: str | None) -> None:
    """KIP-455 and KIP-599 on a local 6-broker cluster: a throttled move phase by phase, a cancel, the
    mutation quota, a Spark-planned rebalance and the preferred-leader election, under a live producer."""
    from headwater.demo import run_demo

    sys.exit(run_demo(data_dir, keep_console, listen))


main.add_command(topics, "topics")
main.add_command(configs, "configs")
main.add_command(cluster, "cluster")
main.add_command(reassign, "reassign")
main.add_command(groups, "groups")
main.add_command(acls, "acls")
main.add_command(leader_election, "leader-election")
main.add_command(transactions, "transactions")

