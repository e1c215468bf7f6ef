"""What an origin's robots.txt state means, decided without I/O: settings, records,
origins and the state machine. Nothing here imports Scrapy."""
