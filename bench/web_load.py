#!/usr/bin/env python3
"""HTTP/1.1 keep-alive load on `meshwork serve`'s JSON API (docs/web.md), loopback only.

  web_load.py --url http://127.0.0.1:PORT --paths /api/runs,/api/runs/1/frame?pixels=800 \\
              [--clients 50] [--seconds 10] [--max-requests 20000] \\
              [--header 'Authorization: Bearer TOKEN'] [--json OUT]

Each client holds one connection and sends GETs round robin over the paths (client i starts at path
i, so every path is hit from the start), reading each response in full (Content-Length, chunked, or
until close) before the next, until --seconds have passed or --max-requests requests were made in
total. Prints one table row: clients, requests, errors (non-2xx answers, socket errors, timeouts),
requests/s, p50/p95/p99 latency (ms, send to last body byte) and bytes received; --json writes the
same (plus status counts and sample errors). Exit status 1 when any error occurred, 2 on bad usage.

Stdlib only (asyncio). The generator shares the machine's cores with the server: on 2 cores it
costs about as much CPU as the server does, so compare numbers from the same machine only.
"""
import argparse
import asyncio
import ipaddress
import json
import math
import sys
import time
import urllib.parse

LOOPBACK = {"127.0.0.1", "localhost", "::1"}


class Stats:
    def __init__(self):
        self.issued = 0          # requests started (the --max-requests budget)
        self.requests = 0        # requests finished, answered or failed
        self.errors = 0
        self.latencies = []      # ms, answered requests only
        self.bytes = 0           # response bytes, headers included
        self.connections = 0     # a server that keeps alive opens one per client
        self.status = {}
        self.error_samples = {}  # first few distinct error texts -> count

    def error(self, text):
        self.errors += 1
        if text in self.error_samples or len(self.error_samples) < 10:
            self.error_samples[text] = self.error_samples.get(text, 0) + 1


class Closed(Exception):
    """The server closed a reused connection before answering (a keep-alive race): retry once."""


