"""Reading a Prometheus text page (`GET /metrics` of a `vllm serve` server): the one reader the remote
backend's counters and KV figures share."""

from __future__ import annotations


def samples(text: str, prefix: str):
    """(sample name, labels, value) of each sample in a Prometheus text page whose name starts with `prefix`;
    ValueError for a malformed page (prometheus_client's parser, installed with vLLM)."""
    from prometheus_client.parser import text_string_to_metric_families

    # only the lines of these metrics (their samples, HELP and TYPE) go to the parser: a busy server's page is
    # ~82 kB, and parsing it whole on every scrape took CPU from the streams being timed
    text = "\n".join(line for line in text.splitlines() if prefix in line)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith(prefix):
                yield sample.name, sample.labels, sample.value
