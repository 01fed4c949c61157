"""Remote mode keeps as many streams in flight as the caller asks for. httpx's default pool stops at 100
connections, so `specplay bench --max-concurrency 128,256` against two servers measured 100 streams and a
queue inside the client (the H200 crossover sweep: 1.18× at both 128 and 256, TTFT 2.3 s). Real sockets:
a loopback HTTP server that answers only once every request it expects is open at once."""

from __future__ import annotations

import asyncio

from specplay.engine.remote import RemoteSettings, stream_client

WANTED = 150  # past httpx's default of 100


def test_the_stream_client_holds_more_than_100_requests_in_flight():
    async def scenario() -> int:
        open_now, peak, everyone = 0, 0, asyncio.Event()

        async def handle(reader, writer):
            nonlocal open_now, peak
            await reader.readuntil(b"\r\n\r\n")
            open_now += 1
            peak = max(peak, open_now)
            if open_now >= WANTED:
                everyone.set()
            try:
                await asyncio.wait_for(everyone.wait(), 5.0)
            except asyncio.TimeoutError:
                pass
            open_now -= 1
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok")
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=512)
        port = server.sockets[0].getsockname()[1]
        settings = RemoteSettings(role="speculative", url=f"http://127.0.0.1:{port}", timeout_s=30.0)
        async with server, stream_client(settings) as client:
            replies = await asyncio.gather(*(client.get(f"{settings.base}/v1/completions") for _ in range(WANTED)))
        assert all(r.status_code == 200 for r in replies)
        return peak

    assert asyncio.run(scenario()) == WANTED
