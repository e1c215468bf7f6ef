"""What an origin's robots.txt state means, decided without I/O.

Settings (``Config``), the stored record of an origin (``OriginRecord``), origin
normalisation and the fetch-outcome state machine (``RobotsPolicy``, with an injected
clock). Imports only the ``robotstxt`` layer; nothing here touches Scrapy at import time.
"""
