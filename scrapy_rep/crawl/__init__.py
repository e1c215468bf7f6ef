"""The Scrapy runtime around the policy: per-origin fetch sequencing and held
requests (``coordinator``), the robots.txt download (``fetcher``), per-request verdicts
and Crawl-delay (``decide``) and the closing summary (``report``)."""
