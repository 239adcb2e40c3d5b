"""Write a search-analytics CSV export of N rows (default 1,000,000) for the import benchmark.

The rows look like a Search Console export by page, query, date, country and device: a site of
``--pages`` URLs (spelled in several equivalent ways, as exports do: tracking parameters, a
trailing slash, an uppercase host), ``--queries`` queries per page, GSC-style metrics (a CTR
written as a percentage). Every row is distinct on (page, query, date, country, device), so a
clean import inserts all of them. Deterministic for a given ``--seed``. The file is written
streaming: generating 1,000,000 rows holds one row in memory at a time.

    uv run python bench/imports/generate_csv.py /tmp/gsc-1m.csv --rows 1000000
"""

from __future__ import annotations

import argparse
import csv
import random
import sys
from datetime import date, timedelta
from pathlib import Path

WORDS = [
    "seo",
    "audit",
    "crawl",
    "guide",
    "best",
    "cheap",
    "buy",
    "review",
    "paris",
    "lyon",
    "shoes",
    "running",
    "trail",
    "men",
    "women",
    "kids",
    "sale",
    "price",
    "near",
    "me",
    "how",
    "to",
    "what",
    "is",
    "vs",
    "2025",
    "free",
    "tool",
    "online",
    "template",
    "example",
    "checklist",
]
COUNTRIES = ("fra", "bel", "che", "can", "usa", "gbr", "deu", "esp")
DEVICES = ("DESKTOP", "MOBILE", "TABLET")
HEADER = ("Date", "Page", "Query", "Country", "Device", "Clicks", "Impressions", "CTR", "Position")


def page_url(rng: random.Random, index: int, domain: str) -> str:
    """The URL of page ``index``, in one of the spellings an export may use."""
    path = f"/blog/{index // 100}/article-{index}"
    spelling = rng.randrange(10)
    if spelling == 0:
        return f"https://{domain}{path}/?utm_source=newsletter"
    if spelling == 1:
        return f"https://{domain.upper()}{path}"
    return f"https://{domain}{path}"


def generate(path: Path, rows: int, *, pages: int, queries: int, seed: int, domain: str) -> None:
    """Write ``rows`` data rows (plus a header) to ``path``."""
    if rows < 0 or pages < 1 or queries < 1:
        raise ValueError("rows must be >= 0, pages and queries >= 1")
    rng = random.Random(seed)
    start = date(2025, 1, 1)
    per_day = pages * queries
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(HEADER)
        for i in range(rows):
            page = i % pages
            query_index = (i // pages) % queries
            day = start + timedelta(days=i // per_day)
            words = [WORDS[(page * 7 + query_index * 13 + k) % len(WORDS)] for k in range(3)]
            impressions = rng.randrange(1, 5000)
            clicks = rng.randrange(0, max(1, impressions // 10))
            writer.writerow(
                (
                    day.isoformat(),
                    page_url(rng, page, domain),
                    f"{' '.join(words)} {query_index}",
                    COUNTRIES[(page + query_index) % len(COUNTRIES)],
                    DEVICES[(page + query_index) % len(DEVICES)],
                    clicks,
                    impressions,
                    f"{100 * clicks / impressions:.2f}%",
                    f"{rng.uniform(1, 80):.1f}",
                )
            )


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("path", type=Path, help="where to write the CSV")
    parser.add_argument("--rows", type=int, default=1_000_000, help="data rows (default 1,000,000)")
    parser.add_argument("--pages", type=int, default=20_000, help="distinct pages (default 20,000)")
    parser.add_argument("--queries", type=int, default=50, help="queries per page and day")
    parser.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    parser.add_argument("--domain", default="www.example.com", help="the site's host")
    args = parser.parse_args(argv)
    generate(
        args.path,
        args.rows,
        pages=args.pages,
        queries=args.queries,
        seed=args.seed,
        domain=args.domain,
    )
    print(f"wrote {args.rows} rows to {args.path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
