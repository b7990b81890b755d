"""What the tests observe of the savers' and the store's Redis traffic from outside: a redis-py connection class
(given to `from_url` as `connection_class=`, a public redis-py option) that counts the round trips it sends."""

from __future__ import annotations

import redis


def counting_connection_class() -> type[redis.Connection]:
    """A fresh `redis.Connection` subclass whose `sends` counts socket writes (one per round trip) over all its
    connections; a class of its own per call, so tests that run at once do not share a count."""

    class CountingConnection(redis.Connection):
        sends = 0

        def send_packed_command(self, command, check_health=True):
            type(self).sends += 1
            return super().send_packed_command(command, check_health)

    return CountingConnection
