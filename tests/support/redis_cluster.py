"""A local three-master Redis Cluster for tests: redis-server in cluster mode on free loopback ports."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import redis

from support.local_servers import free_port

START_WAIT_S = 20.0  # bound on each stage: servers up, cluster created, every node agreeing it is ok


@dataclass(frozen=True)
class LocalCluster:
    ports: tuple[int, ...]

    @property
    def url(self) -> str:
        """The URL react-graph takes for it: every seed node, no database (a cluster has only db 0)."""
        return "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in self.ports) + "/"

    def node(self, port: int) -> redis.Redis:
        return redis.Redis(port=port)

    def client(self) -> redis.RedisCluster:
        return redis.RedisCluster(host="127.0.0.1", port=self.ports[0])


def free_ports(count: int) -> list[int]:
    return [free_port() for _ in range(count)]  # distinct: each call walks on


def _until(what: str, condition, processes: list[subprocess.Popen]) -> None:
    deadline = time.monotonic() + START_WAIT_S
    while True:
        try:
            if condition():
                return
        except (redis.ConnectionError, redis.ResponseError):
            pass
        if any(p.poll() is not None for p in processes):
            raise RuntimeError(f"a cluster node exited while waiting for {what}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"no {what} after {START_WAIT_S:g} s")
        time.sleep(0.05)


@contextmanager
def local_cluster(directory: Path) -> Iterator[LocalCluster]:
    """Start three masters (no replicas), create the cluster, wait until every node says `cluster_state:ok`."""
    server, cli = shutil.which("redis-server"), shutil.which("redis-cli")
    if not server or not cli:
        raise RuntimeError("a Redis Cluster test needs redis-server and redis-cli on PATH")
    chosen = free_ports(6)
    # the bus port is named too: its default (port + 10000) may be taken, or past 65535
    ports, bus_ports = chosen[:3], chosen[3:]
    processes: list[subprocess.Popen] = []
    try:
        for port, bus_port in zip(ports, bus_ports, strict=True):
            node_dir = directory / str(port)
            node_dir.mkdir(parents=True)
            processes.append(subprocess.Popen(
                [server, "--port", str(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
                 "--cluster-port", str(bus_port), "--cluster-config-file", "nodes.conf",
                 "--cluster-node-timeout", "5000", "--save", "",
                 "--appendonly", "no", "--dir", str(node_dir)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        nodes = [redis.Redis(port=p, socket_timeout=2) for p in ports]
        _until("answering servers", lambda: all(n.ping() for n in nodes), processes)
        subprocess.run([cli, "--cluster", "create", *(f"127.0.0.1:{p}" for p in ports), "--cluster-replicas", "0",
                        "--cluster-yes"], check=True, capture_output=True, timeout=START_WAIT_S)
        _until("cluster_state:ok on every node",
               lambda: all(n.cluster("info")["cluster_state"] == "ok" for n in nodes), processes)
        for n in nodes:
            n.close()
        yield LocalCluster(tuple(ports))
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
