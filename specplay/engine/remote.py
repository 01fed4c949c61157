"""The HTTP backend (engine.base.Backend): one side of the pair as a running OpenAI-compatible vLLM server
(`vllm serve`), not an engine in this process.

- prompt: the server's own `/tokenize` (its chat template, its tokenizer), so both servers get exact ids;
- output: `/v1/completions` streamed with `return_token_ids`, so identity is checked on token ids;
- acceptance: the request's own counters from the final usage chunk (`stream_options.include_usage`, vLLM
  >= 0.29 with `--per-request-spec-decode-metrics summary|detailed`); else the server's `/metrics` counters
  after minus before (`vllm:spec_decode_num_*_total`), which other traffic on a shared server blurs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import threading
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import AsyncIterator
from urllib.parse import urlparse

import httpx

from specplay.core.events import GenerationRequest, SpecDecodeCounters
from specplay.engine.base import Chunk, EngineInfo, EngineStartError, checked_prompt_ids
from specplay.engine.kv_cache import served_kv_cache_bytes
from specplay.engine.prometheus import samples as _samples

# Prometheus names as `vllm serve` exposes its spec-decode counters
METRIC_PREFIX = "vllm:spec_decode_num_"
# httpx's default pool opens at most 100 connections and queues the rest inside the client, so a bench at
# 128 or 256 in flight measured 100 streams plus a wait that counted as TTFT. Streams are bounded by the
# caller (the bench's --max-concurrency, the page's one run at a time), not by the pool.
STREAM_LIMITS = httpx.Limits(max_connections=None, max_keepalive_connections=64)
HEALTH_CHECK_TIMEOUT_S = 5.0  # a live server answers /health at once, even while it generates


def stream_client(settings: "RemoteSettings") -> httpx.AsyncClient:
    """The client the streams go through: one connection per stream in flight, however many."""
    return httpx.AsyncClient(timeout=settings.timeout_s, headers=settings.headers(), limits=STREAM_LIMITS)


# A server that streams text without token ids (another OpenAI-compatible server, a vLLM older than
# `return_token_ids`) gives nothing to compare token for token: refused (at the warm-up, so the load says
# it), never "identical, the same 0 tokens".
NO_TOKEN_IDS = ("the {role} server streams text without token ids, so the outputs can't be compared token for "
                "token: it needs a vLLM server that takes return_token_ids")


class RemoteError(RuntimeError):
    """A server answered with an error or not at all; the message names the side, never its address."""


@dataclass(frozen=True)
class RemoteSettings:
    """One server, as the operator set it (command line or config file, never the page). `api_key_env` names
    the environment variable holding its key, so the key itself is never printed or stored."""

    role: str
    url: str
    api_key_env: str = "VLLM_API_KEY"
    timeout_s: float = 60.0  # per request: connect, and each wait for the next streamed chunk
    start_timeout_s: float = 600.0  # until /health answers 200
    pids: tuple[int, ...] = ()  # the server's processes when it runs on this machine (memory telemetry)
    token_ids_only: bool = False  # the server has no tokenizer (dummy weights, --skip-tokenizer-init)
    kv_bytes_per_token: int | None = None  # its models' KV bytes a token (not over HTTP): for kv_cache_bytes

    def __post_init__(self):
        parsed = urlparse(self.url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname or parsed.path not in ("", "/"):
            raise ValueError(f"{self.role} server: expected a URL like http://HOST:PORT, got {self.url!r}")

    @property
    def base(self) -> str:
        return self.url.rstrip("/")

    def headers(self) -> dict:
        key = os.environ.get(self.api_key_env)
        return {"Authorization": f"Bearer {key}"} if key else {}


def parse_metrics(text: str) -> SpecDecodeCounters:
    """The spec-decode counters in a Prometheus text page (`GET /metrics`), summed over engines."""
    totals = {"drafts": 0.0, "draft_tokens": 0.0, "accepted_tokens": 0.0}
    per_pos: dict[int, float] = {}
    for name, labels, value in _samples(text, METRIC_PREFIX):
        metric = name[len(METRIC_PREFIX):]
        if metric == "accepted_tokens_per_pos_total":
            position = int(labels["position"])
            per_pos[position] = per_pos.get(position, 0.0) + value
        elif metric.endswith("_total") and metric[:-len("_total")] in totals:
            totals[metric[:-len("_total")]] += value
    positions = tuple(int(per_pos[i]) for i in range(len(per_pos)))
    return SpecDecodeCounters(int(totals["drafts"]), int(totals["draft_tokens"]), int(totals["accepted_tokens"]),
                              positions)


KV_USAGE_METRIC = "vllm:kv_cache_usage_perc"


def parse_kv_usage(text: str) -> float | None:
    """`vllm:kv_cache_usage_perc` (0-1) in a Prometheus text page, the largest over the server's engines."""
    try:
        values = [value for name, _, value in _samples(text, KV_USAGE_METRIC) if name == KV_USAGE_METRIC]
    except ValueError:  # a garbled page: no figure, as when the server doesn't answer
        return None
    return max(values) if values else None


