"""Two "hosts" on one machine: network namespaces, each joined to the root namespace by a
veth pair with private addresses (``10.231.<octet>.0/30`` for the first host, ``.4/30`` for
the second; the octet is drawn per run among the ones no interface uses). The root-side end
of each pair is where the private database server listens for that host.

:meth:`Network.cut` takes the root-side end of a host's pair down (``ip link set ... down``):
from then on every packet between that host and the server is dropped without a reset, as
in a switch or cable failure, and both sides' TCP connections stay open, retransmitting.
:meth:`Network.restore` brings it back up; the retransmissions then get through, so whatever
the cut-off host was sending reaches the server late. The IPv4 addresses stay on the
interface while it is down, so the server's listening sockets are not disturbed.

Names are unique per run (``solid-<tag>-hostA``, veths ``so<tag>a0``/``so<tag>a1``) and
:meth:`Network.destroy` (called in the fixture's ``finally``) kills whatever still runs in
the namespaces and deletes them, which deletes the veth pairs.
"""

from __future__ import annotations

import os
import random
import secrets
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field

#: The private block the pairs take their /30 from.
BLOCK = "10.231"


def ip(*args: str, check: bool = True) -> str:
    """Run ``ip *args``; its output (a failure raises with what ``ip`` said)."""
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)} failed ({done.returncode}): {done.stderr}")
    return done.stdout


def unavailable() -> str | None:
    """Why namespaces cannot be made here (``None``: they can)."""
    if shutil.which("ip") is None:
        return "the ip command (iproute2) is not installed: run `make sysdeps NEED_NETNS=1`"
    if os.geteuid() != 0:
        return "network namespaces need root (CI runs the adversarial leg as root)"
    return None


@dataclass
class Host:
    name: str
    namespace: str
    root_veth: str
    host_veth: str
    #: The root-side address: the server listens here for this host.
    server_address: str
    #: The host's own address, inside its namespace.
    address: str
    cut: bool = False

    @property
    def prefix(self) -> list[str]:
        """Runs a command inside the host's namespace (``ip netns exec`` execs it)."""
        return ["ip", "netns", "exec", self.namespace]


@dataclass
class Network:
    names: tuple[str, ...] = ("hostA", "hostB")
    tag: str = field(default_factory=lambda: secrets.token_hex(3))
    hosts: dict[str, Host] = field(default_factory=dict)
    octet: int = 0

    def create(self) -> None:
        self.octet = octet = free_octet()
        for index, name in enumerate(self.names):
            base = 4 * index
            host = Host(
                name=name,
                namespace=f"solid-{self.tag}-{name}",
                root_veth=f"so{self.tag}{chr(ord('a') + index)}0",
                host_veth=f"so{self.tag}{chr(ord('a') + index)}1",
                server_address=f"{BLOCK}.{octet}.{base + 1}",
                address=f"{BLOCK}.{octet}.{base + 2}",
            )
            self.hosts[name] = host
            ip("netns", "add", host.namespace)
            ip("link", "add", host.root_veth, "type", "veth", "peer", "name", host.host_veth)
            ip("link", "set", host.host_veth, "netns", host.namespace)
            ip("addr", "add", f"{host.server_address}/30", "dev", host.root_veth)
            ip("link", "set", host.root_veth, "up")
            inside = ["-n", host.namespace]
            ip(*inside, "addr", "add", f"{host.address}/30", "dev", host.host_veth)
            ip(*inside, "link", "set", host.host_veth, "up")
            ip(*inside, "link", "set", "lo", "up")

    def __getitem__(self, name: str) -> Host:
        return self.hosts[name]

    @property
    def cidr(self) -> str:
        """The block holding every pair of the run (a /29 for two hosts)."""
        return f"{BLOCK}.{self.octet}.0/{32 - (4 * len(self.names) - 1).bit_length()}"

    @property
    def server_addresses(self) -> tuple[str, ...]:
        return tuple(host.server_address for host in self.hosts.values())

    def cut(self, host: Host) -> None:
        ip("link", "set", host.root_veth, "down")
        host.cut = True

    def restore(self, host: Host) -> None:
        ip("link", "set", host.root_veth, "up")
        host.cut = False

    def can_reach(self, host: Host, port: int) -> bool:
        """Whether a TCP connection from inside ``host`` to its server address succeeds."""
        probe = (
            "import socket, sys; "
            f"socket.create_connection(({host.server_address!r}, {port}), timeout=3).close()"
        )
        done = subprocess.run(
            [*host.prefix, sys.executable, "-c", probe],
            capture_output=True,
            timeout=30,
            check=False,
        )
        return done.returncode == 0

    def destroy(self) -> None:
        """Kill what still runs in the namespaces (only this run's processes can be there)
        and delete them, with their veth pairs; best effort, every step tried."""
        for host in self.hosts.values():
            for pid in ip("netns", "pids", host.namespace, check=False).split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (OSError, ValueError):
                    pass
            ip("netns", "del", host.namespace, check=False)
            ip("link", "del", host.root_veth, check=False)  # gone with the namespace, normally


def free_octet() -> int:
    """A third octet of ``10.231.x.0/24`` that no address of this machine uses yet."""
    used = ip("-4", "-o", "addr", "show")
    choices = [o for o in range(1, 255) if f" {BLOCK}.{o}." not in used]
    if not choices:
        raise RuntimeError(f"every {BLOCK}.x.0/24 is in use on this machine")
    return random.choice(choices)
