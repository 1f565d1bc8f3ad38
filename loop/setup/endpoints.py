"""A task's `network` and `grader_network` entries: `host:port`, read and refused in one line
at load; the sandbox's bridge (loop/run/netbridge.py) reads them the same way. Pure."""
from __future__ import annotations

import ipaddress
import re


def parse(value: str) -> tuple[str, int]:
    """`host:port` -> (host, port); ValueError with the reason."""
    m = re.fullmatch(r"([A-Za-z0-9.\-]+):(\d{1,5})", str(value).strip())
    if not m or not 0 < int(m.group(2)) < 65536:
        raise ValueError(f"'{value}' is not host:port (e.g. 127.0.0.1:8000)")
    host = m.group(1)
    if is_ip(host) and not ipaddress.ip_address(host).is_loopback:
        raise ValueError(f"'{value}': name a remote endpoint by its host name, or use a "
                         f"loopback address (the sandbox has no route to other addresses)")
    return host, int(m.group(2))


def is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False