def usage_counters(chunk: dict) -> SpecDecodeCounters | None:
    """The request's own counters from the final usage chunk's `metrics.speculative_decoding`, if present."""
    spec = (chunk.get("metrics") or {}).get("speculative_decoding")
    if not spec or "acceptance_histogram" not in spec:
        return None
    return SpecDecodeCounters.from_histogram(spec["acceptance_histogram"], spec.get("num_draft_tokens", 0),
                                             spec.get("per_step_drafted"))  # --per-request-spec-decode-metrics detailed


class RemoteEngine:
    """A started server plus what the pair asks of an engine. Async methods run on the pair's loop."""

    def __init__(self, settings: RemoteSettings):
        self.settings = settings
        self.role = settings.role
        self.pids: list[int] = list(settings.pids)
        self.load_seconds: float | None = None
        self.max_model_len = 0
        self.model: str | None = None  # the id the server serves
        self.model_root: str | None = None  # where it loaded it from: two servers should agree
        self.has_spec_metrics = False  # /metrics carries spec-decode counters: a speculative config is set
        self.per_request_metrics = False  # the last speculative request's usage chunk carried its counters
        self.num_speculative_tokens: int | None = None
        self.kv_cache_bytes: int | None = None  # what the server reserved (kv_cache.served_kv_cache_bytes)
        self._alive = False
        self._sync = httpx.Client(timeout=settings.timeout_s, headers=settings.headers())
        self._client: httpx.AsyncClient | None = None
        self._streams: dict[str, httpx.Response] = {}
        self._aborted: set[str] = set()
        self._metrics_cache: tuple[float, str | None] | None = None  # (when, the /metrics page)
        self._parsed_page: str | None = None  # the page _last_counters were read from
        # live_counters' scrapes, one at a time, off the pair's loop (a scrape there stalls the stream's clock)
        self._scraper = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=f"metrics-{self.role}")
        self._scraping = threading.Lock()
        # The page decodes growing prefixes of one output many times a second: one request per distinct
        # prefix, cached with this engine (a reload's new engine starts afresh)
        self._detokenize = lru_cache(maxsize=4096)(self._detokenize_uncached)
        self._last_counters = SpecDecodeCounters()

    # -- life cycle ------------------------------------------------------------------------------------
    async def start(self) -> None:
        s, t0 = self.settings, time.monotonic()
        self._client = stream_client(s)
        while True:
            try:
                if (await self._client.get(f"{s.base}/health")).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() - t0 > s.start_timeout_s:
                raise EngineStartError(f"{self.role} server did not answer /health within {s.start_timeout_s:.0f} s")
            await asyncio.sleep(1.0)
        models = await self._get_json("/v1/models")
        served = (models.get("data") or [{}])[0]
        self.model, self.model_root = served.get("id"), served.get("root")
        self.max_model_len = int(served.get("max_model_len") or 0)
        metrics = (await self._client.get(f"{s.base}/metrics")).text
        self.has_spec_metrics = METRIC_PREFIX in metrics
        self.kv_cache_bytes = served_kv_cache_bytes(metrics, s.kv_bytes_per_token)
        self._alive = True
        self.load_seconds = time.monotonic() - t0

    async def _get_json(self, path: str) -> dict:
        try:
            response = await self._client.get(f"{self.settings.base}{path}")
            response.raise_for_status()
            return response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise EngineStartError(f"{self.role} server: GET {path} failed ({type(exc).__name__})") from exc

    def info(self) -> EngineInfo:
        """What can be read off a server: its model and whether it drafts; the rest isn't exposed over HTTP."""
        return EngineInfo(backend="remote", model=self.model, num_speculative_tokens=self.num_speculative_tokens,
                          per_request_metrics=self.per_request_metrics if self.has_spec_metrics else None,
                          kv_cache_bytes=self.kv_cache_bytes)

    def is_alive(self) -> bool:
        return self._alive

    def check_alive(self) -> bool:
        """GET /health, for the page's watcher while nobody runs (every few seconds): a server that went away
        is noticed before a visitor's run fails on it. Only ever marks the server gone."""
        if self._alive:
            try:
                response = self._sync.get(f"{self.settings.base}/health", timeout=HEALTH_CHECK_TIMEOUT_S)
                self._alive = response.status_code == 200
            except (httpx.HTTPError, RuntimeError):  # RuntimeError: the client closed by a shutdown meanwhile
                self._alive = False
        return self._alive

    stop_grace_s = 0.0  # nothing to wait for: the server outlives this engine
    devices: tuple[int, ...] = ()  # the server's own affair

    @property
    def token_ids_only(self) -> bool:
        return self.settings.token_ids_only

    def shutdown(self) -> None:
        """Forget the server (it keeps running: whoever started it stops it)."""
        self._alive = False
        self._scraper.shutdown(wait=False)
        self._sync.close()
        self._client = None  # its connections close with the loop; closing needs the loop

    # -- tokens ----------------------------------------------------------------------------------------
    def prompt_token_ids(self, request: GenerationRequest) -> list[int]:
        return checked_prompt_ids(request, self._template_ids, self.max_model_len, "the servers'")

    def _template_ids(self, text: str) -> list[int]:
        """The server's own chat template and tokenizer (`/tokenize` with messages)."""
        body = {"model": self.model, "messages": [{"role": "user", "content": text}], "add_generation_prompt": True}
        return self._post("/tokenize", body).get("tokens") or []

    def tokenize_text(self, text: str) -> list[int]:
        """Plain text to ids, no template: two servers whose tokenizers differ disagree here."""
        return self._post("/tokenize", {"model": self.model, "prompt": text, "add_special_tokens": False})["tokens"]

    def decode(self, token_ids) -> str:
        return self._detokenize(tuple(int(t) for t in token_ids)) if token_ids else ""

    def _detokenize_uncached(self, token_ids: tuple[int, ...]) -> str:
        return self._post("/detokenize", {"model": self.model, "tokens": list(token_ids)}).get("prompt", "")

    def _post(self, path: str, body: dict) -> dict:
        try:
            response = self._sync.post(f"{self.settings.base}{path}", json=body)
        except httpx.HTTPError as exc:
            raise RemoteError(f"the {self.role} server did not answer {path} ({type(exc).__name__})") from exc
        if response.status_code != 200:
            raise RemoteError(f"the {self.role} server refused {path}: HTTP {response.status_code} "
                              f"{_error_text(response.text)}")
        return response.json()

    # -- counters --------------------------------------------------------------------------------------
    def _metrics_page(self, max_age_s: float, get) -> str | None:
        """GET /metrics, shared by the counters and the KV line: a page younger than `max_age_s` is reused
        (a failed scrape too, as None). `get` is the caller's client: the pair's, or the sampler thread's own."""
        now = time.monotonic()
        cached = self._metrics_cache
        if cached and now - cached[0] < max_age_s:
            return cached[1]
        try:
            text = get(f"{self.settings.base}/metrics").text
        except httpx.HTTPError:
            text = None
        self._metrics_cache = (now, text)
        return text

    def counters(self) -> SpecDecodeCounters:
        """The server's counters (GET /metrics, blocking), at most 5 scrapes a second; the last ones read while
        the server doesn't answer. For the run's before and after, outside any stream."""
        text = self._metrics_page(0.2, self._sync.get)
        if text is None or text is self._parsed_page:  # no answer, or the page already read: nothing new
            return self._last_counters
        self._parsed_page = text
        try:
            self._last_counters = parse_metrics(text)
        except ValueError:  # a garbled page: the last counters stand, as when the server doesn't answer
            pass
        return self._last_counters

    def live_counters(self) -> SpecDecodeCounters:
        """The counters last scraped, at once; a newer scrape starts in the background when they are older than
        0.2 s. The pair asks once a chunk, on its loop: a blocking scrape there (50 ms on a busy server) held
        the next chunks back and made the speculative side look slower than it was."""
        cached = self._metrics_cache
        if cached and time.monotonic() - cached[0] < 0.2:  # a page this recent is read already: no new scrape
            return self._last_counters
        if self._scraping.acquire(blocking=False):
            try:
                self._scraper.submit(self._scrape_in_background)
            except RuntimeError:  # shut down
                self._scraping.release()
        return self._last_counters

    def _scrape_in_background(self) -> None:
        try:
            self.counters()
        finally:
            self._scraping.release()

    def kv_cache_usage(self) -> float | None:
        """The server's KV cache in use (0-1, `vllm:kv_cache_usage_perc` from GET /metrics), scraped at most
        twice a second; None when the server doesn't answer (the memory chart then draws no line)."""
        text = self._metrics_page(0.5, lambda url: httpx.get(url, headers=self.settings.headers(), timeout=1.0))
        return parse_kv_usage(text) if text is not None else None

    # -- streaming -------------------------------------------------------------------------------------
    async def stream(self, request_id: str, prompt_token_ids: list[int],
                     request: GenerationRequest) -> AsyncIterator[Chunk]:
        """Chunks as the server streams them; the finishing chunk waits for the usage chunk behind it, which
        carries the request's own spec-decode counters."""
        body = {"model": self.model, "prompt": list(prompt_token_ids), "max_tokens": request.max_tokens,
                "temperature": request.temperature, "stream": True, "return_token_ids": True,
                "ignore_eos": request.ignore_eos, "stream_options": {"include_usage": True}}
        if request.temperature > 0:
            body["seed"] = request.seed
        if request.cache_salt:  # as in-process: one visitor's cached prefix doesn't time another's
            body["cache_salt"] = request.cache_salt
        held: Chunk | None = None
        finished = False
        async for event in self._events(request_id, body):
            if event.get("choices"):
                choice = event["choices"][0]
                if choice.get("token_ids") is None and choice.get("text"):
                    raise RemoteError(NO_TOKEN_IDS.format(role=self.role))
                chunk = Chunk(list(choice.get("token_ids") or []), choice.get("text") or "",
                              choice.get("finish_reason") is not None, choice.get("finish_reason"))
                if chunk.finished:
                    held, finished = chunk, True
                elif chunk.token_ids or chunk.text:
                    yield chunk
            elif event.get("usage") is not None and held is not None:
                counters = usage_counters(event)
                self._note_metrics(event, counters)
                yield held._replace(counters=counters)
                held = None
        aborted = request_id in self._aborted
        self._aborted.discard(request_id)
        if held is not None:  # a server that sends no usage chunk
            yield held
        elif not finished and not aborted:
            self._alive = False  # the connection closed before the answer ended: the server went away
            raise RemoteError(f"the {self.role} server's stream ended before its answer did")

    def _note_metrics(self, event: dict, counters: SpecDecodeCounters | None) -> None:
        if counters is not None:
            self.per_request_metrics = True
            spec = event["metrics"]["speculative_decoding"]
            self.num_speculative_tokens = spec.get("num_spec_tokens") or self.num_speculative_tokens

    async def _events(self, request_id: str, body: dict) -> AsyncIterator[dict]:
        url = f"{self.settings.base}/v1/completions"
        try:
            async with self._client.stream("POST", url, json=body) as response:
                if response.status_code != 200:
                    text = (await response.aread()).decode(errors="replace")
                    raise RemoteError(f"the {self.role} server refused the request: HTTP "
                                      f"{response.status_code} {_error_text(text)}")
                self._streams[request_id] = response
                async for line in response.aiter_lines():
                    if not line.startswith("data: ") or line == "data: [DONE]":
                        continue
                    event = json.loads(line[len("data: "):])
                    if "error" in event and not event.get("choices"):
                        raise RemoteError(f"the {self.role} server failed mid-stream: "
                                          f"{_error_text(json.dumps(event))}")
                    yield event
        except httpx.HTTPError as exc:
            if request_id in self._aborted:
                return  # closed by abort(): the stream ends here
            self._alive = not isinstance(exc, (httpx.ConnectError, httpx.RemoteProtocolError))
            raise RemoteError(f"the {self.role} server's stream broke ({type(exc).__name__})") from exc
        finally:
            self._streams.pop(request_id, None)

    async def abort(self, request_id: str) -> None:
        """Close the request's stream: vLLM's server aborts a request whose client went away."""
        response = self._streams.get(request_id)
        if response is not None:
            self._aborted.add(request_id)
            await response.aclose()


def _error_text(text: str, limit: int = 200) -> str:
    """The server's error message, short; JSON bodies as their message."""
    try:
        body = json.loads(text)
        text = (body.get("error") or {}).get("message") or body.get("message") or text
    except (ValueError, AttributeError):
        pass
    return " ".join(str(text).split())[:limit]

