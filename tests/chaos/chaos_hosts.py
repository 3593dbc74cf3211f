"""Test hosts: ZooKeeper and each broker in a network namespace of its own, on one bridge.

Layout of one sandbox (owner = the PID of the test process that built it)::

    root namespace          bridge hwc<owner>br, 10.77.<net>.1/24   clients (producer, consumer, admin) live here
    hwchaos-<owner>-zk      veth hwc<owner>zk <-> eth0, 10.77.<net>.2    ZooKeeper
    hwchaos-<owner>-b<id>   veth hwc<owner>b<id> <-> eth0, 10.77.<net>.<10+id>   broker <id>

Faults are nftables rules in the namespaces (one table, ``inet hwchaos``, rewritten whole on every
change, so ``heal`` is one atomic flush). ``tc netem`` is not available on this kernel, so there is
no added delay; a paused process (SIGSTOP) stands in for a slow one.

Everything carries the ``hwchaos-`` / ``hwc`` prefix and the owner's PID: ``sweep_leftovers`` removes
what an earlier run left behind when it died (its owner PID is gone), and never touches the namespaces
of a run that is still alive (``make chaos`` and ``make test`` may run side by side).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cluster_support import DEFAULT_PROPS, LocalCluster

from headwater.admin.local import (
    BrokerProcess,
    ZooKeeperProcess,
)

NS_PREFIX = "hwchaos-"
IF_PREFIX = "hwc"
NFT_TABLE = "hwchaos"
BROKER_PORT = 9092  # every host has its own address, so the ports can be fixed
ZK_PORT = 2181
ZK_NODE = "zk"

_NS_NAME = re.compile(rf"^{NS_PREFIX}(?P<owner>\d+)-(?P<node>\w+)$")
_LINK_NAME = re.compile(rf"^{IF_PREFIX}(?P<owner>\d+)(br|zk|b\d+)$")


def run(*args: str, input_text: str | None = None, check: bool = True) -> str:
    proc = subprocess.run(list(args), input=input_text, capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_namespace_processes(ns: str) -> None:
    """SIGKILL every process still inside ``ns`` (a broker or ZooKeeper of a run that crashed)."""
    for line in run("ip", "netns", "pids", ns, check=False).split():
        with contextlib.suppress(ValueError, ProcessLookupError):
            pid = int(line)
            os.kill(pid, signal.SIGCONT)  # a paused process would otherwise keep the namespace alive
            os.kill(pid, signal.SIGKILL)


def sweep_leftovers() -> list[str]:
    """Remove namespaces and bridges whose owner PID is dead. Returns what was removed."""
    removed = []
    for line in run("ip", "netns", "list", check=False).splitlines():
        name = line.split()[0] if line.strip() else ""
        m = _NS_NAME.match(name)
        if m and not _pid_alive(int(m["owner"])):
            _kill_namespace_processes(name)
            run("ip", "netns", "delete", name, check=False)
            removed.append(name)
    # Bridges and host ends of veth pairs. A veth can outlive its deleted namespace for a while (the
    # kernel frees a namespace only when nothing refers to it any more); deleting it removes both ends.
    for line in run("ip", "-o", "link", "show", check=False).splitlines():
        parts = line.split(":")
        name = parts[1].strip().split("@")[0] if len(parts) > 1 else ""
        m = _LINK_NAME.match(name)
        if m and not _pid_alive(int(m["owner"])):
            run("ip", "link", "delete", name, check=False)
            removed.append(name)
    return removed


def _free_subnet() -> int:
    """A third octet of 10.77.x.0/24 that no interface of this machine uses yet."""
    used = set(re.findall(r"inet 10\.77\.(\d+)\.", run("ip", "-o", "-4", "addr", "show", check=False)))
    # Start the search at a place of this process's own: two test workers creating sandboxes at the
    # same moment would otherwise both take the lowest free subnet.
    start = os.getpid()
    for i in range(254):
        octet = 1 + (start + i) % 254
        if str(octet) not in used:
            return octet
    raise RuntimeError("every 10.77.x.0/24 subnet is in use")


@dataclass
class Sandbox:
    """A bridge, one namespace per node, and the nftables rules that make up the current faults."""

    owner: int = field(default_factory=os.getpid)
    net: int = 0
    nodes: dict[str, str] = field(default_factory=dict)  # node name -> address
    blocked: set[tuple[str, str]] = field(default_factory=set)  # (src, dst): packets src -> dst dropped
    loss_percent: dict[str, int] = field(default_factory=dict)
    created: bool = False

    @property
    def bridge(self) -> str:
        return f"{IF_PREFIX}{self.owner}br"

    @property
    def gateway(self) -> str:
        return f"10.77.{self.net}.1"

    def ns(self, node: str) -> str:
        return f"{NS_PREFIX}{self.owner}-{node}"

    def create(self) -> Sandbox:
        sweep_leftovers()
        self.net = _free_subnet()
        run("ip", "link", "add", self.bridge, "type", "bridge")
        self.created = True
        run("ip", "addr", "add", f"{self.gateway}/24", "dev", self.bridge)
        run("ip", "link", "set", self.bridge, "up")
        return self

    def add_node(self, node: str, host_octet: int) -> str:
        """A namespace on the bridge with address 10.77.<net>.<host_octet>; returns the address."""
        ns, veth = self.ns(node), self.veth(node)
        address = f"10.77.{self.net}.{host_octet}"
        self.nodes[node] = address
        run("ip", "netns", "add", ns)
        run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
        run("ip", "link", "set", veth, "master", self.bridge, "up")
        run("ip", "-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
        run("ip", "-n", ns, "link", "set", "eth0", "up")
        run("ip", "-n", ns, "link", "set", "lo", "up")  # a broker connects to its own address too
        self._apply(node)
        return address

    def veth(self, node: str) -> str:
        return f"{IF_PREFIX}{self.owner}{node}"

    def destroy(self) -> None:
        for node in list(self.nodes):
            ns = self.ns(node)
            _kill_namespace_processes(ns)
            run("ip", "link", "delete", self.veth(node), check=False)
            run("ip", "netns", "delete", ns, check=False)
        self.nodes.clear()
        if self.created:
            run("ip", "link", "delete", self.bridge, check=False)
            self.created = False

    # --- faults -------------------------------------------------------------------------------

    def _ruleset(self, node: str) -> str:
        addr = self.nodes
        inp = [f"ip saddr {addr[src]} drop" for src, dst in sorted(self.blocked) if dst == node]
        out = [f"ip daddr {addr[dst]} drop" for src, dst in sorted(self.blocked) if src == node]
        pct = self.loss_percent.get(node, 0)
        if pct:
            # Each packet is dropped with probability pct/100, both ways, whoever the peer is.
            inp.append(f"numgen random mod 100 < {pct} drop")
            out.append(f"numgen random mod 100 < {pct} drop")

        def chain(name: str, hook: str, rules: list[str]) -> str:
            body = "".join(f"    {r}\n" for r in rules)
            return f"  chain {name} {{\n    type filter hook {hook} priority 0; policy accept;\n{body}  }}\n"

        # Declaring the table first makes the delete valid on the first run; the whole file is one
        # transaction, so a fault appears or heals at once.
        return (f"table inet {NFT_TABLE}\ndelete table inet {NFT_TABLE}\n"
                f"table inet {NFT_TABLE} {{\n{chain('input', 'input', inp)}{chain('output', 'output', out)}}}\n")

    def _apply(self, node: str) -> None:
        run("ip", "netns", "exec", self.ns(node), "nft", "-f", "-", input_text=self._ruleset(node))

    def _apply_all(self, nodes: Iterable[str]) -> None:
        for node in sorted(set(nodes)):
            self._apply(node)

    def cut(self, src: str, dst: str) -> None:
        """Drop packets src -> dst only (one-way). Both ends filter, so either namespace suffices."""
        self.blocked.add((src, dst))
        self._apply_all([src, dst])

    def isolate(self, node: str, peers: Iterable[str]) -> None:
        """Drop everything between ``node`` and each of ``peers``, both ways."""
        peers = list(peers)
        for p in peers:
            self.blocked.update({(node, p), (p, node)})
        self._apply_all([node, *peers])

    def loss(self, node: str, percent: int) -> None:
        self.loss_percent[node] = percent
        self._apply(node)

    def heal(self) -> None:
        touched = {n for pair in self.blocked for n in pair} | set(self.loss_percent)
        self.blocked.clear()
        self.loss_percent.clear()
        self._apply_all(touched & set(self.nodes))

    def rules(self, node: str) -> str:
        return run("ip", "netns", "exec", self.ns(node), "nft", "list", "table", "inet", NFT_TABLE)


@dataclass
class NamespacedBroker(BrokerProcess):
    """A ``BrokerProcess`` started inside its namespace; everything else (stop, kill9) is inherited."""

    netns: str = ""

    def launcher(self) -> list[str]:
        # ``ip netns exec`` enters the namespace and exec()s the command, so the PID we get is the
        # broker's (or the JVM's) own: kill -9 and SIGSTOP reach the real process.
        return ["ip", "netns", "exec", self.netns]


@dataclass
class NamespacedZooKeeper(ZooKeeperProcess):
    netns: str = ""

    def launcher(self) -> list[str]:
        return ["ip", "netns", "exec", self.netns]


def fill_disk(directory: Path) -> Path:
    """Write into ``directory`` until its file system is full; delete the returned file to free it."""
    filler = directory / "chaos-filler"
    # Unbuffered: nothing is left to fail when the file closes.
    with open(filler, "wb", buffering=0) as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\0" * 65536)
    return filler


def broker_node(broker_id: int) -> str:
    return f"b{broker_id}"


@dataclass
class ChaosCluster(LocalCluster):
    """``LocalCluster`` (same reads, same stop-by-PID) with every process in its own namespace."""

    sandbox: Sandbox = field(default_factory=Sandbox)
    # > 0: every broker gets a small tmpfs (this many KiB) as its first log dir, beside the usual one,
    # so a nemesis can fill a disk for real (ENOSPC from the kernel).
    small_disk_kib: int = 0
    _mounted: list[Path] = field(default_factory=list)

    def start(self) -> ChaosCluster:
        self.sandbox.create()
        zk_addr = self.sandbox.add_node(ZK_NODE, 2)
        self.zk = NamespacedZooKeeper(ZK_PORT, self.data_dir, host=zk_addr, netns=self.sandbox.ns(ZK_NODE)).start()
        props = {**DEFAULT_PROPS, "zookeeper.connect": self.zk.connect, **self.props}
        for broker_id in range(1, self.size + 1):
            node = broker_node(broker_id)
            addr = self.sandbox.add_node(node, 10 + broker_id)
            broker_props = dict(props)
            if self.small_disk_kib:
                disk = self.disk_dir(broker_id)
                disk.mkdir(parents=True, exist_ok=True)
                subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.small_disk_kib}k", "tmpfs", str(disk)],
                               check=True)
                self._mounted.append(disk)
                # The small disk first: ties in placement go to it, so the first partitions land there.
                broker_props["log.dirs"] = f"{disk},{self.log_dir(broker_id)}"
            self.brokers[broker_id] = NamespacedBroker(broker_id, BROKER_PORT, self.data_dir, broker_props, host=addr,
                                                       netns=self.sandbox.ns(node))
        for b in self.brokers.values():
            b.start()
        self.wait_registered(set(self.brokers))
        return self

    def stop(self) -> None:
        try:
            super().stop()
        finally:
            self.sandbox.destroy()

    def log_dir(self, broker_id: int) -> Path:
        return self.data_dir / f"broker-{broker_id}-logs"

    def disk_dir(self, broker_id: int) -> Path:
        return self.data_dir / f"broker-{broker_id}-disk"

    def log_dirs(self, broker_id: int) -> list[Path]:
        return [self.disk_dir(broker_id), self.log_dir(broker_id)] if self.small_disk_kib else [self.log_dir(broker_id)]

    def release_disks(self) -> None:
        """After the brokers stopped and their files were read: keep a copy of each small disk in the
        data dir (a failing run keeps it), then unmount it."""
        for disk in self._mounted:
            with contextlib.suppress(OSError):
                shutil.copytree(disk, disk.with_name(disk.name + "-saved"), dirs_exist_ok=True)
            subprocess.run(["umount", "-l", str(disk)], check=False)
        self._mounted.clear()


def start_chaos_cluster(data_dir: Path, size: int = 3, props: Mapping[str, str] | None = None, *,
                        small_disk_kib: int = 0) -> ChaosCluster:
    cluster = ChaosCluster(data_dir, size, dict(props or {}), small_disk_kib=small_disk_kib)
    try:
        return cluster.start()
    except BaseException:
        cluster.stop()
        cluster.release_disks()
        raise
