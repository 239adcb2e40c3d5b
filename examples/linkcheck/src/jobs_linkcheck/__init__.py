"""jobs-linkcheck: an example module of jobs, a small link checker.

The reference a module author copies (examples/linkcheck/README.md):

- :mod:`jobs_linkcheck.module` — the declaration the deployables load (entry point
  ``jobs.modules: linkcheck``);
- :mod:`jobs_linkcheck.crawl` — the pure crawl logic (URLs, links, the resumable frontier);
- :mod:`jobs_linkcheck.fetch` — one page fetched with httpx;
- :mod:`jobs_linkcheck.jobs` — the job types ``linkcheck_crawl`` and ``linkcheck_fetch``;
- :mod:`jobs_linkcheck.lifecycle` — the checkpoint and the end hooks;
- :mod:`jobs_linkcheck.records` — the SQL of the module's tables
  (:mod:`jobs_linkcheck.tables`, created by the chain :mod:`jobs_linkcheck.migrations`);
- :mod:`jobs_linkcheck.api` — the HTTP routes.
"""
