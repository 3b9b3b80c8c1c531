"""A broker's Prometheus page (``metrics.listener``), read and parsed with
prometheus_client's own parser, for the tests of the metrics."""

from __future__ import annotations

import urllib.request


def scrape(url: str) -> dict[str, list]:
    """metric family name -> its samples."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url, timeout=10) as resp:
        assert resp.status == 200
        text = resp.read().decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def value(families: dict, name: str, **labels: str) -> float:
    """The first sample of family ``name`` with these labels (a summary's
    quantiles, not its _sum or _count)."""
    for sample in families[name]:
        if all(sample.labels.get(k) == v for k, v in labels.items()) and \
                not sample.name.endswith(("_sum", "_count", "_created")):
            return sample.value
    raise KeyError((name, labels))
