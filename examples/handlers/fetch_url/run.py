"""Fetch one URL with httpx. A network error or a 5xx exits 75 (retryable); a 4xx fails."""

import json
import re
import sys

import httpx

RETRYABLE = 75

job = json.loads(sys.stdin.readline())
url = job["params"]["url"]
print("PROGRESS:0.1 connecting", file=sys.stderr, flush=True)
try:
    with httpx.Client(timeout=job["params"]["timeout_s"], follow_redirects=True) as client:
        response = client.get(url)
except httpx.HTTPError as error:
    print(f"cannot fetch {url}: {error}", file=sys.stderr)
    print(json.dumps({"error": f"cannot fetch {url}: {type(error).__name__}"}))
    sys.exit(RETRYABLE)
print("PROGRESS:0.8 parsing", file=sys.stderr, flush=True)
if response.status_code >= 500:
    print(json.dumps({"error": f"{url} answered {response.status_code}"}))
    sys.exit(RETRYABLE)
if response.status_code >= 400:
    print(json.dumps({"error": f"{url} answered {response.status_code}"}))
    sys.exit(1)
match = re.search(r"<title[^>]*>(.*?)</title>", response.text, re.IGNORECASE | re.DOTALL)
report = {
    "url": str(response.url),
    "status_code": response.status_code,
    "bytes": len(response.content),
    "title": match.group(1).strip() if match else None,
}
print("PROGRESS:1 done", file=sys.stderr, flush=True)
print(json.dumps(report))