async def read_response(reader):
    """Reads one response; returns (status, bytes read, keep-alive)."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as e:
        if not e.partial:
            raise Closed() from None
        raise
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/"):
        raise ValueError(f"bad status line {lines[0]!r}")
    version, status = parts[0], int(parts[1])
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    connection = headers.get("connection", "").lower()
    keep_alive = "close" not in connection and (version != "HTTP/1.0" or "keep-alive" in connection)
    size = len(head)
    if status in (204, 304) or 100 <= status < 200:
        return status, size, keep_alive
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            line = await reader.readuntil(b"\r\n")
            size += len(line)
            chunk = int(line.split(b";", 1)[0].strip(), 16)
            if chunk == 0:
                while True:  # trailers, up to the empty line
                    line = await reader.readuntil(b"\r\n")
                    size += len(line)
                    if line == b"\r\n":
                        return status, size, keep_alive
            size += len(await reader.readexactly(chunk + 2))
    if "content-length" in headers:
        size += len(await reader.readexactly(int(headers["content-length"])))
        return status, size, keep_alive
    size += len(await reader.read())  # no length: the body ends with the connection
    return status, size, False


async def client(index, args, stats, deadline):
    paths, host, port = args.paths, args.host, args.port
    extra = "".join(f"{h}\r\n" for h in args.header)
    host_header = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    requests = [(f"GET {p} HTTP/1.1\r\nHost: {host_header}\r\nUser-Agent: meshwork-web-load\r\n"
                 f"Accept: application/json\r\n{extra}\r\n").encode("latin-1") for p in paths]
    reader = writer = None
    reused = False
    turn = index
    while time.monotonic() < deadline and stats.issued < args.max_requests:
        stats.issued += 1
        request = requests[turn % len(requests)]
        turn += 1
        for attempt in (0, 1):
            start = time.perf_counter()
            try:
                if writer is None:
                    reader, writer = await asyncio.wait_for(
                        asyncio.open_connection(host, port, limit=1 << 20), args.timeout)
                    stats.connections += 1
                    reused = False
                    peer = writer.get_extra_info("peername")[0]
                    if not ipaddress.ip_address(peer.split("%")[0]).is_loopback:  # "localhost" in /etc/hosts
                        sys.exit(f"web_load.py: {host} resolved to {peer}, not loopback: refusing")
                writer.write(request)
                status, size, keep_alive = await asyncio.wait_for(read_response(reader), args.timeout)
            except Closed:
                writer.close()
                writer = None
                if reused and attempt == 0:
                    continue
                stats.requests += 1
                stats.error("connection closed before an answer")
                break
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                    ValueError) as e:
                if writer is not None:
                    writer.close()
                    writer = None
                stats.requests += 1
                stats.error(f"{type(e).__name__}: {e}" if str(e) else type(e).__name__)
                await asyncio.sleep(0.01)  # a refused connection must not spin the loop
                break
            stats.requests += 1
            stats.latencies.append((time.perf_counter() - start) * 1000.0)
            stats.bytes += size
            stats.status[status] = stats.status.get(status, 0) + 1
            if not 200 <= status < 300:
                stats.error(f"HTTP {status}")
            if keep_alive:
                reused = True
            else:
                writer.close()
                writer = None
            break
    if writer is not None:
        writer.close()


def percentile(sorted_values, p):
    """Nearest rank; None when nothing was measured."""
    if not sorted_values:
        return None
    return sorted_values[max(0, math.ceil(p / 100.0 * len(sorted_values)) - 1)]


async def run(args):
    stats = Stats()
    began = time.monotonic()
    await asyncio.gather(*(client(i, args, stats, began + args.seconds) for i in range(args.clients)))
    elapsed = time.monotonic() - began
    lat = sorted(stats.latencies)
    return {
        "url": args.url, "paths": args.paths, "clients": args.clients, "requests": stats.requests,
        "errors": stats.errors, "seconds": round(elapsed, 3),
        "requests_per_s": round(stats.requests / elapsed, 1) if elapsed > 0 else 0.0,
        "p50_ms": percentile(lat, 50), "p95_ms": percentile(lat, 95), "p99_ms": percentile(lat, 99),
        "max_ms": lat[-1] if lat else None,
        "bytes": stats.bytes, "connections": stats.connections,
        "status": {str(k): v for k, v in sorted(stats.status.items())}, "error_samples": stats.error_samples,
    }


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", required=True, help="http://127.0.0.1:PORT (loopback only)")
    ap.add_argument("--paths", required=True, help="comma-separated request paths, e.g. /api/runs")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--max-requests", type=int, default=20000)
    ap.add_argument("--header", action="append", default=[], help="'Name: value', repeatable")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds per request (default 10)")
    ap.add_argument("--json", help="also write the result as JSON to this file")
    args = ap.parse_args(argv)
    url = urllib.parse.urlsplit(args.url)
    if url.scheme != "http":
        ap.error(f"--url: {args.url}: only http:// is supported")
    if url.hostname not in LOOPBACK:
        ap.error(f"--url: {args.url}: refusing to load host {url.hostname!r}: "
                 f"only loopback ({', '.join(sorted(LOOPBACK))}) may be loaded")
    try:
        args.port = url.port or 80
    except ValueError as e:
        ap.error(f"--url: {args.url}: {e}")
    args.host = url.hostname
    prefix = url.path.rstrip("/")
    args.paths = [prefix + p.strip() for p in args.paths.split(",") if p.strip()]
    if not args.paths or any(not p.startswith("/") or any(c in p for c in " \r\n") for p in args.paths):
        ap.error("--paths: comma-separated paths, each starting with / and without spaces")
    for h in args.header:
        if ":" not in h or "\r" in h or "\n" in h:
            ap.error(f"--header: {h!r}: expected 'Name: value'")
    if args.clients < 1 or args.seconds <= 0 or args.max_requests < 1 or args.timeout <= 0:
        ap.error("--clients, --seconds, --max-requests and --timeout must be positive")
    return args


def main(argv=None):
    args = parse_args(argv)
    result = asyncio.run(run(args))
    fmt = lambda v: "-" if v is None else f"{v:.2f}"
    columns = [("clients", str(result["clients"])), ("requests", str(result["requests"])),
               ("errors", str(result["errors"])), ("req/s", f"{result['requests_per_s']:.1f}"),
               ("p50 ms", fmt(result["p50_ms"])), ("p95 ms", fmt(result["p95_ms"])),
               ("p99 ms", fmt(result["p99_ms"])), ("bytes", str(result["bytes"]))]
    widths = [max(len(n), len(v)) for n, v in columns]
    print("  ".join(n.rjust(w) for (n, _), w in zip(columns, widths)))
    print("  ".join(v.rjust(w) for (_, v), w in zip(columns, widths)))
    if result["connections"] > result["clients"]:
        print(f"note: {result['connections']} connections for {result['clients']} clients "
              f"(the server closed keep-alive connections)")
    for text, count in result["error_samples"].items():
        print(f"error x{count}: {text}", file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
