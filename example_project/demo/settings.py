"""Settings of the scrapy-rep demo project."""

BOT_NAME = "demo"
SPIDER_MODULES = ["demo.spiders"]
NEWSPIDER_MODULE = "demo.spiders"

# --- scrapy-rep ---------------------------------------------------------------------
# The add-on swaps Scrapy's RobotsTxtMiddleware for scrapy-rep's; ROBOTSTXT_OBEY stays
# the on/off switch.
ADDONS = {"scrapy_rep.Addon": 0}
ROBOTSTXT_OBEY = True

# The product token matched against robots.txt "User-agent:" lines, for every spider
# that does not override it (spiders "nightowl" and "archive" do, "tour" does not).
ROBOTSTXT_USER_AGENT = "DemoBot"
USER_AGENT = "DemoBot/1.0 (+https://example.invalid/demobot)"

# A process-local store: every run starts with nothing cached, so the demo shows the
# same fetches (503 then 200, the redirect chain, the slow answer) each time. The
# default SQLite store in .scrapy/ would remember robots.txt for 24 h between runs.
REP_STORAGE = "memory"

# The flaky origin answers 503 first. The default first retry comes after 10 s; 1 s
# keeps the demo short while still showing requests waiting for the retry.
REP_RETRY_BACKOFF = 1

# The compliance record (docs/record.md): every robots.txt copy that decided a request
# and one line per decision; `scrapy robots verify` / `report` read it. run_demo.py
# points it at its own temporary directory.
REP_RECORD = "records/%(name)s-%(time)s-%(pid)s.jsonl.gz"

# --- the demo's own components -------------------------------------------------------
DOWNLOADER_MIDDLEWARES = {
    # Before scrapy-rep (100): sees every request first and every drop last.
    "demo.middlewares.OriginSlotMiddleware": 40,
    "demo.middlewares.CrawlLedger": 50,
}
# Where CrawlLedger writes its JSON record at spider close (run_demo.py sets it).
DEMO_LEDGER = None

# --- keep the demo local and quick ------------------------------------------------------
# The demo site is on 127.0.0.1; a proxy from the environment would only get in the way.
HTTPPROXY_ENABLED = False
# No console port to bind, nothing to wait for after the crawl.
TELNETCONSOLE_ENABLED = False
DOWNLOAD_TIMEOUT = 15
LOG_LEVEL = "INFO"
