"""The links between GPUs and the time of the collectives that cross them (notebook 07).

A link is one GPU's connection: per-direction bandwidth bw (GB/s) and per-step latency a (us), from
data/devices/interconnect.csv: 'node' links join the GPUs of one server (NVLink, PCIe), 'network' links join servers
(one NIC per GPU); each row names its spec sheet, and the latencies are assumptions of the order of NCCL's.
Collectives on one link (NCCL's ring: reduce-scatter, then all-gather):
    allreduce_n(bytes) = 2 (n - 1) (a + bytes / (n bw)),      p2p(bytes) = a + bytes / bw
Across k servers of g GPUs the all-reduce is hierarchical: a ring inside each server, then a ring over the network on
each GPU's 1/g share:
    allreduce(bytes) = allreduce_g(bytes; node link) + allreduce_k(bytes / g; network link)
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from . import paths

INTERCONNECT = paths.DEVICES_ADDED / "interconnect.csv"
LINK_COLUMNS = ("device", "scope", "link", "GBps_per_direction", "step_latency_us", "source")
SCOPES = ("node", "network")


class NetworkError(ValueError):
    """An interconnect table that cannot be read, or a device without a link; the message names the file and row."""


@dataclass(frozen=True)
class Link:
    """One GPU's link: per-direction bandwidth (GB/s) and per-step latency (us), with its source."""
    name: str
    GBps: float
    latency_us: float
    source: str = ""


def load_links(path=INTERCONNECT) -> pd.DataFrame:
    """The interconnect table (LINK_COLUMNS), each row checked; NetworkError names a bad one (notebook 07)."""
    path = Path(path)
    table = paths.read_table(path, "interconnect table", NetworkError, LINK_COLUMNS)
    for c in ("GBps_per_direction", "step_latency_us"):
        table[c] = pd.to_numeric(table[c], errors="coerce")
    bad = table.index[~(table["GBps_per_direction"] > 0) | ~(table["step_latency_us"] >= 0)
                      | ~table["scope"].isin(SCOPES) | table[["device", "link", "source"]].isna().any(axis=1)]
    if len(bad):
        raise NetworkError(f"{path}: row {bad[0] + 2}: needs a device, a scope ({' or '.join(SCOPES)}), a link, a "
                           "positive GBps_per_direction, a step_latency_us >= 0 and a source")
    if table.duplicated(["device", "scope"]).any():
        row = table[table.duplicated(["device", "scope"])].iloc[0]
        raise NetworkError(f"{path}: device {row['device']!r} has two {row['scope']} links")
    return table


def link_of(device_name: str, scope: str = "node", path=INTERCONNECT) -> Link:
    """The `scope` link ('node': between the GPUs of a server, 'network': between servers) of a device (notebook 07)."""
    table = load_links(path)
    row = table[(table["device"] == device_name) & (table["scope"] == scope)]
    if row.empty:
        raise NetworkError(f"{path}: no {scope} link for {device_name!r}; add a row with its spec-sheet source")
    r = row.iloc[0]
    return Link(r["link"], float(r["GBps_per_direction"]), float(r["step_latency_us"]), r["source"])


# allreduce_n(bytes) = 2 (n - 1) (a + bytes / (n bw))         (ring: reduce-scatter, then all-gather)
def allreduce_ms(n_bytes: float, gpus: int, link: Link) -> float:
    """Time of a ring all-reduce of n_bytes over `gpus` GPUs on `link` (notebook 07)."""
    if gpus <= 1:
        return 0.0
    return 2 * (gpus - 1) * (link.latency_us * 1e-3 + n_bytes / (gpus * link.GBps * 1e6))


# allreduce(bytes) = allreduce_g(bytes; node) + allreduce_k(bytes / g; network)
def hierarchical_allreduce_ms(n_bytes: float, gpus_per_node: int, nodes: int, node: Link, network: Link) -> float:
    """All-reduce over `nodes` servers of `gpus_per_node` GPUs: a ring inside each, then one across (notebook 07)."""
    return allreduce_ms(n_bytes, gpus_per_node, node) + allreduce_ms(n_bytes / gpus_per_node, nodes, network)


# p2p(bytes) = a + bytes / bw
def p2p_ms(n_bytes: float, link: Link) -> float:
    """Time to send n_bytes from one GPU to the next on `link` (notebook 07)."""
    return link.latency_us * 1e-3 + n_bytes / (link.GBps * 1e6)
